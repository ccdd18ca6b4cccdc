"""Element-wise math over a per-step list of tensors (a policy-gradient loss built step by step):
`for lp, r in zip(log_probs, returns): losses.append(-lp * r)` and then `torch.cat(losses)`, where one
expression on the stacked list would do."""

from __future__ import annotations

import re
from typing import Optional, Union

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import flatten_targets
from torchlint.lint.walk import descendants
from torchlint.semantic.sample_syntax import flatten_names, names_in, statements_of
from torchlint.semantic.values import value_kinds

_LOSSES = frozenset(
    "torch.nn.functional." + name
    for name in "cross_entropy binary_cross_entropy binary_cross_entropy_with_logits kl_div".split()
)

# Lists filled once per step of an episode (what a policy-gradient loss walks).
_PER_STEP = re.compile(r"log_?probs?|rewards?|returns|advantages?|saved_|entrop|trajector|episode", re.IGNORECASE)


def elementwise_list_loop(context: Context, node: cst.For) -> bool:
    """`for lp, r in zip(log_probs, returns): losses.append(-lp * r)` and then `torch.cat(losses)`: the
    same arithmetic on every element of a list, where one expression on the stacked list would do. Also
    the actor-critic shape (`advantage = r - value.item()`, a loss of the functional API appended per step)
    and a sum built step by step (`loss += -lp * r`) that is then back-propagated. The results going to
    `torch.cat`/`torch.stack` or `.backward()` prove they are tensors."""
    elements = _list_loop_elements(node.target, node.iter)
    if elements is None:
        return False
    statements = list(statements_of(node.body))
    if not statements:
        return False
    local = set(elements)
    collectors: list[str] = []
    losses: list[str] = []  # lists of functional-API losses: tensors whatever happens to them next
    sums: list[str] = []
    for step in statements:
        if isinstance(step, cst.Assign) and len(step.targets) == 1 and isinstance(step.targets[0].target, cst.Name):
            name = step.targets[0].target.value
            value = step.value
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract)) and _is_name(value.left, name):
                value = value.right  # `loss = loss + (-lp * r)`, `loss = loss - lp * r`
                if not _arithmetic_of(value, local, strict=True):
                    return False
                sums.append(name)
                continue
            if not _arithmetic_of(value, local, conversions=True):
                return False
            local.add(name)
        elif isinstance(step, cst.AugAssign) and isinstance(step.target, cst.Name):
            if not isinstance(step.operator, (cst.AddAssign, cst.SubtractAssign)) or not _arithmetic_of(step.value, local, strict=True):
                return False
            sums.append(step.target.value)
        elif isinstance(step, cst.Expr) and isinstance(step.value, cst.Call):
            call = step.value
            if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "append" and len(call.args) == 1):
                return False
            collector = call.func.value
            value = call.args[0].value
            if not isinstance(collector, cst.Name):
                return False
            if _functional_loss_of(context, value, local):
                losses.append(collector.value)
            elif _arithmetic_of(value, local, strict=True):
                collectors.append(collector.value)
            else:
                return False
        else:
            return False
    if not collectors and not losses and not sums:
        return False
    if sums and not _walks_steps(context, node.iter):
        return False  # `total += w * loss` over a few task losses: a weighted sum, not a trajectory
    return all(_stacked_after(context, node, name) for name in collectors) and all(
        _backpropagated_after(context, node, name) for name in sums
    ) and (not losses or bool(sums) or any(_stacked_after(context, node, name) for name in collectors + losses))


def elementwise_list_comprehension(context: Context, node: Union[cst.ListComp, cst.GeneratorExp]) -> bool:
    """`torch.cat([-lp * r for lp, r in zip(log_probs, returns)])`."""
    for_in = node.for_in
    if for_in.inner_for_in is not None or for_in.ifs:
        return False
    elements = _list_loop_elements(for_in.target, for_in.iter)
    if elements is None or not _arithmetic_of(node.elt, set(elements), strict=True):
        return False
    parent = context.parent(node)
    call = context.parent(parent) if isinstance(parent, cst.Arg) else None
    return isinstance(call, cst.Call) and call.args[0] is parent and _stacks(context, call)



def _walks_steps(context: Context, iterable: cst.BaseExpression) -> bool:
    """The loop walks an episode: lists named as per-step values, a tensor read one element at a time
    (`zip(returns_tensor, self.log_probs)`), or a list attribute the class fills step by step
    (`self.action_memory.append(log_prob)` in another method)."""
    if _PER_STEP.search(context.code(iterable)):
        return True
    lists = [a.value for a in iterable.args] if isinstance(iterable, cst.Call) else [iterable]
    kinds = value_kinds(context)
    return any(kinds.is_tensor(e) or _filled_by_class(context, e) for e in lists)


def _filled_by_class(context: Context, expr: cst.BaseExpression) -> bool:
    """`self.memory` appended to in a method of the enclosing class other than the one that walks it."""
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"):
        return False
    walker = context.enclosing(expr, cst.FunctionDef)
    owner = context.enclosing(expr, cst.ClassDef)
    if owner is None:
        return False
    for method in owner.body.body:
        if not isinstance(method, cst.FunctionDef) or method is walker:
            continue
        for node in descendants(method.body):
            if (
                isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "append"
                and isinstance(node.func.value, cst.Attribute) and context.code(node.func.value) == context.code(expr)
            ):
                return True
    return False


def _stacked_after(context: Context, loop: cst.For, name: str) -> bool:
    """`name` is passed to torch.cat/torch.stack after `loop`, in the same function."""
    scope = context.enclosing(loop, cst.FunctionDef) or context.module
    after = False
    for node in descendants(scope):  # document order
        if node is loop:
            after = True
        elif after and isinstance(node, cst.Call) and node.args and _stacks(context, node):
            first = node.args[0].value
            if isinstance(first, cst.Name) and first.value == name:
                return True
    return False



def _stacks(context: Context, call: cst.Call) -> bool:
    return (context.qualname(call) or "") in ("torch.stack", "torch.cat", "torch.concat", "torch.concatenate")


def _list_loop_elements(target: cst.BaseExpression, iterable: cst.BaseExpression) -> Optional[list[str]]:
    """The names bound to list elements in `for e in xs` / `for a, b in zip(xs, ys)` (xs a name or attribute)."""
    lists: list[cst.BaseExpression]
    if isinstance(iterable, (cst.Name, cst.Attribute)):
        lists = [iterable]
    elif isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "zip":
        lists = [a.value for a in iterable.args]
        if any(a.keyword is not None or a.star for a in iterable.args):
            return None
    else:
        return None
    if not all(isinstance(e, (cst.Name, cst.Attribute)) for e in lists):
        return None
    names = flatten_names(target)
    if not names or len(names) != len(flatten_targets(target)):
        return None
    return names


def _arithmetic_of(expr: cst.BaseExpression, elements: set[str], strict: bool = False, conversions: bool = False) -> bool:
    """Element-wise arithmetic (+ - * / and unary minus) over names, attributes and numbers; with `strict`,
    it must also multiply or combine an element (a bare element appended is a copy, not math); with
    `conversions`, an element read as a number (`value.item()`) counts as one."""
    def walk(node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.BinaryOperation):
            return isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)) and walk(node.left) and walk(node.right)
        if isinstance(node, cst.UnaryOperation):
            return isinstance(node.operator, cst.Minus) and walk(node.expression)
        if conversions and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and not node.args:
            return node.func.attr.value == "item" and isinstance(node.func.value, cst.Name)
        return isinstance(node, (cst.Name, cst.Attribute, cst.Integer, cst.Float))

    if not walk(expr):
        return False
    uses = names_in(expr) & elements
    if not uses:
        return False
    return not strict or isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation))


def _functional_loss_of(context: Context, value: cst.BaseExpression, elements: set[str]) -> bool:
    """`F.smooth_l1_loss(value, torch.tensor([r]))`: a loss of the functional API on one step's elements
    (not an element called as a module: `F.interpolate(f(x), ...)` walks a list of layers)."""
    if not isinstance(value, cst.Call):
        return False
    qualname = context.qualname(value) or ""
    if not qualname.startswith("torch.nn.functional.") or not (qualname.endswith("loss") or qualname in _LOSSES):
        return False
    called = any(isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in elements for n in descendants(value))
    return not called and any(names_in(arg.value) & elements for arg in value.args)


def _backpropagated_after(context: Context, loop: cst.For, name: str) -> bool:
    """`name.backward()` (or that of a value computed from it) after `loop`, in the same function."""
    scope = context.enclosing(loop, cst.FunctionDef) or context.module
    after = False
    derived = {name}
    for node in descendants(scope):  # document order
        if node is loop:
            after = True
        elif not after:
            continue
        elif isinstance(node, cst.Assign) and names_in(node.value) & derived:
            for target in node.targets:
                derived.update(flatten_names(target.target))
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
            if names_in(node.func.value) & derived:
                return True
    return False


def _is_name(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name
