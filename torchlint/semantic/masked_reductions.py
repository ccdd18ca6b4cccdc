"""Masked selections reduced per sample: `d[i][mask[i]]` or `row[labels == labels[i]]` is a piece of varying size,
unless every use of it is reduced to one value, on the spot or after element-wise math (`.max()`,
`torch.min(...)`, `pos.exp().sum()`, `(d[i][m[i]] - margin).clamp(min=0).mean()`). Then every sample gives a
result of the same size, and one masked reduction over the batch (`masked_fill`, then a reduction along a
dimension) does the loop's work: the hardest positive of each anchor, the mean similarity of each row's
positives. The same holds where the loop itself collects only such values (`losses.append(cls_loss.sum())`,
`total += term.mean() / n`): whatever size a sample's pieces had on the way (its real boxes cut from a padded
batch, the anchors matched to them), the results are one value per sample, and padding with a mask does the
batch at once (a detection loss computed image by image)."""

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


# Methods that keep one value one value: a cast, a copy to a device, a detach, a reshape of a single element.
_KEEPS_ONE = frozenset("float double half long int cuda cpu to detach clone view reshape squeeze unsqueeze".split())


def collects_one_value(body: list[cst.CSTNode]) -> bool:
    """Every result the loop body collects (`xs.append(v)`, `total += v`) is one value (a reduction, or a
    number made a tensor: `torch.tensor(0.)`), and it collects at least one."""
    bound: dict[str, list[cst.BaseExpression]] = {}
    for node in body:
        if isinstance(node, cst.Assign) and _one_name(node) is not None:
            bound.setdefault(_one_name(node), []).append(node.value)  # type: ignore[arg-type]
    collected = []
    for node in body:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "append":
            if len(node.args) != 1:
                return False
            collected.append(node.args[0].value)
        elif isinstance(node, cst.AugAssign):
            collected.append(node.value)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in ("extend", "insert"):
            return False
    return bool(collected) and all(_one_value(value, bound, 0) for value in collected)


def _one_value(expr: cst.BaseExpression, bound: dict[str, list[cst.BaseExpression]], depth: int) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.Name):
        values = bound.get(expr.value)
        return bool(values) and depth < 4 and all(_one_value(v, bound, depth + 1) for v in values)
    if isinstance(expr, cst.BinaryOperation):
        sides = (expr.left, expr.right)
        plain = [_plain(side) and not (isinstance(side, cst.Name) and side.value in bound) for side in sides]
        return not all(plain) and all(p or _one_value(side, bound, depth) for p, side in zip(plain, sides))
    if isinstance(expr, cst.UnaryOperation):
        return _one_value(expr.expression, bound, depth)
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if method in REDUCTIONS and not expr.args:
            return True  # `loss.sum()`: whatever the size of `loss`
        if method in _KEEPS_ONE or method in _ELEMENTWISE:
            if isinstance(func.value, cst.Name) and func.value.value == "torch":
                return bool(expr.args) and _one_value(expr.args[0].value, bound, depth)  # `torch.clamp(n, min=1)`
            return _one_value(func.value, bound, depth)
        if isinstance(func.value, cst.Name) and func.value.value == "torch":
            if method in REDUCTIONS and len(expr.args) == 1:
                return True  # `torch.sum(x)`
            if method in ("tensor", "as_tensor") and expr.args:
                return isinstance(expr.args[0].value, (cst.Integer, cst.Float))  # `torch.tensor(0.)`
    return False


def _plain(expr: cst.BaseExpression) -> bool:
    """A number, or a name or attribute read as one (a weight, a count: `/ batch_size`, `* self.alpha`)."""
    return isinstance(expr, (cst.Integer, cst.Float, cst.Name, cst.Attribute))


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
