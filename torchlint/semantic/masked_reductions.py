"""Masked selections reduced per sample: `d[i][mask[i]]` or `row[labels == labels[i]]` is a piece of varying size,
unless every use of it is reduced to one value, on the spot or after element-wise math (`.max()`,
`torch.min(...)`, `pos.exp().sum()`, `(d[i][m[i]] - margin).clamp(min=0).mean()`). Then every sample gives a
result of the same size, and one masked reduction over the batch (`masked_fill`, then a reduction along a
dimension) does the loop's work: the hardest positive of each anchor, the mean similarity of each row's
positives."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import Context

# Reductions that leave one value whatever the mask selects.
REDUCTIONS = frozenset("max min sum mean amax amin prod any all norm logsumexp count_nonzero".split())

# Element-wise math that keeps the selection's size (its result can still be reduced).
_ELEMENTWISE = frozenset(
    "exp log log1p sqrt rsqrt abs neg pow square clamp clamp_min clamp_max clip sigmoid relu tanh float double "
    "half softplus".split()
)


def reduced(context: Context, selection: cst.BaseExpression, body: list[cst.CSTNode], depth: int = 0) -> bool:
    """`selection` (a masked subscript, or a name bound to one) reaches only reductions within `body`."""
    node: cst.CSTNode = selection
    while True:
        parent = context.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = context.parent(parent)
            if not (isinstance(call, cst.Call) and call.func is parent):
                return False
            if parent.attr.value in REDUCTIONS:
                return True
            if parent.attr.value not in _ELEMENTWISE:
                return False
            node = call
        elif isinstance(parent, cst.Arg) and parent.keyword is None:
            call = context.parent(parent)
            if not (isinstance(call, cst.Call) and call.args and call.args[0] is parent):
                return False
            qualname = context.qualname(call) or ""
            short = qualname.rsplit(".", 1)[-1]
            if not qualname.startswith("torch."):
                return False
            if short in REDUCTIONS and qualname.count(".") == 1:
                return True
            if short not in _ELEMENTWISE:
                return False
            node = call
        elif isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
            node = parent  # `d[i][m[i]] - margin`, `-pos`: the same size as the selection
        elif isinstance(parent, cst.Assign) and depth < 2 and _one_name(parent) is not None:
            return _uses_reduced(context, _one_name(parent), parent, body, depth)  # type: ignore[arg-type]
        else:
            return False


def _one_name(assign: cst.Assign) -> str | None:
    if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
        return assign.targets[0].target.value
    return None


def _uses_reduced(context: Context, name: str, assign: cst.Assign, body: list[cst.CSTNode], depth: int) -> bool:
    """`pos = d[i][same[i]]`: every later read of `pos` in the loop body is reduced."""
    target = assign.targets[0].target
    uses = [n for n in body if isinstance(n, cst.Name) and n.value == name and n is not target]
    if any(isinstance(context.parent(use), cst.AssignTarget) for use in uses):
        return False  # rebound in the body: followed no further
    return bool(uses) and all(reduced(context, use, body, depth + 1) for use in uses)
