"""Element-wise math over a per-step list of tensors (a policy-gradient loss built step by step):
`for lp, r in zip(log_probs, returns): losses.append(-lp * r)` and then `torch.cat(losses)`, where one
expression on the stacked list would do.

The lists are walked directly (`zip(xs, ys)`) or by position (`for i in range(len(xs))`, `enumerate(xs)`,
reading `ys[i]`); the math may pass an element through a method that keeps it one value per step
(`lp.squeeze()`, `ret.detach()`, `torch.tensor(ret)`); the results go to `torch.stack`/`torch.cat`, or to
Python's `sum()` that is then back-propagated (which proves they are tensors)."""

from __future__ import annotations

import re
from dataclasses import dataclass
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

# Tensor methods that keep one step's value one value per step (a scalar log-probability stays a scalar).
_KEEPS_STEP = frozenset("detach squeeze unsqueeze float double clone".split())

# Lists filled once per step of an episode (what a policy-gradient loss walks).
_PER_STEP = re.compile(r"log_?probs?|rewards?|returns|advantages?|saved_|entrop|trajector|episode", re.IGNORECASE)


def elementwise_list_loop(context: Context, node: cst.For) -> bool:
    """`for lp, r in zip(log_probs, returns): losses.append(-lp * r)` and then `torch.cat(losses)`: the
    same arithmetic on every element of a list, where one expression on the stacked list would do. Also
    the actor-critic shape (`advantage = r - value.item()`, a loss of the functional API appended per step)
    and a sum built step by step (`loss += -lp * r`) that is then back-propagated. The results going to
    `torch.cat`/`torch.stack` or `.backward()` prove they are tensors. Over lists that hold an episode's
    steps (`_walks_steps`), also the other spellings of the same loss: by position, through methods that keep
    a step's value, appended to an attribute, summed with `sum()`."""
    walk = _list_walk(node.target, node.iter)
    if walk is None:
        return False
    steps = _walks_steps(context, node.iter)
    if walk.index is not None and not steps:
        return False  # `for i in range(len(feats))`: levels or layers as likely as the steps of an episode
    statements = list(statements_of(node.body))
    if not statements:
        return False
    local = set(walk.elements)
    index = walk.index
    collectors: list[str] = []  # the code of each list appended to (`losses`, `self.losses`)
    losses: list[str] = []  # lists of functional-API losses: tensors whatever happens to them next
    sums: list[str] = []
    for step in statements:
        if isinstance(step, cst.Assign) and len(step.targets) == 1 and isinstance(step.targets[0].target, cst.Name):
            name = step.targets[0].target.value
            value = step.value
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract)) and _is_name(value.left, name):
                value = value.right  # `loss = loss + (-lp * r)`, `loss = loss - lp * r`
                if not _arithmetic_of(value, local, index, strict=True, calls=steps):
                    return False
                sums.append(name)
                continue
            if not _arithmetic_of(value, local, index, conversions=True, calls=steps):
                return False
            local.add(name)
        elif isinstance(step, cst.AugAssign) and isinstance(step.target, cst.Name):
            if not isinstance(step.operator, (cst.AddAssign, cst.SubtractAssign)) or not _arithmetic_of(step.value, local, index, strict=True, calls=steps):
                return False
            sums.append(step.target.value)
        elif isinstance(step, cst.Expr) and isinstance(step.value, cst.Call):
            call = step.value
            if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "append" and len(call.args) == 1):
                return False
            collector = call.func.value
            value = call.args[0].value
            if not isinstance(collector, cst.Name) and not (steps and isinstance(collector, cst.Attribute)):
                return False
            if _functional_loss_of(context, value, local):
                losses.append(context.code(collector))
            elif _arithmetic_of(value, local, index, strict=True, calls=steps):
                collectors.append(context.code(collector))
            else:
                return False
        else:
            return False
    if not collectors and not losses and not sums:
        return False
    if sums and not steps:
        return False  # `total += w * loss` over a few task losses: a weighted sum, not a trajectory
    return all(_combined_after(context, node, name, steps) for name in collectors) and all(
        _backpropagated_after(context, node, {name}) for name in sums
    ) and (not losses or bool(sums) or any(_combined_after(context, node, name, steps) for name in collectors + losses))


def elementwise_list_comprehension(context: Context, node: Union[cst.ListComp, cst.GeneratorExp]) -> bool:
    """`torch.cat([-lp * r for lp, r in zip(log_probs, returns)])`."""
    for_in = node.for_in
    if for_in.inner_for_in is not None or for_in.ifs:
        return False
    walk = _list_walk(for_in.target, for_in.iter)
    if walk is None:
        return False
    steps = _walks_steps(context, for_in.iter)
    if walk.index is not None and not steps:
        return False
    if not _arithmetic_of(node.elt, set(walk.elements), walk.index, strict=True, calls=steps):
        return False
    parent = context.parent(node)
    if steps and isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        # `losses = [-lp * g for ...]` and then `torch.stack(losses)`
        return _combined_after(context, parent, parent.targets[0].target.value, steps)
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


def _combined_after(context: Context, start: cst.CSTNode, collected: str, summed: bool = False) -> bool:
    """The list whose code is `collected` goes, after `start` and in the same function, to torch.cat/torch.stack,
    or (with `summed`) to Python's `sum()` whose result is back-propagated (tensors either way, not numbers)."""
    scope = context.enclosing(start, cst.FunctionDef) or context.module
    after = False
    for node in descendants(scope):  # document order
        if node is start:
            after = True
        elif after and isinstance(node, cst.Call) and len(node.args) >= 1 and context.code(node.args[0].value) == collected:
            if _stacks(context, node):
                return True
            if summed and _is_name(node.func, "sum") and _backpropagated(context, node):
                return True
    return False


def _backpropagated(context: Context, value: cst.Call) -> bool:
    """`sum(losses).backward()`, or `loss = sum(losses)` (or an expression holding it) then back-propagated."""
    node: Optional[cst.CSTNode] = value
    while node is not None and not isinstance(node, (cst.Assign, cst.BaseSmallStatement, cst.FunctionDef)):
        parent = context.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr.value == "backward":
            return True
        node = parent
    if isinstance(node, cst.Assign):
        names = {name for target in node.targets for name in flatten_names(target.target)}
        return bool(names) and _backpropagated_after(context, node, names)
    return False



def _stacks(context: Context, call: cst.Call) -> bool:
    return (context.qualname(call) or "") in ("torch.stack", "torch.cat", "torch.concat", "torch.concatenate")


@dataclass(frozen=True)
class _Walk:
    """How a loop walks its lists: the names bound to their elements, and the index that reads them by
    position (`ys[i]`), if any."""

    elements: tuple[str, ...]
    index: Optional[str] = None


def _list_walk(target: cst.BaseExpression, iterable: cst.BaseExpression) -> Optional[_Walk]:
    """`for e in xs`, `for a, b in zip(xs, ys)`, `for i in range(len(xs))`, `for i, e in enumerate(xs)` (the
    lists names or attributes)."""
    call = iterable if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) else None
    if call is not None and call.func.value in ("range", "enumerate"):  # type: ignore[union-attr]
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return None
        walked = call.args[0].value
        if call.func.value == "range":  # type: ignore[union-attr]
            # `range(len(xs))`: the index reads the lists by position
            if not (isinstance(target, cst.Name) and isinstance(walked, cst.Call) and _is_name(walked.func, "len")):
                return None
            if len(walked.args) != 1 or not isinstance(walked.args[0].value, (cst.Name, cst.Attribute)):
                return None
            return _Walk((), target.value)
        if not (isinstance(target, cst.Tuple) and len(target.elements) == 2 and isinstance(target.elements[0].value, cst.Name)):
            return None
        inner = _list_walk(target.elements[1].value, walked)
        return None if inner is None else _Walk(inner.elements, target.elements[0].value.value)
    lists: list[cst.BaseExpression]
    if isinstance(iterable, (cst.Name, cst.Attribute)):
        lists = [iterable]
    elif call is not None and call.func.value == "zip":  # type: ignore[union-attr]
        lists = [a.value for a in call.args]
        if any(a.keyword is not None or a.star for a in call.args):
            return None
    else:
        return None
    if not all(isinstance(e, (cst.Name, cst.Attribute)) for e in lists):
        return None
    names = flatten_names(target)
    if not names or len(names) != len(flatten_targets(target)):
        return None
    return _Walk(tuple(names))


def _arithmetic_of(
    expr: cst.BaseExpression,
    elements: set[str],
    index: Optional[str] = None,
    strict: bool = False,
    conversions: bool = False,
    calls: bool = False,
) -> bool:
    """Element-wise arithmetic (+ - * / and unary minus) over names, attributes, numbers and elements read by
    position (`ys[i]` for the loop's index), each perhaps passed through a method that keeps it one value per
    step (`lp.squeeze()`, `ret.detach()`) or made a tensor (`torch.tensor(ret)`) when `calls` allows it; with
    `strict`, it must also multiply or combine an element (a bare element appended is a copy, not math); with
    `conversions`, an element read as a number (`value.item()`) counts as one."""
    used = False

    def walk(node: cst.BaseExpression) -> bool:
        nonlocal used
        if isinstance(node, cst.BinaryOperation):
            return isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)) and walk(node.left) and walk(node.right)
        if isinstance(node, cst.UnaryOperation):
            return isinstance(node.operator, cst.Minus) and walk(node.expression)
        if isinstance(node, cst.Call):
            if conversions and isinstance(node.func, cst.Attribute) and not node.args and node.func.attr.value == "item":
                return isinstance(node.func.value, cst.Name) and walk(node.func.value)
            operand = _kept_operand(node) if calls else None
            return operand is not None and walk(operand)
        if index is not None and _read_at(node, index):
            used = True
            return True
        if isinstance(node, (cst.Name, cst.Attribute)) and names_in(node) & elements:
            used = True  # `lp`, `lp.data`
        return isinstance(node, (cst.Name, cst.Attribute, cst.Integer, cst.Float))

    if not walk(expr) or not used:
        return False
    return not strict or isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation))


def _kept_operand(call: cst.Call) -> Optional[cst.BaseExpression]:
    """`x` in `x.detach()`, `x.squeeze(-1)`, `x.view(-1)`, `torch.tensor(x)`: one step's value kept one value
    per step (any other argument a number, or a keyword such as `dtype=`)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if _is_name(func.value, "torch"):
        if func.attr.value in ("tensor", "as_tensor") and len(positional) == 1:
            return positional[0]
        return None
    if func.attr.value in _KEEPS_STEP and all(isinstance(a, (cst.Integer, cst.UnaryOperation)) for a in positional):
        return func.value
    return None


def _read_at(node: cst.BaseExpression, index: str) -> bool:
    """`ys[i]` (ys a name or attribute) for the loop's index `i`."""
    return (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, (cst.Name, cst.Attribute))
        and len(node.slice) == 1
        and isinstance(node.slice[0].slice, cst.Index)
        and _is_name(node.slice[0].slice.value, index)
    )


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


def _backpropagated_after(context: Context, start: cst.CSTNode, names: set[str]) -> bool:
    """`name.backward()` (or that of a value computed from it) after `start`, in the same function."""
    scope = context.enclosing(start, cst.FunctionDef) or context.module
    after = False
    derived = set(names)
    for node in descendants(scope):  # document order
        if node is start:
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
