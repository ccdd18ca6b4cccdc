"""The box-by-box loop analysis: which loops suppress, suppress per group, or crop one box at a time."""

from __future__ import annotations

import libcst as cst
from semantic_probe import ask

from torchlint.semantic.model import SemanticModel


def _kind(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> str:
    loop = model.context.enclosing(call, cst.For, cst.While)
    return str(model.box_loops.kind(loop)) if loop is not None else "no loop"


def test_greedy_suppression_per_class_and_crops() -> None:
    source = """
import torch
import torch.nn.functional as F

def suppress(x1, x2, order, t):
    while order.numel() > 0:
        i = order[0]
        probe()
        lo = torch.max(x1[order[1:]], x1[i])
        hi = torch.min(x2[order[1:]], x2[i])
        order = order[1:][(hi - lo) <= t]

def per_class(boxes, scores, n):
    for c in range(n):
        probe()
        keep = suppress(boxes[c], boxes[c], scores[c], 0.5) + my_nms(boxes[c])

def crops(img, y, ey, x, ex, out):
    for k in range(len(y)):
        probe()
        out.append(F.interpolate(img[:, :, y[k]:ey[k], x[k]:ex[k]], size=(8, 8)))
"""
    assert ask(source, _kind) == ["nms", "per-group", "crops"]


def test_not_box_loops() -> None:
    source = """
import torch
import torch.nn.functional as F

def drain(queue, model):
    while queue.numel() > 0:
        probe()  # no overlap computed
        queue = queue[1:]

def fixed_crops(img, out):
    for k in range(4):
        probe()  # fixed bounds: no per-box coordinates
        out.append(F.interpolate(img[:, :, 0:8, 0:8], size=(4, 4)))
"""
    assert ask(source, _kind) == ["None", "None"]
