"""Family A: a loss computed image by image over a padded batch (for each image: keep its real boxes with a mask,
match them, guard the image with no box, collect one loss value) is a per-sample loop: every image gives one
value, and a mask over the padding does the batch at once. Near misses: the same loop collecting pieces of
varying size (the matched boxes themselves, a list of detections), or branching on a sample's values rather
than on whether its piece is empty."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 24

LOSS = """
import torch
import torch.nn as nn


class $Loss(nn.Module):
    def forward(self, $preds, $targets):
        $batch_size = $preds.shape[0]
        $terms = []
        for j in range($batch_size):  # expect: TL401
            pred = $preds[j]
            $keep
            $guard
            iou = pred[:, :4] @ target[:, :4].t()
            best, _ = iou.max(dim=1)
            positive = best > 0.5
            $collect
        return torch.stack($terms).mean()
"""

# the image's real boxes, cut from the padding
KEEPS = (
    "target = $targets[j]\ntarget = target[target[:, 4] != -1]",
    "target = $targets[j][$targets[j][:, 4] >= 0]",
    "valid = $targets[j][:, 4] != -1\ntarget = $targets[j][valid & (valid | valid)]",
)

# an image with no box (or no positive) handled on its own
GUARDS = (
    "if target.shape[0] == 0:\n    $terms.append(pred.sum() * 0)\n    continue",
    "if len(target) == 0:\n    $terms.append(torch.tensor(0.0).to(pred.device))\n    continue",
    "if target.numel() == 0:\n    continue",
    "",
)

# one value per image
COLLECTS = (
    "$terms.append((pred[:, 4] - positive.float()).pow(2).sum() / torch.clamp(positive.sum().float(), min=1.0))",
    "loss = (pred[:, 4] - positive.float()).abs().mean()\n$terms.append(loss)",
    "if positive.sum() > 0:\n    $terms.append(pred[:, 4].sigmoid().mean())\nelse:\n    $terms.append(torch.tensor(0.0).cuda())",
)

NAMES = {
    "Loss": ("FocalLoss", "DetectionLoss", "YoloLoss"),
    "preds": ("classifications", "outputs", "p"),
    "targets": ("annotations", "targets", "gt"),
    "batch_size": ("batch_size", "n", "num_images"),
    "terms": ("losses", "cls_losses", "per_image"),
}

# near misses: what is collected keeps each image's varying size (its boxes, a list of boxes)
PIECES = (
    "$terms.append(target[positive.nonzero()[:, 0] % target.shape[0]])",
    "$terms.append(pred[positive])",
    "$terms.extend(pred[positive].unbind(0))",
)

# near miss: a branch on the values of a sample, not on whether its piece is empty
VALUE_BRANCH = (
    "if pred[0, 4] > 0.5:\n    $terms.append(pred.sum())\n    continue",
    "if target[0, 4] == 3:\n    continue",
)


def _shape(name: str, guards: tuple[str, ...], collects: tuple[str, ...], marked: bool) -> Shape:
    template = LOSS if marked else LOSS.replace("  # expect: TL401", "")
    return Shape(
        name=name,
        files={"loss.py": template},
        slots={**NAMES, "keep": KEEPS, "guard": guards, "collect": collects},
        select=("TL401",),
    )


SHAPES = [
    _shape("one-loss-value-per-image", GUARDS, COLLECTS, True),
    _shape("pieces-of-varying-size-per-image", GUARDS, PIECES, False),
    _shape("branch-on-a-sample-value", VALUE_BRANCH, COLLECTS, False),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_loss_terms_per_image_of_a_padded_batch(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
