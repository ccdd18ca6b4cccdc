"""Family D: where a loader's batches go and whether it pins them, told however the program spells it.

Batches handed to a helper of another module that moves what it is given (`utils.cuda([imgs, z])`, a list or
tuple of the batch's parts) are copied to the GPU (TL102 when the loader does not pin). A `pin_memory` switch
whose value the file cannot see (`pin_memory=use_gpu` handed in by the caller) pins on the runs that turn it
on, so a blocking copy of its batches is reported (TL103). Near misses stay silent: a helper given only the
models, a helper that moves nothing, a switch written off (`pin_memory=False`)."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 8

HELPERS = '''
import torch


def $move(xs):
    if torch.cuda.is_available():
        if not isinstance(xs, (list, tuple)):
            return xs.cuda()
        return [x.cuda() for x in xs]
    return xs


def describe(xs):
    return [tuple(x.shape) for x in xs]
'''

HELPER_COPY = """
import torch
import torch.nn as nn
import torchvision
import $module
$import_line

dataset = torchvision.datasets.ImageFolder("data/train", transform=torchvision.transforms.ToTensor())
loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4)  $expect
D = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64 * 64, 1))
$call_models
optimizer = torch.optim.Adam(D.parameters(), lr=2e-4)
for epoch in range(20):
    for i, (imgs, labels) in enumerate(loader):
        z = torch.randn(imgs.size(0), 100)
        $moved
        loss = D(imgs).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

MOVES = (
    "imgs, z = $module.$move([imgs, z])",
    "imgs, labels = $module.$move((imgs, labels))",
    "imgs, z = $move([imgs, z])",
    "batch = $module.$move([imgs, labels, z])\nimgs = batch[0]",
)

MODULE_SLOTS = {
    "module": ("utils",),
    "move": ("cuda", "gpu", "to_gpu", "move_all"),
    "import_line": ("from $module import $move",),
    "call_models": ("$module.$move([D])", "D = $module.$move(D)", ""),
}


def _helper_shape(name: str, moved: tuple[str, ...], expect: str) -> Shape:
    return Shape(
        name,
        {"train.py": HELPER_COPY, "utils.py": HELPERS},
        {**MODULE_SLOTS, "moved": moved, "expect": (expect,)},
        ("TL102",),
    )


SWITCH_DATA = '''
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def $make(root, batch_size, shuffle=True, num_workers=4, $param=False):
    dataset = datasets.ImageFolder(root, transform=transforms.ToTensor())
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers, pin_memory=$param)
'''

SWITCH_TRAIN = """
import torch
import torch.nn as nn
from data import $make

$flag_line
device = torch.device("cuda" if $flag else "cpu")
loader = $make("data/train", 64, $param=$given)
model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64 * 64, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
for epoch in range(10):
    for x, y in loader:
        x = x.to(device)  $expect
        loss = criterion(model(x), y.to(device, non_blocking=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

SWITCH_SLOTS = {
    "make": ("make_loader", "build_dataset", "get_train_loader"),
    "param": ("pin_memory", "pin"),
    "flag": ("use_gpu", "use_cuda", "on_gpu"),
    "flag_line": ("$flag = torch.cuda.is_available()",),
}


def _switch_shape(name: str, given: tuple[str, ...], expect: str) -> Shape:
    return Shape(
        name,
        {"train.py": SWITCH_TRAIN, "data.py": SWITCH_DATA},
        {**SWITCH_SLOTS, "given": given, "expect": (expect,)},
        ("TL103",),
    )


SHAPES = [
    _helper_shape("helper-moves-batch-parts", MOVES, "# expect: TL102"),
    _helper_shape("helper-given-models-only", ("models = [D]", "sizes = $module.describe([imgs, z])"), ""),
    _switch_shape("pin-switch-handed-in", ("$flag",), "# expect: TL103"),
    _switch_shape("pin-switch-off", ("False",), ""),
]


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_where_batches_go_and_the_pinning_switch_decide(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
