"""TL406 per-box-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.rule import FixSafety, Rule
from torchlint.semantic.boxes import CROPS, NMS, OVERLAPS, PER_GROUP

_MESSAGES = {
    NMS: "Non-maximum suppression written as a Python loop over boxes: use torchvision.ops.nms(boxes, scores, "
    "iou_threshold) (or batched_nms for several classes or images)",
    PER_GROUP: "NMS called once per class or image in a Python loop: call torchvision.ops.batched_nms(boxes, "
    "scores, idxs, iou_threshold) once with the class (or image) index of every box",
    CROPS: "Boxes cropped and resized one at a time: crop them all at once with torchvision.ops.roi_align("
    "images, boxes, output_size)",
    OVERLAPS: "IoU computed one pair of boxes at a time in a Python loop: torchvision.ops.box_iou(boxes1, boxes2) "
    "gives the whole matrix of overlaps in one call",
}


class PerBoxLoop(Rule):
    code = "TL406"
    name = "per-box-loop"
    family = "Vectorisation and loops"
    summary = (
        "A Python loop over the boxes of a detection that `torchvision.ops` does in one call: greedy "
        "non-maximum suppression written by hand, NMS called once per class or image, crops resized one "
        "box at a time, or the IoU of two boxes computed one pair at a time."
    )
    message = (
        "Detection boxes processed one at a time in a Python loop: use the batched torchvision.ops call "
        "(nms, batched_nms, roi_align)"
    )
    explanation = (
        "Greedy suppression written in Python keeps one box per iteration: each iteration launches a dozen "
        "small kernels (index_select, clamp, arithmetic, a comparison, a mask) and on a GPU reads the "
        "candidate count back to the host to test the `while` condition, so thousands of candidate boxes "
        "cost thousands of launches and synchronisations. `torchvision.ops.nms` runs the whole suppression "
        "in one kernel (C++ on the CPU); `batched_nms` also removes the loop over classes or images by "
        "offsetting each group's boxes so they never overlap. Cropping boxes one at a time and resizing each "
        "with `interpolate` launches a slice, a copy and a resize per box; `torchvision.ops.roi_align` "
        "samples every box of every image in one call. Measured on a 2-core CPU (1 thread), the hand-written "
        "loop of the example over 2,000 random boxes (1,504 kept) took 319 ms, about 0.2 ms per kept box spent "
        "launching small operations; on a GPU each iteration also waits for the device. An IoU computed pair "
        "by pair launches half a dozen tiny operations per pair (four maxima/minima, products, a division); "
        "`box_iou` computes every pair in a few broadcast kernels."
    )
    bad = (
        "keep = []\n"
        "while order.numel() > 0:\n"
        "    i = order[0]\n"
        "    keep.append(i)\n"
        "    xx1 = x1[order[1:]].clamp(min=x1[i])\n"
        "    yy1 = y1[order[1:]].clamp(min=y1[i])\n"
        "    xx2 = x2[order[1:]].clamp(max=x2[i])\n"
        "    yy2 = y2[order[1:]].clamp(max=y2[i])\n"
        "    inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)\n"
        "    iou = inter / (areas[i] + areas[order[1:]] - inter)\n"
        "    order = order[1:][iou <= threshold]\n\n"
        "for c in range(num_classes):\n"
        "    keep = nms(boxes[c], scores[c], 0.5)\n"
        "    detections.append(boxes[c][keep])\n"
    )
    good = (
        "from torchvision.ops import batched_nms, nms, roi_align\n\n"
        "keep = nms(boxes, scores, threshold)\n\n"
        "keep = batched_nms(boxes, scores, class_ids, 0.5)\n\n"
        "crops = roi_align(images, boxes_with_image_index, output_size=(24, 24))\n"
    )
    false_positives = (
        "The rule looks for three shapes: a `while` loop that runs while a tensor of candidate indices is "
        "not empty, computes an intersection with at least two element-wise max/min/clamp calls (or calls an "
        "IoU function such as `box_iou`) and rebinds the candidates to a subset of themselves (the test may be "
        "the count alone: `while detections.size(0):`); a `for` loop over box indices that compares the IoU "
        "of box `i` with the boxes after it (`box_iou(dets[i:i + 1], dets[i + 1:]) < t`) to a threshold; a `for` loop "
        "whose body calls an NMS routine (`torchvision.ops.nms`, or a function called `nms`, `*_nms`, "
        "`non_max_suppression`), but not `batched_nms`, soft-NMS (it decays scores, which `batched_nms` does "
        "not) or a routine given a NumPy array; or a `for` loop that slices a tensor by two per-box "
        "bounds (`img[:, y1[k]:y2[k], x1[k]:x2[k]]`), resizes the slice with `interpolate` or adaptive "
        "pooling (directly or through a function of the same file) and collects it. Crops resized on the "
        "host (PIL, OpenCV) are not reported. `roi_align` samples bilinearly: where a model was trained on "
        "crops resized with another mode (`area`), check the accuracy before switching, or silence the "
        "line with `# noqa: TL406`. A loop over images whose boxes come from separate forward passes (one "
        "per scale) can still use `batched_nms` once on the concatenated boxes. Overlaps are reported when a "
        "loop or comprehension calls a function of the same file (or imported from a project module) that computes the IoU of two single boxes "
        "with torch (element-wise maxima/minima of coordinates read by position, `box[0]`, `box[2]`), or "
        "computes that intersection inline with `torch.max`/`torch.min` of single coordinates; an IoU "
        "function that slices columns (`boxes[:, 0]`) is already batched, and host code (NumPy, plain "
        "Python numbers) is left alone. An NMS call counts as per group only when it suppresses boxes the "
        "loop selects on each trip (`prediction[i]`, `scores[:, j]`); a loop that runs the model on each trip "
        "(over test images, or timing a detection) is a loop over inputs, and a per-class loop inside it is "
        "the one reported. A loop that nothing repeats (module-level code outside any loop, or a top-level "
        "function or method of a script no project file imports, called only from such code: one image of a "
        "demo) is left alone."
    )
    fix_safety = FixSafety.NONE
    requires = ("nms", "iou", "clamp", "clip", "max", "min", "interpolate", "adaptive_")

    def visit_While(self, node: cst.While) -> None:
        self._check(node)

    def visit_For(self, node: cst.For) -> None:
        self._check(node)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._check_comprehension(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._check_comprehension(node)

    def _check_comprehension(self, node: cst.ListComp | cst.GeneratorExp) -> None:
        if self.semantic.uses_torch and self.semantic.box_loops.overlaps_comprehension(node):
            if not self.semantic.runs_once(node):
                self.report(node, _MESSAGES[OVERLAPS])

    def _check(self, node: cst.CSTNode) -> None:
        if not self.semantic.uses_torch:
            return  # the advice is torchvision's
        kind = self.semantic.box_loops.kind(node)
        if kind is not None and not self.semantic.runs_once(node):  # one image of a demo: nothing repeats
            self.report(node, _MESSAGES[kind])
