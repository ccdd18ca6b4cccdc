"""Element walks: a Python builtin that runs through a device tensor one element at a time
(`max(lengths)`, `sorted(scores)`, `map(lambda s: s == 0, row)` for each row of a batch).

Iterating a tensor yields one 0-d tensor per element; every comparison or conversion of one is a read back
(a device-to-host copy and a wait on an accelerator). One tensor operation (`lengths.max()`, `row.eq(0)`,
`batch.eq(0)`) or a single `.tolist()` does the same work in one go. Found by what the code does:

- `max(t)`, `min(t)`, `sorted(t)` with the tensor as the only positional argument (not `max(a, b)`);
- `map(f, t)` whose function compares or converts one element (`lambda s: s == 0`, `int`, `float`, `bool`);
  a lambda that does tensor work on each piece (`map(lambda t: rearrange(t, ...), qkv)`) is not an element walk;

where `t` (or `t.data`, `t.detach()`, `t[:, 0]`) is a tensor that may live on the accelerator, or a row of one: the
target of an enclosing loop or comprehension over such a tensor (`[... map(f, row.data) ... for row in batch]`).
Silent for host tensors, lists and NumPy arrays, and for builtins a file rebinds.
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from torchlint.lint.context import Context

_ORDERING = frozenset({"max", "min", "sorted"})
_CONVERSIONS = frozenset({"int", "float", "bool"})
_SAME_VALUE = frozenset({"data", "detach"})  # `t.data`, `t.detach()`: the same elements, the same device


def _builtin(context: Context, func: cst.BaseExpression, names: frozenset[str]) -> Optional[str]:
    """The name of the builtin `func` calls, when it is one of `names` and the file does not rebind it."""
    if not isinstance(func, cst.Name) or func.value not in names:
        return None
    return None if context.lookup(func) else func.value


def _scalar_work(context: Context, function: cst.Lambda) -> bool:
    """`lambda s: s == 0`, `lambda s: int(s)`: the body compares or converts the element."""
    body = function.body
    if isinstance(body, cst.Comparison):
        return True
    return isinstance(body, cst.Call) and _builtin(context, body.func, _CONVERSIONS) is not None


def walked(context: Context, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The expression `call` walks element by element, by the shape of the call alone."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if len(positional) != len([a for a in call.args if a.keyword is None]):
        return None  # `max(*values)`
    if _builtin(context, call.func, _ORDERING) and len(positional) == 1:
        return positional[0]
    if _builtin(context, call.func, frozenset({"map"})) and len(positional) == 2:
        function = positional[0]
        if _builtin(context, function, _CONVERSIONS) or isinstance(function, cst.Lambda) and _scalar_work(context, function):
            return positional[1]
    return None


def _same_value(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`t.data`, `t.detach()` and `t[:, 0]` live where `t` lives."""
    while True:
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data" or isinstance(expr, cst.Subscript):
            expr = expr.value
        elif (
            isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _SAME_VALUE
        ):
            expr = expr.func.value
        else:
            return expr


def _row_loop(context: Context, name: cst.Name) -> Optional[tuple[Optional[cst.CSTNode], cst.BaseExpression]]:
    """The closest enclosing loop or comprehension whose target is `name` alone, with its iterable (the loop is
    None for a comprehension's inner `for`, which is not reported)."""
    for ancestor in context.ancestors(name):
        if isinstance(ancestor, cst.For) and isinstance(ancestor.target, cst.Name) and ancestor.target.value == name.value:
            return ancestor, ancestor.iter
        if isinstance(ancestor, cst.CompFor) and isinstance(ancestor.target, cst.Name) and ancestor.target.value == name.value:
            comprehension = context.parent(ancestor)
            owns = isinstance(comprehension, (cst.ListComp, cst.GeneratorExp, cst.SetComp)) and comprehension.for_in is ancestor
            return (comprehension if owns else None), ancestor.iter
        if isinstance(ancestor, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            for_in = ancestor.for_in
            if isinstance(for_in.target, cst.Name) and for_in.target.value == name.value:
                return ancestor, for_in.iter
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
    return None


def walks_device_tensor(
    context: Context, call: cst.Call, device_tensor: Callable[[cst.BaseExpression], bool]
) -> Optional[cst.CSTNode]:
    """What to report when `call` walks the elements of a tensor that may live on the accelerator: the loop
    or comprehension over the rows of that tensor, or the call itself; None when it does not.
    `device_tensor(expr)` says whether an expression is such a tensor."""
    expr = walked(context, call)
    if expr is None:
        return None
    expr = _same_value(expr)
    row_loop = _row_loop(context, expr) if isinstance(expr, cst.Name) else None
    if row_loop is not None:
        loop, rows = row_loop
        return loop if device_tensor(_same_value(rows)) else None
    return call if device_tensor(expr) else None
