"""Rows copied one index at a time: a Python loop over the elements of an index tensor whose body only
assigns rows at that index (`for i in range(inds.numel()): ind = inds[i]; out[b, ind, :] = src[b, ind, :]`),
where one indexed assignment (`out[b, inds] = src[b, inds]`) copies them all.

Each trip reads an element of the index tensor (on a GPU, a copy back and a wait) and launches a copy of
one row. Found by the loop's shape: the iterable runs over an index tensor (`range(t.numel())`,
`range(len(t))`, `range(t.size(0))`, `range(t.shape[0])`, or `t` itself), and every statement of the body is a
plain assignment: the element bound to a name (`ind = inds[i]`), or a subscript assignment whose target is
indexed by the element and whose value is that row of another tensor or a value that does not change per
trip. Left alone: accumulation (`out[ind] += v`: repeated indices add up, which needs `index_add_`), any call
or branch in the body, and index arrays of NumPy or Python lists.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.walk import descendants
from torchlint.semantic.sample_syntax import names_in
from torchlint.semantic.values import value_kinds

_SIZES = frozenset({"numel", "nelement", "size"})


def copies_rows_per_index(context: Context, loop: cst.For) -> bool:
    """Whether `loop` copies rows one element of an index tensor at a time (see the module docstring)."""
    if loop.orelse is not None or not isinstance(loop.target, cst.Name):
        return False
    found = _index_tensor(loop)
    if found is None or not value_kinds(context).is_tensor(found[0]):
        return False
    tensor, by_position = found
    loop_name = loop.target.value
    elements = set() if by_position else {loop_name}  # names holding one element of the index tensor
    statements = _plain_assignments(loop.body)
    if statements is None:
        return False
    copied = False
    for assign in statements:
        target = assign.targets[0].target
        if isinstance(target, cst.Name):
            if not _is_element(assign.value, tensor, loop_name, elements):
                return False
            elements.add(target.value)
        elif isinstance(target, cst.Subscript) and _indexed_by(target, tensor, loop_name, elements):
            value = assign.value
            changing = names_in(value) & (elements | {loop_name})
            if changing and not (isinstance(value, cst.Subscript) and _indexed_by(value, tensor, loop_name, elements)):
                return False
            if any(isinstance(n, cst.Call) for n in [value, *descendants(value)]):
                return False
            copied = True
        else:
            return False
    return copied


def _index_tensor(loop: cst.For) -> Optional[tuple[cst.BaseExpression, bool]]:
    """The index tensor the loop runs over, and whether the loop variable is a position in it."""
    iterable = loop.iter
    if isinstance(iterable, (cst.Name, cst.Attribute)):
        return iterable, False
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range"):
        return None
    if len(iterable.args) != 1:
        return None
    bound = iterable.args[0].value
    if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) and bound.func.value == "len" and bound.args:
        return bound.args[0].value, True
    if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Attribute) and bound.func.attr.value in _SIZES:
        if bound.func.attr.value == "size" and len(bound.args) != 1:
            return None
        return bound.func.value, True
    if (
        isinstance(bound, cst.Subscript)
        and isinstance(bound.value, cst.Attribute)
        and bound.value.attr.value == "shape"
    ):
        return bound.value.value, True
    return None


def _plain_assignments(body: cst.BaseSuite) -> Optional[list[cst.Assign]]:
    if not isinstance(body, cst.IndentedBlock):
        return None
    found: list[cst.Assign] = []
    for line in body.body:
        if not isinstance(line, cst.SimpleStatementLine):
            return None
        for small in line.body:
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                return None
            found.append(small)
    return found or None


def _same(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    return a.deep_equals(b)


def _is_element(expr: cst.BaseExpression, tensor: cst.BaseExpression, position: str, elements: set[str]) -> bool:
    """`inds[i]` (the element at the loop's position) or a name already holding one."""
    if isinstance(expr, cst.Name):
        return expr.value in elements
    if not (isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and _same(expr.value, tensor)):
        return False
    index = expr.slice[0].slice
    return isinstance(index, cst.Index) and isinstance(index.value, cst.Name) and index.value.value == position


def _indexed_by(subscript: cst.Subscript, tensor: cst.BaseExpression, position: str, elements: set[str]) -> bool:
    """`out[b, ind, :]`: one position of the subscript is an element of the index tensor."""
    return any(
        isinstance(part.slice, cst.Index) and _is_element(part.slice.value, tensor, position, elements)
        for part in subscript.slice
    )
