"""How many times a loop runs, when the code itself says so.

`for i in range(3)`, `for i in range(1, n + 1)` with `n = 10`, `for net in (G, D)`, `for level in
self.levels` where every assignment of `self.levels` is a short literal list: the count is written in the
code. Rules compare it with their own bound (a handful of pictures, a few pyramid levels): such a loop runs
a fixed, small number of times, not once per step or per sample of a dataset.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.context import UNKNOWN
from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants

if TYPE_CHECKING:
    from torchlint.lint.context import Context


def literal_trips(context: "Context", loop: cst.CSTNode) -> Optional[int]:
    """The number of trips of a `for` loop whose iterable's length is written in the code, else None."""
    if not isinstance(loop, cst.For):
        return None
    items = loop.iter
    if isinstance(items, cst.Call) and last_name(items.func) == "enumerate" and items.args:
        items = items.args[0].value
    if isinstance(items, (cst.List, cst.Tuple)):
        return len(items.elements)
    if isinstance(items, cst.Call) and last_name(items.func) in ("range", "trange"):
        return _range_length(context, items)
    return _literal_everywhere(context, loop, items)


def _range_length(context: "Context", call: cst.Call) -> Optional[int]:
    """`range(stop)`, `range(start, stop[, step])` with numbers written in the code (or `n + 1`, `n - 1`)."""
    args = [a.value for a in call.args if a.keyword is None]
    if not args or len(args) > 3:
        return None
    start, stop, step = (0, _integer(context, args[0]), 1) if len(args) == 1 else (
        _integer(context, args[0]), _integer(context, args[1]), _integer(context, args[2]) if len(args) == 3 else 1)
    if start is None or stop is None or not step or step < 0:
        return None
    return max(-(-(stop - start) // step), 0)


def _integer(context: "Context", node: cst.BaseExpression) -> Optional[int]:
    value = context.literal(node)
    if value is UNKNOWN and isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
        left, right = context.literal(node.left), context.literal(node.right)
        if _is_int(left) and _is_int(right):
            value = left + right if isinstance(node.operator, cst.Add) else left - right
    return value if _is_int(value) else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _literal_everywhere(context: "Context", loop: cst.For, items: cst.BaseExpression) -> Optional[int]:
    """A name (in its function) or `self.<attr>` (in its class) every assignment of which is a literal list
    or tuple (`self.pyramid_levels = [3, 4, 5, 6, 7]`): the longest of them. A parameter counts only when
    its default is None and the function assigns the literal in its place."""
    function = context.enclosing_function(loop)
    if isinstance(items, cst.Attribute) and isinstance(items.value, cst.Name) and items.value.value == "self":
        scope: Optional[cst.CSTNode] = context.enclosing(loop, cst.ClassDef)
        if scope is None:
            return None
        attr = items.attr.value
        values = [
            n.value for n in descendants(scope) if type(n) is cst.Assign and len(n.targets) == 1
            and isinstance(n.targets[0].target, cst.Attribute) and n.targets[0].target.attr.value == attr
            and isinstance(n.targets[0].target.value, cst.Name) and n.targets[0].target.value.value == "self"
        ]
    elif isinstance(items, cst.Name) and function is not None:
        name = items.value
        values = [
            n.value for n in descendants(function.body) if type(n) is cst.Assign and len(n.targets) == 1
            and isinstance(n.targets[0].target, cst.Name) and n.targets[0].target.value == name
        ]
        params = [p for p in function.params.params if p.name.value == name]
        if params and not (params[0].default is not None and context.literal(params[0].default) is None):
            return None
    else:
        return None
    if not values or not all(isinstance(v, (cst.List, cst.Tuple)) for v in values):
        return None
    return max(len(v.elements) for v in values)  # type: ignore[union-attr]


# Names of the devices a program spreads its work over (`self.device_id`, `gpu_ids`): a handful of trips.
_DEVICE_LIST = re.compile(r"(?:^|_)(?:device|gpu)_?ids?$|^(?:devices|gpus)$", re.IGNORECASE)


def few_by_nature(context: "Context", loop: cst.CSTNode) -> bool:
    """A loop whose count is small by what it walks, though no number is written: the layers or settings of a
    network in one of its own methods (`for conv in self.convs`, `enumerate(self.fcs)`, `zip(self.heads,
    self.levels)`, or a local name taken from one: `modules = self.blocks[1:]`), or the devices of the
    machine (`for i in range(1, len(self.device_id))`, `for gpu in gpu_ids`)."""
    if not isinstance(loop, cst.For):
        return False
    items = loop.iter
    if isinstance(items, cst.Call) and last_name(items.func) == "range" and len(items.args) == 1:
        stop = items.args[0].value  # `range(len(modules))`
        if isinstance(stop, cst.Call) and last_name(stop.func) == "len" and stop.args:
            items = stop.args[0].value
    while isinstance(items, cst.Call) and last_name(items.func) in ("enumerate", "reversed") and items.args:
        items = items.args[0].value
    if isinstance(items, cst.Call) and last_name(items.func) == "zip":
        parts = [a.value for a in items.args if a.keyword is None]
    else:
        parts = [items]
    return bool(parts) and all(_devices(context, p) or _own_layers(context, loop, p) for p in parts)


def _devices(context: "Context", items: cst.BaseExpression) -> bool:
    if isinstance(items, cst.Call) and last_name(items.func) == "range":
        args = [a.value for a in items.args if a.keyword is None]
        stop = args[-1] if len(args) > 1 else args[0] if args else None
        if isinstance(stop, cst.Call) and last_name(stop.func) == "len" and stop.args:
            items = stop.args[0].value
    name = last_name(items) if isinstance(items, (cst.Name, cst.Attribute)) else None
    return name is not None and bool(_DEVICE_LIST.search(name))


def _own_layers(context: "Context", loop: cst.For, items: cst.BaseExpression, _depth: int = 0) -> bool:
    from torchlint.semantic.objects import objects  # the object index reads the whole file

    while isinstance(items, cst.Subscript):
        items = items.value  # `self.blocks[1:]`
    if isinstance(items, cst.Name) and _depth == 0:
        value = context.assigned_value(items)
        return value is not None and _own_layers(context, loop, value, 1)
    if not (isinstance(items, cst.Attribute) and isinstance(items.value, cst.Name) and items.value.value == "self"):
        return False
    cls = context.enclosing(loop, cst.ClassDef)
    return cls is not None and objects(context).is_module_class(cls)
