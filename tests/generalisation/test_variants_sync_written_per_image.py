"""Family E: predictions copied to the host to be written as one file per image of the batch (an inner loop over
the batch that colours each label map and writes it, or only the first of each batch) are needed there: the copy
is the program's, whatever the writer (`cv2.imwrite`, `Image.fromarray(...).save`, `np.save`) and however the images are walked. Near misses
stay reported: the same loop whose writes sit behind a switch that may be off, and a copy kept only for a metric."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 12
SELECT = ("TL201",)

PROGRAM = """
import argparse

import cv2
import numpy as np
import torch
import torch.nn as nn
from PIL import Image
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--save", action="store_true")
args = parser.parse_args()
device = torch.device("cuda")
network = nn.Conv2d(3, 19, 1).to(device)
val_loader = DataLoader(val_set, batch_size=8, num_workers=4)
network.eval()
with torch.no_grad():
    for imgs, img_ids in val_loader:
        imgs = imgs.to(device)
        outputs = network(imgs)
        outputs = outputs.data.cpu().numpy()  $mark
        pred_label_imgs = np.argmax(outputs, axis=1).astype(np.uint8)
        $walk
"""

WRITERS = (
    "cv2.imwrite(img_id + '_pred.png', color)",
    "Image.fromarray(color).save(img_id + '_pred.png')",
    "np.save(img_id + '_pred.npy', color)",
)

WALKS = (
    "for i in range(pred_label_imgs.shape[0]):\n    color = palette[pred_label_imgs[i]]\n    img_id = img_ids[i]\n    $writer",
    "for pred, img_id in zip(pred_label_imgs, img_ids):\n    color = palette[pred]\n    $writer",
    "for i, img_id in enumerate(img_ids):\n    color = palette[pred_label_imgs[i]]\n    $writer",
    "for i in range(pred_label_imgs.shape[0]):\n    if i == 0:\n        color = palette[pred_label_imgs[i]]\n        img_id = img_ids[i]\n        $writer",
)

SWITCHED = tuple(
    walk.replace("\n    $writer", "\n    if args.save:\n        $writer") for walk in WALKS[:3]
) + (WALKS[3].replace("if i == 0:", "if i == 0 and args.save:"),)

SHAPES = [
    Shape("written-per-image", {"eval.py": PROGRAM}, {"mark": ("",), "walk": WALKS, "writer": WRITERS}, SELECT),
    Shape(
        "written-behind-a-switch",
        {"eval.py": PROGRAM},
        {"mark": ("# expect: TL201",), "walk": SWITCHED, "writer": WRITERS},
        SELECT,
    ),
    Shape(
        "kept-for-a-metric",
        {"eval.py": PROGRAM},
        {"mark": ("# expect: TL201",), "walk": ("for i in range(pred_label_imgs.shape[0]):\n    hist.append(pred_label_imgs[i].sum())",), "writer": ("",)},
        SELECT,
    ),
]


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_predictions_written_per_image_are_needed_on_the_host(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
