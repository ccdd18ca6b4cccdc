"""Family E: a metric helper of another file that copies what it is given to the host, called on every batch.

A segmentation metric's `add_batch(target, output)`, a confusion-matrix builder, an accuracy helper: the helper
reads a value computed from its parameters (`pred.argmax(1).cpu().numpy()`, `correct = pred.eq(t).sum();
correct.item()`), so each call that hands it device tensors syncs, wherever the object was built (an attribute set in `__init__`, a local, a class imported from a module).
A metric logger's `update` that reads what it is given only when it is a tensor syncs where it is handed a name
bound to a tensor on one path and to None on the other. A meter held in a dict of meters, or one whose `update`
reads a value it computes from what it is given (`(output.argmax(1) == target).sum().item()`), syncs the same way.
Near misses stay silent: the same helpers handed NumPy
arrays the loop already copied, a helper that reads only its own host state, a logger handed numbers or None."""

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
        "read": READS[:1],
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


LOGGER = """
import torch


class MetricLogger(object):
    def __init__(self):
        self.meters = {}

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if v is None:
                continue
            if isinstance(v, torch.Tensor):
                v = v.item()
            self.meters.setdefault(k, []).append(v)
"""

STEP = """
import torch
import torch.nn as nn
from utils import MetricLogger


def train_one_epoch(model, criterion, loader, optimizer, device, mixup_fn):
    metric_logger = MetricLogger()
    for samples, targets in loader:
        samples = samples.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        output = model(samples)
        loss = criterion(output, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        $accuracy
        metric_logger.update($keyword=class_acc)$mark
"""

MAYBE_ACCURACY = (
    "if mixup_fn is None:\n    class_acc = (output.argmax(-1) == targets).float().mean()\nelse:\n    class_acc = None",
    "class_acc = None\nif mixup_fn is None:\n    class_acc = (output.max(-1)[-1] == targets).float().mean()",
)

MAYBE_TENSOR = Shape(
    "a logger handed a tensor on one path and None on the other",
    {"utils.py": LOGGER, "train.py": STEP},
    {"accuracy": MAYBE_ACCURACY, "keyword": ("class_acc", "acc1"), "mark": ("  # expect: TL207",)},
    SELECT,
)

NEVER_TENSOR = Shape(
    "a logger handed a number or None",
    {"utils.py": LOGGER, "train.py": STEP},
    {
        "accuracy": (
            "if mixup_fn is None:\n    class_acc = 0.0\nelse:\n    class_acc = None",
            "class_acc = None",
            "class_acc = None\nif mixup_fn is None:\n    class_acc = len(targets)",
        ),
        "keyword": ("class_acc", "acc1"),
        "mark": ("",),
    },
    SELECT,
)


METERS = """
import torch


class $Meter:
    def __init__(self):
        self.total = 0.0

    def update(self, output, target):
        self.total += $read
"""

METER_READS = (
    "(output.argmax(1) == target).sum().item()",
    "torch.sum(output.argmax(dim=1) == target).item()",
    "(output - target).abs().mean().item() * len(target)",
)

LOOP = """
import torch
from meters import $Meter


def train(model, loader, optimizer, device):
    model.to(device)
    $build
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        $call
"""

METER_SLOTS = {
    "Meter": ("Accuracy", "AverageMeter"),
    "read": METER_READS,
    "build": ('meters = {"acc": $Meter(), "err": $Meter()}\nacc = $Meter()',),
    "call": ('meters["acc"].update(out, y)  # expect: TL207', "acc.update(out, y)  # expect: TL207"),
}

METER_GIVEN = Shape(
    "a meter of another file reads a value computed from the tensors it is given",
    {"meters.py": METERS, "train.py": LOOP},
    METER_SLOTS,
    SELECT,
)

METER_HOST = Shape(
    "the same meter handed host copies",
    {"meters.py": METERS, "train.py": LOOP},
    {
        **METER_SLOTS,
        "read": ("(output.argmax(1) == target).sum()",),
        "call": ('meters["acc"].update(out.argmax(1), y)', "acc.update(out, y)"),
    },
    SELECT,
)


@pytest.mark.parametrize(
    "shape",
    [GIVEN_TENSORS, MODULE_ATTRIBUTE, LOCAL, HOST_VALUES, OWN_STATE, MAYBE_TENSOR, NEVER_TENSOR, METER_GIVEN, METER_HOST],
    ids=lambda s: s.name,
)
def test_every_spelling(shape: Shape) -> None:
    report = differing(shape, LIMIT)
    assert report is None, report
