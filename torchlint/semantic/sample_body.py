"""The body of a loop over samples: does it compute on one sample (a module, a loss, a torch function, tensor
arithmetic) and collect the result (append, store per row, accumulate), without carrying state from one
iteration to the next or branching on a sample's values?"""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants, semantic_children
from torchlint.semantic.sample_callees import TORCH_NOT_WORK, Callees
from torchlint.semantic.sample_headers import SampleLoop
from torchlint.semantic.sample_scopes import Scope
from torchlint.semantic.sample_syntax import (
    assigned_names,
    flatten_names,
    indexes_sample,
    names_in,
    statements_of,
)
from torchlint.semantic.single_samples import single_comparison

# Tensor methods that compute (work on one sample), as opposed to reading metadata or converting to Python.
_MATH_METHODS = frozenset(
    """
    sum mean std var prod exp log log1p sqrt rsqrt abs sigmoid tanh relu softmax log_softmax matmul mm bmm mv dot
    pow clamp clip norm argmax argmin amax amin max min cumsum logsumexp mul add sub div eq ne gt lt ge le
    masked_fill gather topk sort einsum outer square neg reciprocal lerp where
    """.split()
)


_NOT_WORK = frozenset(
    "item tolist numpy size dim numel shape dtype device type is_cuda nelement data_ptr element_size".split()
)

_CONVERSIONS = frozenset("item tolist numpy size dim numel".split())

_BUILTIN_NOT_WORK = frozenset(
    "print len str repr int float bool isinstance type format open list tuple dict set enumerate zip range "
    "sorted reversed any all id hash round abs min max sum map filter iter next getattr setattr hasattr".split()
)


_SIZES = frozenset("shape numel size nelement".split())
_COUNTS = frozenset("sum count_nonzero any".split())  # of a mask: how many it selects


def _tests_size(test: cst.BaseExpression) -> bool:
    """`x.shape[0] == 0`, `len(x) > 0`, `mask.sum() > 0`: a comparison of a value's size (or of what a mask
    selects) with a number."""
    if not isinstance(test, cst.Comparison):
        return False

    def size(expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Name):
                return expr.func.value == "len"
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _COUNTS and not expr.args:
                return True  # `positives.sum() > 0`: the mask selects something
            expr = expr.func
        return isinstance(expr, cst.Attribute) and expr.attr.value in _SIZES

    operands = [test.left, *(c.comparator for c in test.comparisons)]
    return any(size(o) for o in operands) and all(size(o) or isinstance(o, cst.Integer) for o in operands)


_ARITH = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.MatrixMultiply, cst.Power)


class SampleBody:
    """Follows one loop body: which names hold a sample (or a result computed from one), whether the body
    computes on a sample, and whether that result is collected (appended, stored per row, accumulated)."""

    def __init__(
        self, context: Context, callees: Callees, scope: Scope, loop: SampleLoop, tainted: set[str], roots: set[str]
    ) -> None:
        self.context = context
        self.callees = callees
        self.scope = scope
        self.loop = loop
        self.tainted = tainted  # names holding one sample, or a value computed from one
        self.worked: set[str] = set()  # names holding the result of work on a sample
        self.module_worked: set[str] = set()  # ... of a module, loss or torch.nn.functional call
        self.roots = roots
        self.collected = False
        self.vetoed = False
        # the loop collects one value per sample: a test of whether a sample's piece is empty is a guard a mask
        # replaces, not control flow on its values
        self.size_guards = False
        self.assigned_so_far: set[str] = set()
        # the loop's own targets: rebound by the header every iteration (`x = x.unsqueeze(0)` carries nothing)
        header = loop.node.for_in if isinstance(loop.node, (cst.ListComp, cst.GeneratorExp)) else loop.node
        target = getattr(header, "target", None)
        self.targets: set[str] = set(flatten_names(target)) if target is not None else set()

    # -- expressions -----------------------------------------------------------------------------
    def is_sample(self, expr: cst.BaseExpression) -> bool:
        """`x[i]`, `x[i:i+1]`, `x[i, ...]` for a batch x, or a name holding a sample."""
        if isinstance(expr, cst.Name):
            return expr.value in self.tainted
        if isinstance(expr, cst.Subscript):
            if isinstance(expr.value, cst.Name) and expr.value.value in self.roots and indexes_sample(expr, self.loop.index, self.loop.inner):
                return True
            if isinstance(expr.value, cst.Name) and expr.value.value in self.loop.items and len(expr.slice) == 1:
                # `c[0]` for `c` in `zip(batch, per_image_list)`: only the batch's positions are samples
                part = expr.slice[0].slice
                return (
                    isinstance(part, cst.Index)
                    and isinstance(part.value, cst.Integer)
                    and int(part.value.value) in self.loop.items[expr.value.value]
                )
            return self.is_sample(expr.value)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in _CONVERSIONS:
                return False
            return self.is_sample(expr.func.value)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value not in _NOT_WORK and self.is_sample(expr.value)
        return False

    def mentions_sample(self, expr: cst.BaseExpression) -> bool:
        if self.is_sample(expr):
            return True
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _CONVERSIONS:
            return False
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _BUILTIN_NOT_WORK:
            return False
        return any(self.mentions_sample(child) for child in semantic_children(expr) if isinstance(child, cst.BaseExpression) or isinstance(child, (cst.Arg, cst.Element, cst.SubscriptElement, cst.Index)))

    def work(self, expr: cst.CSTNode) -> bool:
        """`expr` computes on a sample (a module/loss/torch call or tensor arithmetic taking one), or reads a
        name that holds such a result."""
        if isinstance(expr, cst.Name):
            return expr.value in self.worked
        if isinstance(expr, cst.Call):
            if self._work_call(expr):
                return True
            name = last_name(expr.func)
            if name in _CONVERSIONS or (isinstance(expr.func, cst.Name) and expr.func.value in _BUILTIN_NOT_WORK and expr.func.value != "sum"):
                # float(criterion(out[i], y[i])) still computed on the sample
                return any(self.work(a.value) for a in expr.args) or (
                    isinstance(expr.func, cst.Attribute) and self.work(expr.func.value)
                )
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ARITH):
            if any(isinstance(side, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)) for side in (expr.left, expr.right)):
                return False
            if self._math_operand(expr.left) or self._math_operand(expr.right):
                return True
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            if self.is_sample(expr.expression):
                return True
        return any(self.work(child) for child in semantic_children(expr) if not isinstance(child, (cst.Lambda,)))

    def runs_model_on_sample(self, call: cst.Call) -> bool:
        return self.callees.is_module_call(self.scope, call) and self._work_call(call)

    def _math_operand(self, expr: cst.BaseExpression) -> bool:
        return self.is_sample(expr)

    def _work_call(self, call: cst.Call) -> bool:
        func = call.func
        args = [a.value for a in call.args]
        # a method computing on the sample: x[i].sum(), (x[i] - m).pow(2)
        if isinstance(func, cst.Attribute) and func.attr.value in _MATH_METHODS and self.is_sample(func.value):
            return True
        if isinstance(func, cst.Subscript):
            return False  # self.layers[i](x): a loop over layers
        takes_sample = any(self.mentions_sample(a) or self.work(a) for a in args)
        if not takes_sample and self.loop.rows and self.loop.index is not None and self.loop.samples:
            # `model.predict(user_id)` for `user_id, row in enumerate(matrix)`: the model runs once per row
            takes_sample = any(isinstance(a, cst.Name) and a.value == self.loop.index for a in args) and (
                self.callees.is_module_call(self.scope, call)
            )
        if not takes_sample:
            return False
        qualname = self.context.qualname(call)
        if qualname is not None:
            if qualname.startswith("torch.nn.functional."):
                return True
            if qualname.startswith("torch.") and qualname.count(".") == 1:
                return qualname.rsplit(".", 1)[1] not in TORCH_NOT_WORK
            if qualname in ("torch.linalg.norm", "torch.autograd.grad", "torch.func.grad"):
                return True
            return self.callees.tensor_helper(call)  # a function imported from the project or a metric library
        return self.callees.is_module_call(self.scope, call) or self.callees.tensor_helper(call)

    # -- statements ------------------------------------------------------------------------------
    def scan(self, statements: list[cst.CSTNode]) -> bool:
        """Walk the statements in order; False when the body must stay silent (state carried between
        iterations, control flow on a sample's values)."""
        assigned_in_body = assigned_names(statements)
        for statement in statements:
            if isinstance(statement, cst.If):
                if (self.mentions_sample(statement.test) or self.work(statement.test)) and not (
                    self.size_guards and _tests_size(statement.test)
                ):
                    if self._counting_branch(statement):
                        self.collected = True
                        continue
                    return False
                # each branch starts from what was assigned before the `if`: a name set in one branch and
                # read in another comes from an earlier iteration (`out = block(x + out)`)
                before = set(self.assigned_so_far)
                assigned = set(before)
                if not self.scan(list(statements_of(statement.body))):
                    return False
                assigned |= self.assigned_so_far
                orelse = statement.orelse
                while orelse is not None:
                    self.assigned_so_far = set(before)
                    if isinstance(orelse, cst.If):
                        if self.mentions_sample(orelse.test):
                            return False
                        if not self.scan(list(statements_of(orelse.body))):
                            return False
                        orelse = orelse.orelse
                    else:
                        if not self.scan(list(statements_of(orelse.body))):
                            return False
                        orelse = None
                    assigned |= self.assigned_so_far
                self.assigned_so_far = assigned
                continue
            if isinstance(statement, (cst.For, cst.While)):
                if isinstance(statement, cst.For):
                    self.assigned_so_far.update(flatten_names(statement.target))
                if not self.scan(list(statements_of(statement.body))):
                    return False
                continue
            if isinstance(statement, (cst.With, cst.Try)):
                if not self.scan(list(statements_of(statement.body))):
                    return False
                continue
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                return False
            if not self._simple(statement, assigned_in_body):
                return False
        return True

    def _simple(self, small: cst.CSTNode, assigned_in_body: set[str]) -> bool:
        if isinstance(small, cst.Assign):
            value = small.value
            # state carried from the previous iteration into a computation: h = cell(x[t], h)
            for name in names_in(value):
                if (
                    name in assigned_in_body
                    and name not in self.assigned_so_far
                    and name not in self.targets
                    and not self._accumulator(small, name)
                ):
                    if self.work(value) or self.mentions_sample(value):
                        self.vetoed = True
                        return False
            if isinstance(value, (cst.Dict, cst.DictComp)):
                return True  # a record for logging or saving, not a result that is batched later
            worked = self.work(value)
            sample = self.mentions_sample(value)
            module_worked = worked and self._module_work(value)
            for target in small.targets:
                node = target.target
                if isinstance(node, cst.Name):
                    if self._accumulator(small, node.value) and worked:
                        self.collected = True
                    if worked:
                        self.worked.add(node.value)
                    if module_worked:
                        self.module_worked.add(node.value)
                    if sample or worked:
                        self.tainted.add(node.value)
                    self.assigned_so_far.add(node.value)
                elif isinstance(node, (cst.Tuple, cst.List)):
                    for name in flatten_names(node):
                        if worked:
                            self.worked.add(name)
                        if module_worked:
                            self.module_worked.add(name)
                        if sample or worked:
                            self.tainted.add(name)
                        self.assigned_so_far.add(name)
                elif isinstance(node, cst.Subscript):
                    if self._row_store(node) and self._collectable(value):
                        self.collected = True
            return True
        if isinstance(small, cst.AugAssign):
            value = small.value
            if self._collectable(value) or self.is_sample(value) or (
                isinstance(value, cst.Call) and single_comparison(value, self.mentions_sample)
            ):
                self.collected = True  # total += f(x[i]), total += x[i]: a sum over the batch
            return True
        if isinstance(small, cst.AnnAssign):
            return True
        if isinstance(small, cst.Expr):
            value = small.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "backward":
                if not value.args and self.work(value.func.value) and self._module_work(value.func.value):
                    self.collected = True  # gradients summed over the samples, one backward each
                return True
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("append", "extend", "add_"):
                receiver = value.func.value
                if value.args and not self.is_sample(receiver) and any(self._collectable(a.value) for a in value.args):
                    self.collected = True
            return True
        return True

    def _collectable(self, value: cst.BaseExpression) -> bool:
        """A collected value that is per-sample computation: work on a sample, not a record for logging
        (`rows.append({...})`) and not cheap math turned into a Python number (`float(y[i].mean())`); a
        module, loss or torch helper call counts even through `.item()`."""
        if isinstance(value, (cst.Dict, cst.DictComp, cst.FormattedString, cst.SimpleString)):
            return False
        if not self.work(value):
            return False
        if self._python_conversion(value):
            return self._module_work(value) or self._helper_work(value)
        return True

    def _helper_work(self, value: cst.CSTNode) -> bool:
        """`psnr(sr[j], hr[j]).item()`: a function of the file that computes with torch, run on one sample
        (a metric per image), is per-sample work even when its result is read as a number."""
        return any(
            isinstance(node, cst.Call) and self.callees.tensor_helper(node) and self._work_call(node)
            for node in [value, *descendants(value)]
        )

    def _python_conversion(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Call):
            func = value.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist", "numpy"):
                return True
            if isinstance(func, cst.Name) and func.value in ("float", "int", "bool", "str", "round"):
                return True
        if isinstance(value, cst.BinaryOperation):
            return self._python_conversion(value.left) or self._python_conversion(value.right)
        return False

    def _module_work(self, value: cst.CSTNode) -> bool:
        for node in [value, *descendants(value)]:
            if isinstance(node, cst.Call) and self._work_call(node):
                qualname = self.context.qualname(node) or ""
                if qualname.startswith("torch.nn.functional.") or self.callees.is_module_call(self.scope, node):
                    return True
        if isinstance(value, cst.Name):
            return value.value in self.module_worked
        return any(isinstance(n, cst.Name) and n.value in self.module_worked for n in descendants(value))

    def _accumulator(self, assign: cst.Assign, name: str) -> bool:
        """`acc = acc + value` / `acc = value + acc` / `acc = acc + a - b` / `acc = torch.cat([acc, value])`."""
        value = assign.value
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Multiply)):
            for side in (value.left, value.right):
                if isinstance(side, cst.Name) and side.value == name:
                    return True
        left = value
        while isinstance(left, cst.BinaryOperation) and isinstance(left.operator, (cst.Add, cst.Subtract)):
            left = left.left  # `acc + a - b` parses as `(acc + a) - b`: the sum starts from `acc`
        if left is not value and isinstance(left, cst.Name) and left.value == name:
            return not self._read_elsewhere(name, assign)
        if isinstance(value, cst.Call) and (self.context.qualname(value) or "") in ("torch.cat", "torch.stack"):
            first = value.args[0].value if value.args else None
            if isinstance(first, (cst.List, cst.Tuple)):
                return any(isinstance(e.value, cst.Name) and e.value.value == name for e in first.elements)
        return False

    def _read_elsewhere(self, name: str, assign: cst.Assign) -> bool:
        """`x = x + step * model(x)`: the running value feeds the loop's work (a state carried between
        iterations, as in sampling or an optimisation), not only its own sum."""
        body = getattr(self.loop.node, "body", None)
        for node in descendants(body) if body is not None else ():
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.Expr)) and node is not assign and name in names_in(node.value):
                return True
        return False

    def _row_store(self, target: cst.Subscript) -> bool:
        """`out[i] = ...`, `out[i, :] = ...` with i the loop index (out not a sample itself)."""
        index = self.loop.index
        return index is not None and indexes_sample(target, index, self.loop.inner)

    def _counting_branch(self, statement: cst.If) -> bool:
        """`if pred[i] == y[i]: correct += 1` (and nothing else): a count that one comparison on the batch gives."""
        test = statement.test
        if not isinstance(test, cst.Comparison) or statement.orelse is not None:
            return False
        if not all(isinstance(c.operator, (cst.Equal, cst.NotEqual)) for c in test.comparisons):
            return False
        def per_sample(side: cst.BaseExpression) -> bool:
            return self.is_sample(side) or self.work(side)  # `y[i]`, `model(x[i:i + 1]).argmax()`

        if not (per_sample(test.left) and all(per_sample(c.comparator) for c in test.comparisons)):
            return False
        body = list(statements_of(statement.body))
        return bool(body) and all(
            isinstance(s, cst.AugAssign) and isinstance(s.operator, cst.AddAssign) and isinstance(s.value, (cst.Integer, cst.Float))
            for s in body
        )
