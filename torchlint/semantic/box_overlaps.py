"""Overlaps of boxes computed one pair at a time: a Python loop (or comprehension) that calls a function
computing the IoU of two single boxes (`iou(boxes1[i], boxes2[j])`), or computes the intersection inline
from single coordinates (`torch.max(a[i][0], b[j][0])`), where `torchvision.ops.box_iou` gives the whole
matrix of overlaps in one call.

A single-box IoU reads coordinates by integer position (`box[0]`, `box[2]`) and takes element-wise
maxima/minima of two of them; a batched one slices columns (`boxes[:, 0]`) and is not per box. Host code
(NumPy or plain Python numbers, no torch in the computation) is left alone: torchvision's op takes tensors.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import flatten_targets
from torchlint.lint.walk import descendants
from torchlint.semantic import project

_EXTREMES = frozenset("torch.max torch.min torch.maximum torch.minimum".split())


class BoxOverlaps:
    """Which loops of one file compute box overlaps pair by pair."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._functions: Optional[frozenset[str]] = None

    def loop(self, loop: cst.For) -> bool:
        """A `for` loop whose body computes the IoU of one box (pair) per iteration, not nested in one that
        already does."""
        if not self._per_pair(loop) or self._inside_reported(loop):
            return False
        return True

    def comprehension(self, node: Union[cst.ListComp, cst.GeneratorExp]) -> bool:
        """`[iou(gt, a) for a in anchors]`."""
        for_in = node.for_in
        names = _target_names(for_in.target)
        for inner in [node.elt, *descendants(node.elt)]:
            if isinstance(inner, cst.Call) and self._single_iou_call(inner, names):
                return not any(isinstance(a, cst.For) and self._per_pair(a) for a in self.context.ancestors(node))
        return False

    def _per_pair(self, loop: cst.For) -> bool:
        names = _target_names(loop.target)
        calls = [n for n in descendants(loop.body) if type(n) is cst.Call]  # exact types: see `walk.is_a`
        if any(self._single_iou_call(n, names) for n in calls):  # type: ignore[arg-type]
            return True
        # the intersection inline: two maxima/minima of single coordinates read at the loop's variables
        extremes = [n for n in calls if self._coordinate_extreme(n, torch_only=True)]  # type: ignore[arg-type]
        return len(extremes) >= 2 and any(_mentions(e, names) for e in extremes)

    def _inside_reported(self, loop: cst.For) -> bool:
        return inside_loop_where(self.context, loop, self._per_pair)

    def _single_iou_call(self, call: cst.Call, names: set[str]) -> bool:
        func = call.func
        return (
            isinstance(func, cst.Name)
            and any(_mentions(arg.value, names) for arg in call.args)  # cheap, before a module summary
            and self.single_iou_function(func)
        )

    def single_iou_function(self, func: cst.Name) -> bool:
        """`func` names a function of this file, or one imported from a project module, that computes the
        overlap of two single boxes with torch."""
        if func.value in self._single_iou_functions():
            return True
        found = project.imported(self.context, func)
        if found is None:
            return False
        summary, name = found
        return name in summary.model.box_loops.overlaps.single_iou_names()

    def single_iou_names(self) -> frozenset[str]:
        return self._single_iou_functions()

    def _single_iou_functions(self) -> frozenset[str]:
        """Functions of this file that compute the overlap of two single boxes with torch."""
        if self._functions is None:
            found = set()
            for statement in self.context.module.body:
                if not isinstance(statement, cst.FunctionDef) or len(statement.params.params) < 2:
                    continue
                nodes = list(descendants(statement.body))
                extremes = [n for n in nodes if isinstance(n, cst.Call) and self._coordinate_extreme(n, torch_only=False)]
                uses_torch = any(
                    isinstance(n, cst.Call) and (self.context.qualname(n) or "").startswith("torch.") for n in nodes
                ) or any(isinstance(n, cst.Attribute) and n.attr.value in ("clamp", "clamp_", "clip") for n in nodes)
                if len(extremes) >= 2 and uses_torch:
                    found.add(statement.name.value)
            self._functions = frozenset(found)
        return self._functions

    def _coordinate_extreme(self, call: cst.Call, torch_only: bool) -> bool:
        """`torch.max(a[0], b[0])`, `max(box1[2], box2[2])`: the larger (smaller) of two single coordinates."""
        qualname = self.context.qualname(call) or ""
        builtin = isinstance(call.func, cst.Name) and call.func.value in ("max", "min") and not qualname
        if qualname not in _EXTREMES and (torch_only or not builtin):
            return False
        args = [a.value for a in call.args if a.keyword is None]
        return len(args) == 2 and all(_coordinate(a) for a in args)


def _coordinate(expr: cst.BaseExpression) -> bool:
    """`box[0]`, `boxes[i][2]`, `boxes[i, 3]`: one coordinate of one box (an integer last index)."""
    if not isinstance(expr, cst.Subscript) or not expr.slice:
        return False
    last = expr.slice[-1].slice
    if not (isinstance(last, cst.Index) and isinstance(last.value, cst.Integer)):
        return False
    return all(isinstance(e.slice, cst.Index) for e in expr.slice)  # no column slices


def _target_names(target: cst.BaseExpression) -> set[str]:
    return {n.value for n in flatten_targets(target) if isinstance(n, cst.Name)}


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    return any(isinstance(n, cst.Name) and n.value in names for n in [expr, *descendants(expr)])


def inside_loop_where(context: Context, loop: cst.For, reported: Callable[[cst.For], bool]) -> bool:
    """`loop` is nested, in the same function, in a `for` loop that `reported` says is already reported: the
    inner loop is part of that finding."""
    for ancestor in context.ancestors(loop):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(ancestor, cst.For) and reported(ancestor):
            return True
    return False
