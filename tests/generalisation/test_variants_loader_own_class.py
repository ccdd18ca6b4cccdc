"""TL101: a `DataLoader` name that the project defines itself is not torch's loader, however it arrives.

Silent: `DataLoader(opt)` where a project module brought in by `from package.module import *` (absolute or
relative) defines a class or a function of that name (the project's own loader, which sets its workers in its
own code). Near misses stay reported: the star-imported module only re-exports torch's loader
(`from torch.utils.data import DataLoader`), or the file imports torch's loader by name."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 8

OWN_CLASS = '''
import torch.utils.data as data
from torchvision import datasets, transforms


class DataLoader:
    def __init__(self, opt):
        dataset = datasets.CIFAR10(opt.root, transform=transforms.ToTensor())
        self.loader = data.DataLoader(dataset, batch_size=opt.batch_size, num_workers=4, pin_memory=True)

    def __iter__(self):
        return iter(self.loader)
'''

OWN_FUNCTION = '''
import torch.utils.data as data
from torchvision import datasets, transforms


def DataLoader(opt):
    dataset = datasets.CIFAR10(opt.root, transform=transforms.ToTensor())
    return data.DataLoader(dataset, batch_size=opt.batch_size, num_workers=4, pin_memory=True)
'''

RE_EXPORT = '''
from torch.utils.data import DataLoader, Dataset
'''

TRAIN = """
import argparse

import torch
import torch.nn as nn
$imports

opt = argparse.Namespace(root="data", batch_size=64)
$dataset_line
$loader = $call  $expect
model = nn.Sequential(nn.Flatten(), nn.Linear(3072, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in $loader:
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

OWN_SLOTS = {
    "imports": ("from data.dataloader import *", "from .data.dataloader import *", "from data.dataloader import *\nimport os"),
    "loader": ("loader", "train_loader"),
    "dataset_line": ("",),
    "call": ("DataLoader(opt)",),
    "expect": ("",),
}

TORCH_SLOTS = {
    "imports": (
        "from data.dataloader import *\nfrom torchvision import datasets, transforms",
        "from torch.utils.data import DataLoader\nfrom torchvision import datasets, transforms",
    ),
    "loader": ("loader", "train_loader"),
    "dataset_line": ('dataset = datasets.CIFAR10("data", transform=transforms.ToTensor())',),
    "call": ("DataLoader(dataset, batch_size=64, shuffle=True)",),
    "expect": ("# expect: TL101",),
}

SHAPES = [
    Shape("own-class", {"train.py": TRAIN, "data/__init__.py": "", "data/dataloader.py": OWN_CLASS}, OWN_SLOTS, ("TL101",)),
    Shape("own-function", {"train.py": TRAIN, "data/__init__.py": "", "data/dataloader.py": OWN_FUNCTION}, OWN_SLOTS, ("TL101",)),
    Shape("re-exported-torch-loader", {"train.py": TRAIN, "data/__init__.py": "", "data/dataloader.py": RE_EXPORT}, TORCH_SLOTS, ("TL101",)),
]


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_where_the_loader_name_is_defined_decides(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
