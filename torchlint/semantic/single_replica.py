"""Inputs on which `nn.DataParallel` runs a single replica: a model given one sample at a time (`x.unsqueeze(0)`,
`x[None]`), loaders that batch one sample, and `device_ids` that name one GPU. TL802 stays silent there: the wrapper
costs nothing it could save."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.calls import argument
from torchlint.lint.names import last_name

_SAME_DATA = frozenset({"to", "cuda", "float", "half", "contiguous"})


def one_sample(context, expr: cst.BaseExpression, _depth: int = 0) -> bool:
    """`x.unsqueeze(0)`, `x[None]`, or a name every assignment of which is one (or a move of it)."""
    if _depth > 4:
        return False
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        attr = expr.func.attr.value
        if attr == "unsqueeze" and expr.args and context.literal(expr.args[0].value) == 0:
            return True
        if attr in _SAME_DATA:
            return one_sample(context, expr.func.value, _depth + 1)
        return False
    if isinstance(expr, cst.Subscript):
        first = expr.slice[0].slice if expr.slice else None
        return isinstance(first, cst.Index) and isinstance(first.value, cst.Name) and first.value.value == "None"
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr) or []
        values = [b.value for b in bindings]
        if not bindings or any(b.kind != "assign" or v is None for b, v in zip(bindings, values)):
            return False
        # `img = transform(img).unsqueeze(0)` then `img = img.to(device)`: one sample, moved
        return any(one_sample(context, v, _depth + 1) for v in values) and all(  # type: ignore[arg-type]
            one_sample(context, v, _depth + 1) or moves(v, expr.value) for v in values  # type: ignore[arg-type]
        )
    return False


def batch_of_one(context, loader: cst.Call) -> bool:
    """A DataLoader call whose batch size is the literal 1 or the default (1), with no batch sampler."""
    keywords = {a.keyword.value: a.value for a in loader.args if a.keyword is not None}
    if any(a.star for a in loader.args) or "batch_sampler" in keywords:
        return False
    positional = [a.value for a in loader.args if a.keyword is None]
    size = keywords.get("batch_size", positional[1] if len(positional) > 1 else None)
    return size is None or context.literal(size) == 1


def moves(value: cst.BaseExpression, name: str) -> bool:
    """`name.to(device)`, `name.cuda()`: the same data, moved or cast."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _SAME_DATA:
        value = value.func.value
    return isinstance(value, cst.Name) and value.value == name


def names_one_device(context, loaders, call: cst.Call) -> bool:
    """`device_ids` names one GPU as the program is set up: `[0]`, or `range(n)` (also `list(range(n))`,
    `[i for i in range(n)]`) where `n` is 1 or a command-line option whose default is 1. DataParallel then
    runs a single replica."""
    arg = argument(call, "device_ids", position=1)
    value = arg.value if arg is not None else None
    if isinstance(value, (cst.List, cst.Tuple)):
        return len(value.elements) == 1 and not isinstance(value.elements[0], cst.StarredElement)
    if isinstance(value, cst.ListComp) and isinstance(value.for_in.iter, cst.Call):
        value = value.for_in.iter  # `[i for i in range(n)]`
    if isinstance(value, cst.Call) and last_name(value.func) == "list" and len(value.args) == 1:
        value = value.args[0].value  # `list(range(n))`
    if not (isinstance(value, cst.Call) and last_name(value.func) == "range" and len(value.args) == 1):
        return False
    count = value.args[0].value
    if context.literal(count) == 1:
        return True
    # `range(args.num_gpu)` with `parser.add_argument("--num_gpu", default=1)`
    return isinstance(count, cst.Attribute) and loaders.argparse_default(count.attr.value) == 1
