"""Element reads: a loop over the rows of a device tensor that turns the row's elements into Python numbers
one at a time (`for det in detections: x1 = int(det[0]); score = det[4].item()`).

Each `int()`, `float()` or `.item()` of a device tensor's element is a device-to-host copy and a wait for the
device; moving the tensor once (`.tolist()`, `.cpu().numpy()`) before the loop makes every read a host read.
Found by what the loop does with its element, not by what things are called:

- `for row in t` / `for i, row in enumerate(t)` / `for x1, y1, x2, y2, score in t` / `for *xyxy, conf, cls in t`
  whose body converts an element of the row (directly, or through a function of the file given the row);
- `for i in range(len(t))` (or `t.size(0)`, `t.shape[0]`) whose body converts `t[i][k]` / `t[i, k]`;
- a comprehension over `t` that converts its element (`[int(row[0]) for row in t]`).

Silent where the tensor is already on the host (`.cpu()`, `.numpy()`, `.tolist()`, NumPy), where the loop stops
early (`break`, `return`: a few rows read to find one), where rows are kept as tensors (`out.append(row)`: a
filter, which a mask replaces) and where nothing is read back.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.walk import descendants
from torchlint.semantic.functions import called_function
from torchlint.semantic.list_appends import appended
from torchlint.semantic.loops import is_forward_call
from torchlint.semantic.placement import is_device_argument
from torchlint.semantic.sample_syntax import flatten_names
from torchlint.semantic.values import value_kinds

# Builtins that turn a tensor element into a Python number.
_CONVERSIONS = frozenset({"int", "float", "bool", "round"})

# Methods that keep an element a tensor on its way to a conversion (`det[4].cpu().item()`).
_ELEMENT_METHODS = frozenset({"cpu", "detach", "squeeze"})

READ = "read"  # elements converted to Python numbers
COMPARE = "compare"  # elements compared to branch or count

_Comprehension = Union[cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp]


class ElementReads:
    """Which loops of one file read a device tensor back one element at a time."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def loop(self, node: cst.For) -> Optional[str]:
        """READ or COMPARE when the loop reads a device tensor back element by element; None otherwise."""
        if node.orelse is not None or _stops_early(node.body):
            return None
        rows = self._row_names(node.target, node.iter)
        if rows:
            if _keeps_rows(node.body, rows):
                return None
            if self._reads_in(node.body, rows, comparisons=False):
                return READ
            return COMPARE if self._reads_in(node.body, rows) else None
        index = self._index_over_tensor(node)
        if index is None:
            return None
        return READ if self._reads_indexed(node.body, *index) or self._reads_aligned(node.body, index[0]) else None

    def mapped(self, call: cst.Call) -> Optional[str]:
        """READ for `map(lambda det: draw(det, img), dets)` over a device tensor whose lambda converts the
        row's elements (itself, or through a function of the file given the row): the loop written as a map."""
        if not (isinstance(call.func, cst.Name) and call.func.value == "map" and len(call.args) == 2):
            return None
        function, iterable = call.args[0].value, call.args[1].value
        if not isinstance(function, cst.Lambda) or len(function.params.params) != 1:
            return None
        if not self._device_tensor(iterable):
            return None
        return READ if self._reads_in(function.body, {function.params.params[0].name.value}, comparisons=False) else None

    def walks_gathered(self, node: Union[cst.For, cst.Call]) -> bool:
        """The loop (or `map`) walks a tensor gathered batch by batch (`preds.append(model(x))` in a loop,
        then `torch.cat(preds)`): one trip per sample of the data set, however rarely the loop itself runs."""
        if isinstance(node, cst.Call):
            return len(node.args) == 2 and isinstance(node.args[1].value, cst.Name) and self._gathered(node.args[1].value)
        iterable = node.iter
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in ("zip", "enumerate", "range"):
            walked = [a.value for a in iterable.args if a.keyword is None and not a.star]
            if iterable.func.value == "range":
                index = self._index_over_tensor(node)
                walked = [n for n in descendants(iterable) if isinstance(n, cst.Name) and index and n.value == index[1]]
        else:
            walked = [iterable]
        return any(isinstance(e, cst.Name) and self._gathered(e) for e in walked)

    def _gathered(self, name: cst.Name) -> bool:
        for binding in self.context.lookup(name) or ():
            value = _bound_value(binding)
            if not (isinstance(value, cst.Call) and _concatenates(self.context, value) and value.args):
                continue
            parts = value.args[0].value
            if isinstance(parts, cst.Name) and any(
                self.context.enclosing(v, cst.For) is not None and not _moved_to_host(v) and self._device_evidence(v, 1)
                for v in appended(self.context, parts)
            ):
                return True
        return False

    def comprehension(self, node: _Comprehension) -> Optional[str]:
        for_in = node.for_in
        if for_in.inner_for_in is not None:
            return None
        rows = self._row_names(for_in.target, for_in.iter)
        if not rows:
            return None
        if for_in.ifs:
            # `sum(1 for p, t in zip(preds, labels) if p == t)`: elements compared one at a time to count
            if any(self._reads_in(i.test, rows, comparisons=False) for i in for_in.ifs):
                return READ  # `[... for x in dets if int(x[0]) == k]`: the filter reads each row back
            if not self._counted(node):
                return None
            return COMPARE if any(_compares(i.test, rows) for i in for_in.ifs) else None
        parts = [node.key, node.value] if isinstance(node, cst.DictComp) else [node.elt]
        return READ if any(self._reads_in(part, rows) for part in parts) else None

    def _counted(self, node: _Comprehension) -> bool:
        parent = self.context.parent(node)
        if isinstance(parent, cst.Arg):
            parent = self.context.parent(parent)
        return isinstance(parent, cst.Call) and isinstance(parent.func, cst.Name) and parent.func.value in ("sum", "len")

    # -- what is iterated -------------------------------------------------------------------------
    def _device_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor the value model places on the device, made by a model's forward pass or moved there in
        this function (torch ops on a parameter of unknown placement prove nothing: it may be a host copy)."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "reversed" and expr.args:
            expr = expr.args[0].value
        if not isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            return False
        return value_kinds(self.context).is_tensor(expr) and self._device_evidence(expr, 0)

    def _device_evidence(self, expr: cst.BaseExpression, depth: int) -> bool:
        """`model(x)`, `.cuda()`, `.to(device)` in the expression or in the values its names were bound to."""
        if depth > 4:
            return False
        for node in [expr, *descendants(expr)]:
            if isinstance(node, cst.Call):
                func = node.func
                if is_forward_call(self.context, node) or isinstance(func, cst.Attribute) and (
                    func.attr.value == "cuda"
                    or func.attr.value == "to" and any(is_device_argument(self.context, a.value) for a in node.args)
                ):
                    return True
            elif isinstance(node, cst.Name):
                for binding in self.context.lookup(node) or ():
                    value = _bound_value(binding)
                    if value is not None and value is not expr and self._device_evidence(value, depth + 1):
                        return True
                # a list gathered batch by batch (`preds.append(model(x))`) and then `torch.cat(preds)`
                if any(not _moved_to_host(v) and self._device_evidence(v, depth + 1) for v in appended(self.context, node)):
                    return True
        return False

    def _row_names(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> set[str]:
        """The names bound to a row (or to the row's elements) of a device tensor iterated directly."""
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate":
            if not iterable.args or not isinstance(target, cst.Tuple) or len(target.elements) != 2:
                return set()
            iterable, target = iterable.args[0].value, target.elements[1].value
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "zip":
            # `for p, t in zip(preds, labels)`: the names bound to a device tensor's rows
            if not isinstance(target, cst.Tuple) or len(target.elements) != len(iterable.args):
                return set()
            return {
                name
                for element, arg in zip(target.elements, iterable.args)
                if arg.keyword is None and not arg.star and self._device_tensor(arg.value)
                for name in flatten_names(element.value)
            }
        if not self._device_tensor(iterable):
            return set()
        return set(flatten_names(target))

    def _index_over_tensor(self, node: cst.For) -> Optional[tuple[str, str]]:
        """(`i`, code of `t`) for `for i in range(len(t))`, `range(t.size(0))`, `range(t.shape[0])`."""
        iterable = node.iter
        if not (isinstance(node.target, cst.Name) and isinstance(iterable, cst.Call)):
            return None
        if not (isinstance(iterable.func, cst.Name) and iterable.func.value == "range" and len(iterable.args) == 1):
            return None
        bound = iterable.args[0].value
        tensor: Optional[cst.BaseExpression] = None
        if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) and bound.func.value == "len" and bound.args:
            tensor = bound.args[0].value
        elif isinstance(bound, cst.Call) and isinstance(bound.func, cst.Attribute) and bound.func.attr.value == "size":
            tensor = bound.func.value
        elif isinstance(bound, cst.Subscript) and isinstance(bound.value, cst.Attribute) and bound.value.attr.value == "shape":
            tensor = bound.value.value
        if tensor is None:
            # `for i in range(4)`, `range(batch_size)`: the body shows which device tensors `i` walks together
            index = node.target.value
            rows = [
                n.value for n in descendants(node.body)
                if isinstance(n, cst.Subscript) and isinstance(n.value, cst.Name) and len(n.slice) == 1
                and isinstance(n.slice[0].slice, cst.Index) and isinstance(n.slice[0].slice.value, cst.Name)
                and n.slice[0].slice.value.value == index and self._device_tensor(n.value)
            ]
            if len({row.value for row in rows}) < 2:
                return None  # `out[i]` alone for the first n: perhaps a few rows; `c[i]` with `labels[i]`: samples
            for row in rows:
                if self._reads_indexed(node.body, index, self.context.code(row)):
                    return index, self.context.code(row)
            return None
        if not self._device_tensor(tensor):
            return None
        return node.target.value, self.context.code(tensor)

    # -- what the body reads ----------------------------------------------------------------------
    def _reads_in(self, body: cst.CSTNode, rows: set[str], depth: int = 1, comparisons: bool = True) -> bool:
        for node in [body, *descendants(body)]:
            if comparisons and isinstance(node, (cst.If, cst.While)) and _compares(node.test, rows):
                return True  # `if det[4] > t:`: Python needs the element's value
            if not isinstance(node, cst.Call):
                continue
            if self._converts(node, lambda e: _refers_to(e, rows)):
                return True
            if _item_of_call_on(node, rows):
                return True  # `target(o).cpu().item()`: a value computed from the row, read back per row
            if depth and self._helper_reads(node, rows, depth):
                return True
        return False

    def _reads_indexed(self, body: cst.CSTNode, index: str, tensor: str) -> bool:
        """`int(t[i][0])`, `t[i, 4].item()`: an element of row `i` of `t` converted."""
        def element(expr: cst.BaseExpression) -> bool:
            while isinstance(expr, cst.Subscript):
                if self.context.code(expr.value) == tensor and expr.slice:
                    first = expr.slice[0].slice
                    return isinstance(first, cst.Index) and isinstance(first.value, cst.Name) and first.value.value == index
                expr = expr.value
            return False

        return any(isinstance(n, cst.Call) and self._converts(n, element) for n in descendants(body))

    def _reads_aligned(self, body: cst.CSTNode, index: str) -> bool:
        """`c[i].item()`, `int(out[i].argmax())` in a loop over the rows of a device tensor: any device tensor
        the index walks is read back (or reduced and read back) one row at a time, not only the one whose
        size bounds the range (`for i in range(labels.size(0)): hits[labels[i]] += c[i].item()`)."""
        def row(expr: cst.BaseExpression) -> bool:
            while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
                expr = expr.func.value  # `out[i].argmax()`: a value computed from the row
            if not (isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name) and expr.slice):
                return False
            first = expr.slice[0].slice
            return (
                isinstance(first, cst.Index) and isinstance(first.value, cst.Name) and first.value.value == index
                and self._device_tensor(expr.value)
            )

        return any(isinstance(n, cst.Call) and self._converts(n, row) for n in descendants(body))

    def _converts(self, call: cst.Call, is_element: Callable[[cst.BaseExpression], bool]) -> bool:
        value = _converted(call)
        return value is not None and is_element(_strip_methods(value))

    def _helper_reads(self, call: cst.Call, rows: set[str], depth: int) -> bool:
        """`draw(det, img)`: a function of the file given the row that converts the row's elements."""
        for position, arg in enumerate(call.args):
            if arg.keyword is None and not arg.star and isinstance(arg.value, cst.Name) and arg.value.value in rows:
                function = called_function(self.context, call)
                if function is not None and self._function_reads(function, position, depth - 1):
                    return True
        return False

    def _function_reads(self, function: cst.FunctionDef, position: int, depth: int) -> bool:
        params = [p for p in function.params.params if p.name.value != "self"]
        if position >= len(params) or _stops_early(function.body, count_returns=False):
            return False
        return self._reads_in(function.body, {params[position].name.value}, depth)


def element_reads(context: Context) -> ElementReads:
    return context.shared(ElementReads)


def _bound_value(binding: object) -> Optional[cst.BaseExpression]:
    """The value a name was bound to by an assignment (also one unpacked: `pred, _ = model(x)`)."""
    if getattr(binding, "kind", None) == "assign" and getattr(binding, "value", None) is not None:
        return getattr(binding, "value")
    node = getattr(binding, "node", None)
    if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
        return node.value
    return None


def _moved_to_host(expr: cst.BaseExpression) -> bool:
    """`model(x).argmax(1).cpu()`: a method chain that ends on the host (`.cpu()`, `.numpy()`, `.tolist()`)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in ("cpu", "numpy", "tolist", "item"):
            return True
        expr = expr.func.value
    return False


def _concatenates(context: Context, call: cst.Call) -> bool:
    return (context.qualname(call) or "") in ("torch.cat", "torch.stack", "torch.concat", "torch.concatenate")


def _converted(call: cst.Call) -> Optional[cst.BaseExpression]:
    """`x` in `int(x)`, `float(x)`, `x.item()`: the value a call turns into a Python number."""
    func = call.func
    if isinstance(func, cst.Name) and func.value in _CONVERSIONS and len(call.args) == 1:
        return call.args[0].value
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not call.args:
        return func.value
    return None


def _item_of_call_on(call: cst.Call, rows: set[str]) -> bool:
    """`f(row).item()`: `.item()` (a tensor's own method) of a call given the row."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "item" and not call.args):
        return False
    value = _strip_methods(call.func.value)
    return isinstance(value, cst.Call) and any(
        isinstance(arg.value, cst.Name) and arg.value.value in rows for arg in value.args if arg.keyword is None
    )


def _strip_methods(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`det[4]` in `det[4].cpu().detach()`."""
    while (
        isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and not expr.args
        and expr.func.attr.value in _ELEMENT_METHODS
    ):
        expr = expr.func.value
    return expr


def _refers_to(expr: cst.BaseExpression, rows: set[str]) -> bool:
    """`det`, `det[0]`, `det[1:3][0]`: the row or an element of it."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in rows


def _compares(test: cst.BaseExpression, rows: set[str]) -> bool:
    """`p == t`, `det[4] > 0.5`: an element of a row compared, which Python must read to branch."""
    if not isinstance(test, cst.Comparison) or any(
        isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons
    ):
        return False
    return any(_refers_to(_strip_methods(side), rows) for side in [test.left, *(c.comparator for c in test.comparisons)])


def _keeps_rows(body: cst.CSTNode, rows: set[str]) -> bool:
    """`if p.item() > 0: out.append(p)`: rows kept as tensors, a filter that a mask replaces (not a read)."""
    return any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "append"
        and len(n.args) == 1 and isinstance(n.args[0].value, cst.Name) and n.args[0].value.value in rows
        for n in descendants(body)
    )


def _stops_early(body: cst.CSTNode, count_returns: bool = True) -> bool:
    """A `break` (or, for a loop body, a `return`) that ends the walk after a few rows."""
    for node in descendants(body):
        if isinstance(node, cst.Break) or (count_returns and isinstance(node, cst.Return)):
            return True
    return False
