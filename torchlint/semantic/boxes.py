"""Box-by-box loops: Python loops over the boxes of a detection that `torchvision.ops` does in one call.

Three shapes, recognised by what the loop does rather than by what it is called:

- greedy suppression written by hand: a `while` loop that runs while a tensor of candidate indices is not
  empty, computes the overlap of the best box with the rest (element-wise max/min of coordinates, or an
  IoU function) and keeps
  only the candidates under a threshold (`torchvision.ops.nms`);
- suppression run once per class or per image: a `for` loop whose body calls an NMS routine
  (`torchvision.ops.batched_nms` takes the class or image index of every box and does them all at once);
- crops resized one box at a time: a `for` loop that slices a tensor by per-box coordinates
  (`img[:, y1[k]:y2[k], x1[k]:x2[k]]`), resizes each crop to a fixed size with `interpolate` (directly or
  through a function of the file) and collects them (`torchvision.ops.roi_align`);
- overlaps computed one pair of boxes at a time (`torchvision.ops.box_iou`): see `box_overlaps`.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants
from torchlint.semantic import loops
from torchlint.semantic.box_overlaps import BoxOverlaps, inside_loop_where
from torchlint.semantic.sample_syntax import flatten_names, names_in
from torchlint.semantic.values import PY, value_kinds

# Element-wise max/min: how an intersection of boxes is computed.
_EXTREMES = frozenset(
    "torch.max torch.min torch.maximum torch.minimum torch.clamp torch.clip".split()
)

# Ops that resize a crop to a fixed size.
_RESIZES = frozenset(
    "torch.nn.functional.interpolate torch.nn.functional.upsample torch.nn.functional.adaptive_avg_pool2d "
    "torch.nn.functional.adaptive_max_pool2d".split()
)

# Suppression already batched over classes or images: nothing to advise.
_BATCHED = frozenset("batched_nms multiclass_nms".split())

NMS = "nms"
PER_GROUP = "per-group"
CROPS = "crops"
OVERLAPS = "overlaps"


class BoxLoops:
    """Classifies the loops of one file as box-by-box work (shared by the file's rules)."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._resizers: Optional[frozenset[str]] = None
        self._overlaps = BoxOverlaps(context)

    @property
    def overlaps(self) -> BoxOverlaps:
        """Overlaps of boxes computed one pair at a time (see `box_overlaps`)."""
        return self._overlaps

    def kind(self, loop: cst.CSTNode) -> Optional[str]:
        """NMS, PER_GROUP, CROPS or OVERLAPS when `loop` is a box-by-box loop of that kind; None otherwise."""
        if isinstance(loop, cst.While) and self.is_greedy_suppression(loop):
            return NMS
        if isinstance(loop, cst.For):
            if self._suppresses_per_group(loop) and not self._inside_suppressing_loop(loop):
                return PER_GROUP
            if self._suppresses_one_by_one(loop):
                return NMS
            if self._resizes_crops(loop):
                return CROPS
            if self._overlaps.loop(loop):
                return OVERLAPS
        return None

    def overlaps_comprehension(self, node: cst.ListComp | cst.GeneratorExp) -> bool:
        """`[iou(gt, a) for a in anchors]`: the IoU of one pair of boxes per element."""
        return self._overlaps.comprehension(node)

    # -- greedy suppression -------------------------------------------------------------------
    def is_greedy_suppression(self, loop: cst.While) -> bool:
        candidates = _non_empty_test(loop.test)
        if candidates is None:
            return False
        nodes = list(descendants(loop.body))
        extremes = sum(1 for n in nodes if isinstance(n, cst.Call) and self._is_extreme(n))
        if extremes < 2 and not any(isinstance(n, cst.Call) and _is_overlap_call(n) for n in nodes):
            return False  # no overlap of boxes computed
        return any(_filters_by_threshold(n, candidates) for n in nodes)

    def _is_extreme(self, call: cst.Call) -> bool:
        qualname = self.context.qualname(call) or ""
        if qualname in _EXTREMES:
            return True
        # `x1[order[1:]].clamp(min=x1[i])`, `xx1.clamp(min=0)`
        return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("clamp", "clamp_", "clip") and any(
            a.keyword is not None and a.keyword.value in ("min", "max") for a in call.args
        )

    def _suppresses_one_by_one(self, loop: cst.For) -> bool:
        """`for i in range(len(dets)): ious = bbox_iou(dets[i].unsqueeze(0), dets[i + 1:]); dets[i + 1:] *=
        (ious < t)`: greedy suppression over box indices, the overlap of box `i` with the boxes after it
        compared to a threshold (matching boxes against another set, `box_iou(gt[i:i + 1], anchors)`, is not)."""
        index = _loop_index(loop)
        if index is None:
            return False
        nodes = list(descendants(loop.body))
        kinds = value_kinds(self.context)
        for call in nodes:
            if not (isinstance(call, cst.Call) and _is_overlap_call(call)) or len(call.args) < 2:
                continue
            rests = [_rest_after(a.value, index) for a in call.args]
            if any(rest is not None and kinds.kind(rest) != PY and any(
                _same_boxes(other.value, rest, index) for other in call.args if other.value is not a.value
            ) for a, rest in zip(call.args, rests)):
                return any(isinstance(n, cst.Comparison) and _thresholds(n) for n in nodes)
        return False

    # -- suppression per class or image ---------------------------------------------------------
    def _suppresses_per_group(self, loop: cst.For) -> bool:
        """The loop calls NMS on the boxes of the group it selects on each trip (`prediction[i]`, `scores[:,
        j]`): a loop that repeats a whole detection (over test images, or to time it) is not one."""
        if not any(type(n) is cst.Call and _names_suppression(n) for n in descendants(loop.body)):  # type: ignore[arg-type]
            return False  # no call named like NMS: spares asking whether the loop is hot
        if loops.is_hot(self.context, loop) or any(
            loops.is_forward_call(self.context, call) for call in loops.hot_calls_in(self.context, loop)
        ):
            return False  # each trip runs the model: a new detection, not a group of this one
        chosen = set(flatten_names(loop.target))
        for node in descendants(loop.body):  # in order: what each assignment computes from the group
            if isinstance(node, cst.Assign) and names_in(node.value) & chosen:
                for target in node.targets:
                    chosen.update(flatten_names(target.target))
        return any(
            isinstance(n, cst.Call) and self._is_suppression(n) and any(names_in(a.value) & chosen for a in n.args)
            for n in descendants(loop.body)
        )

    def _is_suppression(self, call: cst.Call) -> bool:
        if not _names_suppression(call):
            return False
        name = last_name(call.func) or ""
        qualname = self.context.qualname(call) or ""
        if qualname.startswith("torchvision.ops"):
            return name == "nms"
        if not (name in ("nms", "non_max_suppression") or name.endswith("_nms") or name.startswith("nms_")):
            return False
        # boxes in a NumPy array: host code with its own suppression routine
        return not call.args or value_kinds(self.context).kind(call.args[0].value) != PY

    def _inside_suppressing_loop(self, loop: cst.For) -> bool:
        """An inner loop of a nest already reported for its suppression calls."""
        return inside_loop_where(self.context, loop, self._suppresses_per_group)

    # -- crops resized one at a time ------------------------------------------------------------
    def _resizes_crops(self, loop: cst.For) -> bool:
        index = _loop_index(loop)
        if index is None:
            return False
        nodes = list(descendants(loop.body))
        crops = {id(n) for n in nodes if isinstance(n, cst.Subscript) and _per_box_slice(n, index)}
        if not crops:
            return False
        for node in nodes:
            if isinstance(node, cst.Call) and self._is_resize(node):
                if any(id(n) in crops or _names_crop(n, nodes, crops) for n in [node, *descendants(node)]):
                    return _collects(loop)
        return False

    def _is_resize(self, call: cst.Call) -> bool:
        qualname = self.context.qualname(call) or ""
        if qualname in _RESIZES:
            return True
        return isinstance(call.func, cst.Name) and call.func.value in self._resizing_functions()

    def _resizing_functions(self) -> frozenset[str]:
        """Functions of this file that resize a tensor with interpolate (`imresample(img, (24, 24))`)."""
        if self._resizers is None:
            found = set()
            for statement in self.context.module.body:
                if isinstance(statement, cst.FunctionDef) and any(
                    isinstance(n, cst.Call) and (self.context.qualname(n) or "") in _RESIZES
                    for n in descendants(statement.body)
                ):
                    found.add(statement.name.value)
            self._resizers = frozenset(found)
        return self._resizers


def _names_suppression(call: cst.Call) -> bool:
    """The call's name could be an NMS routine's (`nms`, `torchvision.ops.nms`, `soft_nms_cpu`, not
    `batched_nms`): the test `_is_suppression` starts with, without asking what the name is bound to."""
    name = last_name(call.func) or ""
    if name in _BATCHED or "batched" in name or "soft" in name.lower():
        return False  # already batched, or soft-NMS (decays scores: no torchvision equivalent)
    return name == "nms" or name == "non_max_suppression" or name.endswith("_nms") or name.startswith("nms_")


def box_loops(context: Context) -> BoxLoops:
    return context.shared(BoxLoops)


def _non_empty_test(test: cst.BaseExpression) -> Optional[str]:
    """`order` for `order.numel() > 0`, `order.size(0) > 0`, `len(order) != 0`, or the count alone
    (`while detections.size(0):`, `while len(order):`) (a NumPy loop, `order.size > 0` with `np.maximum`, is
    host code that torchvision's tensor ops do not replace one for one)."""
    if isinstance(test, cst.Comparison):
        if len(test.comparisons) != 1:
            return None
        comparison = test.comparisons[0]
        if not isinstance(comparison.operator, (cst.GreaterThan, cst.NotEqual)) or not (
            isinstance(comparison.comparator, cst.Integer) and comparison.comparator.value == "0"
        ):
            return None
        left = test.left
    else:
        left = test
    if isinstance(left, cst.Subscript) and isinstance(left.value, cst.Attribute) and left.value.attr.value == "shape":
        owner = left.value.value  # `detections.shape[0]`
        return owner.value if isinstance(owner, cst.Name) else None
    if isinstance(left, cst.Call):
        func = left.func
        if isinstance(func, cst.Name) and func.value == "len" and len(left.args) == 1:
            left = left.args[0].value
            return left.value if isinstance(left, cst.Name) else None
        if isinstance(func, cst.Attribute) and func.attr.value in ("numel", "size", "nelement"):
            return func.value.value if isinstance(func.value, cst.Name) else None
        return None
    return None


def _is_overlap_call(call: cst.Call) -> bool:
    """`box_iou(a, b)`, `bbox_overlaps(a, b)`, `jaccard(a, b)`: a function that computes overlaps of boxes."""
    name = (last_name(call.func) or "").lower()
    return "iou" in name.split("_") or name in ("jaccard", "bbox_overlaps", "box_overlaps", "compute_overlap")


def _rest_after(expr: cst.BaseExpression, index: str) -> Optional[cst.BaseExpression]:
    """`dets` for `dets[i + 1:]` (or `dets[i + 1:, :4]`): the boxes after box `index`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        expr = expr.func.value  # `dets[i + 1:].float()`
    if not (isinstance(expr, cst.Subscript) and expr.slice):
        return None
    first = expr.slice[0].slice
    if isinstance(first, cst.Slice) and first.upper is None and first.lower is not None and any(
        isinstance(n, cst.Name) and n.value == index for n in [first.lower, *descendants(first.lower)]
    ):
        return expr.value
    return None


def _same_boxes(expr: cst.BaseExpression, boxes: cst.BaseExpression, index: str) -> bool:
    """`dets[i]`, `dets[i].unsqueeze(0)`, `dets[i:i + 1, :4]`: box `index` of the same tensor."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        expr = expr.func.value
    if not (isinstance(expr, cst.Subscript) and expr.slice and isinstance(boxes, cst.Name)):
        return False
    base = expr.value
    while isinstance(base, cst.Subscript):
        base = base.value
    first = expr.slice[0].slice
    at_index = isinstance(first, cst.Index) and isinstance(first.value, cst.Name) and first.value.value == index
    at_index = at_index or isinstance(first, cst.Slice) and isinstance(first.lower, cst.Name) and first.lower.value == index
    return at_index and isinstance(base, cst.Name) and base.value == boxes.value


def _thresholds(comparison: cst.Comparison) -> bool:
    """`ious < nms_thresh`, `iou > 0.5`: an overlap compared to a threshold."""
    return any(isinstance(c.operator, (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual)) for c in comparison.comparisons)


def _filters_by_threshold(node: cst.CSTNode, candidates: str) -> bool:
    """`order = order[iou <= t]`, `idx = idx[IoU.le(t)]`, `order = order[ids + 1]`: the candidates rebound
    to a subset of themselves (picked by a mask or indices, not a plain slice)."""
    if not isinstance(node, cst.Assign) or len(node.targets) != 1:
        return False
    target, value = node.targets[0].target, node.value
    if not (isinstance(target, cst.Name) and target.value == candidates and isinstance(value, cst.Subscript)):
        return False
    if any(isinstance(e.slice, cst.Slice) for e in value.slice):
        return False
    base = value.value
    while isinstance(base, cst.Subscript):  # `order[1:][iou <= t]`
        base = base.value
    return isinstance(base, cst.Name) and base.value == candidates


def _loop_index(loop: cst.For) -> Optional[str]:
    """`k` in `for k in range(...)` or `for k, box in enumerate(...)`."""
    iterable, target = loop.iter, loop.target
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name)):
        return None
    if iterable.func.value == "range" and isinstance(target, cst.Name):
        return target.value
    if iterable.func.value == "enumerate" and isinstance(target, cst.Tuple) and target.elements:
        first = target.elements[0].value
        return first.value if isinstance(first, cst.Name) else None
    return None


def _per_box_slice(subscript: cst.Subscript, index: str) -> bool:
    """Two slices bounded by per-box values: `img[:, y[k]:ey[k], x[k]:ex[k]]`."""
    bounded = 0
    for element in subscript.slice:
        part = element.slice
        if isinstance(part, cst.Slice) and any(
            bound is not None and _mentions_indexed(bound, index) for bound in (part.lower, part.upper)
        ):
            bounded += 1
    return bounded >= 2


def _mentions_indexed(expr: cst.BaseExpression, index: str) -> bool:
    """`y[k]`, `(y[k] - 1)`, `box[k, 0]`: a value read at the loop index."""
    for node in [expr, *descendants(expr)]:
        if isinstance(node, cst.Subscript) and node.slice:
            first = node.slice[0].slice
            if isinstance(first, cst.Index) and isinstance(first.value, cst.Name) and first.value.value == index:
                return True
    return False


def _names_crop(node: cst.CSTNode, nodes: list[cst.CSTNode], crops: set[int]) -> bool:
    """`img_k` in `interpolate(img_k, ...)` when `img_k = img[..., y[k]:ey[k], ...]...` in the loop."""
    if not isinstance(node, cst.Name):
        return False
    for other in nodes:
        if isinstance(other, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == node.value for t in other.targets
        ):
            if any(id(n) in crops for n in [other.value, *descendants(other.value)]):
                return True
    return False


def _collects(loop: cst.For) -> bool:
    """The resized crops are kept: appended, or stored per box."""
    for node in descendants(loop.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in ("append", "extend"):
            return True
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Subscript) for t in node.targets):
            return True
    return False
