"""Small syntax questions the per-sample analysis asks of loop bodies: the statements of a block, the names
an expression reads or a block assigns, and whether a subscript picks one sample (`x[i]`, `x[i:i + 1]`)."""

from __future__ import annotations

from typing import Iterable, Iterator, Optional

import libcst as cst

from torchlint.lint.names import flatten_targets
from torchlint.lint.walk import descendants


def statements_of(body: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The statements of a block, with simple statement lines flattened into their small statements."""
    block = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else [body]
    for statement in block:
        if isinstance(statement, cst.SimpleStatementLine):
            yield from statement.body
        else:
            yield statement


def flatten_names(target: cst.BaseExpression) -> list[str]:
    return [n.value for n in flatten_targets(target) if isinstance(n, cst.Name)]


def names_in(expr: cst.CSTNode) -> set[str]:
    """The variables `expr` reads: not the attribute in `self.target` nor the keyword in `f(k=v)`."""
    found: set[str] = set()
    pending = [expr]
    while pending:
        node = pending.pop()
        if isinstance(node, cst.Name):
            found.add(node.value)
        elif isinstance(node, (cst.Attribute, cst.Arg)):
            pending.append(node.value)
        else:
            pending.extend(node.children)
    return found


def assigned_names(statements: Iterable[cst.CSTNode]) -> set[str]:
    names: set[str] = set()
    for statement in statements:
        for node in [statement, *descendants(statement)]:
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    names.update(flatten_names(target.target))
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                names.update(flatten_names(node.target))
    return names


def indexes_sample(subscript: cst.Subscript, index: Optional[str], inner: bool = False) -> bool:
    """`z[i]`, `z[i, ...]`, `z[i:i + 1]` (first index is the loop index)."""
    if index is None or not subscript.slice:
        return False
    elements = list(subscript.slice)
    # `h[:, i]`, `enc[t, i]`: the sample's position may follow whole slices or other loop indices
    while inner and len(elements) > 1 and (whole_slice(elements[0].slice) or (
        isinstance(elements[0].slice, cst.Index)
        and isinstance(elements[0].slice.value, cst.Name)
        and elements[0].slice.value.value != index
    )):
        elements.pop(0)
    first = elements[0].slice
    if isinstance(first, cst.Index):
        return isinstance(first.value, cst.Name) and first.value.value == index
    if isinstance(first, cst.Slice):
        lower, upper = first.lower, first.upper
        if isinstance(lower, cst.Name) and lower.value == index and isinstance(upper, cst.BinaryOperation):
            return (
                isinstance(upper.left, cst.Name)
                and upper.left.value == index
                and isinstance(upper.operator, cst.Add)
                and isinstance(upper.right, cst.Integer)
                and upper.right.value == "1"
            )
    return False


def whole_slice(part: cst.BaseSlice) -> bool:
    return isinstance(part, cst.Slice) and part.lower is None and part.upper is None and part.step is None
