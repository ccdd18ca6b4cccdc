"""TL802: whether DataParallel has more than one GPU to split batches over, told from its `device_ids` as the
program is set up, however it is spelt.

Silent: one device id (`[0]`, `(0,)`), or `range(n)` / `list(range(n))` / `[i for i in range(n)]` where `n` is
1, a name bound to 1, or a command-line option whose default is 1: a single replica. Near misses stay
reported: two ids, a count of 2 (literal or default), `torch.cuda.device_count()`, no `device_ids` at all."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 8

TRAIN = """
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

parser = argparse.ArgumentParser()
parser.add_argument("--$option", type=int, default=$default)
args = parser.parse_args()
$count_name = $count_value

net = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
$model = nn.DataParallel(net, device_ids=$ids).cuda()  $expect
loader = DataLoader(datasets.CIFAR10("data", transform=transforms.ToTensor()), batch_size=128, num_workers=4)
optimizer = torch.optim.SGD($model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in loader:
        loss = nn.functional.cross_entropy($model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

COUNTS = {"option": ("num_gpu", "ngpu"), "count_name": ("num_gpus", "n_devices"), "model": ("model", "generator")}

ONE = (
    "[0]",
    "(0,)",
    "range(1)",
    "range($count_name)",
    "range(args.$option)",
    "list(range(args.$option))",
    "[i for i in range(args.$option)]",
    "[i for i in range($count_name)]",
)

MANY = (
    "[0, 1]",
    "range(2)",
    "range(torch.cuda.device_count())",
    "list(range(torch.cuda.device_count()))",
    "[i for i in range(args.$option)]",
    "range($count_name)",
    "None",
)

SHAPES = [
    Shape("one-device", {"train.py": TRAIN}, {**COUNTS, "ids": ONE, "default": ("1",), "count_value": ("1",), "expect": ("",)}, ("TL802",)),
    Shape(
        "several-devices",
        {"train.py": TRAIN},
        {**COUNTS, "ids": MANY, "default": ("2",), "count_value": ("2",), "expect": ("# expect: TL802",)},
        ("TL802",),
    ),
]


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_the_devices_dataparallel_is_given_decide(shape: Shape) -> None:
    message = differing(shape, LIMIT * 2)
    assert message is None, message
