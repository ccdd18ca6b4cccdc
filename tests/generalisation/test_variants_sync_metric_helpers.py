"""Family E: a metric helper of another file that copies what it is given to the host, called on every batch.

A segmentation metric's `add_batch(target, output)`, a confusion-matrix builder, an accuracy helper: the helper
reads a value computed from its parameters (`pred.argmax(1).cpu().numpy()`, `pred = pred.cpu().numpy()` that
rebinds the parameter, `correct = pred.eq(t).sum(); correct.item()`), so each call that hands it device tensors
syncs, wherever the object was built (an attribute set in `__init__`, a local, a class imported from a module).
Near misses stay silent: the same helpers handed NumPy arrays the loop already copied, and a helper that reads only
its own host state."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 12
SELECT = ("TL201", "TL207")

METRICS = """
import numpy as np
import torch


class $Metric(object):
    def __init__(self, num_class):
        self.num_class = num_class
        self.matrix = np.zeros((num_class, num_class))
        self.total = 0

    def _hist(self, gt, pred):
        mask = (gt >= 0) & (gt < self.num_class)
        return np.bincount(self.num_class * gt[mask] + pred[mask], minlength=self.num_class ** 2)

    def $update(self, target, output):
        $read

    def score(self):
        return np.diag(self.matrix).sum() / self.matrix.sum()
"""

READS = (
    "pred = output.argmax(1).cpu().numpy()\ngt = target.cpu().numpy()\nself.matrix += self._hist(gt, pred).reshape(self.num_class, -1)",
    "output = output.argmax(1).cpu().numpy()\ntarget = target.cpu().numpy()\nself.matrix += self._hist(target, output).reshape(self.num_class, -1)",
    "correct = output.argmax(1).eq(target).sum()\nself.total += correct.item()",
    "self.total += output.argmax(1).eq(target).float().sum().item()",
)

TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
$import


class Trainer:
    def __init__(self):
        self.device = torch.device("cuda")
        self.model = nn.Conv2d(3, 21, 1).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.val_loader = DataLoader(val_set, batch_size=8, num_workers=4, pin_memory=True)
        self.metric = $build

    def validation(self, epoch):
        self.model.eval()
        for image, target in self.val_loader:
            image, target = image.to(self.device), target.to(self.device)
            with torch.no_grad():
                output = self.model(image)
            $call
        return self.metric.score()
"""

SLOTS = {
    "Metric": ("Evaluator", "SegmentationMetric", "RunningScore"),
    "update": ("update", "add_batch", "add"),
    "read": READS,
    "import": ("from metrics import $Metric", "import metrics", "from metrics import *"),
    "build": ("$Metric(21)",),
    "call": ("self.metric.$update(target, output)  # expect: TL207",),
}


GIVEN_TENSORS = Shape(
    "a metric of another file handed device tensors",
    {"metrics.py": METRICS, "train.py": TRAIN},
    {**SLOTS, "import": ("from metrics import $Metric", "from metrics import *")},
    SELECT,
)

MODULE_ATTRIBUTE = Shape(
    "a metric built as module.Class",
    {"metrics.py": METRICS, "train.py": TRAIN},
    {**SLOTS, "import": ("import metrics",), "build": ("metrics.$Metric(21)",)},
    SELECT,
)

LOCAL = Shape(
    "a metric built in the evaluation function",
    {
        "metrics.py": METRICS,
        "train.py": TRAIN.replace("        self.model.eval()\n", "        self.model.eval()\n        metric = $build\n").replace(
            "self.metric.score()", "metric.score()"
        ),
    },
    {**SLOTS, "import": ("from metrics import $Metric",), "call": ("metric.$update(target, output)  # expect: TL207",)},
    SELECT,
)

HOST_VALUES = Shape(
    "the same metric handed NumPy arrays",
    {"metrics.py": METRICS, "train.py": TRAIN},
    {
        **SLOTS,
        "import": ("from metrics import $Metric",),
        "read": READS[:2],
        "call": (
            "pred = output.argmax(1).cpu().numpy()  # expect: TL201\nself.metric.$update(target.cpu().numpy(), pred)  # expect: TL201",
        ),
    },
    SELECT,
)

OWN_STATE = Shape(
    "a metric that reads only its own host state",
    {"metrics.py": METRICS, "train.py": TRAIN},
    {
        **SLOTS,
        "import": ("from metrics import $Metric",),
        "read": ("self.total += 1\nself.matrix = self.matrix * 1.0",),
        "call": ("self.metric.$update(target, output)",),
    },
    SELECT,
)


@pytest.mark.parametrize(
    "shape", [GIVEN_TENSORS, MODULE_ATTRIBUTE, LOCAL, HOST_VALUES, OWN_STATE], ids=lambda s: s.name
)
def test_every_spelling(shape: Shape) -> None:
    report = differing(shape, LIMIT)
    assert report is None, report
