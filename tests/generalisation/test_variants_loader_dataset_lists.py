"""TL101: a loader over one element of a list of datasets is judged by what the list holds.

Reported: `DataLoader(sets[0], ...)` where `sets` is a list of datasets that read files (filled by `append` or
written as a list display). Silent: the same when every dataset in the list is a `TensorDataset` in memory."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 12

TRAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from torchvision.datasets import ImageFolder


def train(opt):
    $fill
    loaders = []
    loaders.append($loader)  $expect
    model = torch.nn.Linear(3, 3).cuda()
    for epoch in range(10):
        for loader in loaders:
            for images, labels in loader:
                loss = model(images.cuda()).sum()
                loss.backward()
"""

ON_DISK = (
    """sets = []
sets.append(ImageFolder(opt.train_a))
sets.append(ImageFolder(opt.train_b))""",
    "sets = [ImageFolder(opt.train_a), ImageFolder(opt.train_b)]",
)

IN_MEMORY = (
    """sets = []
sets.append(TensorDataset(torch.randn(100, 3), torch.zeros(100)))""",
    "sets = [TensorDataset(torch.load(opt.x), torch.load(opt.y))]",
)

LOADERS = ("DataLoader(sets[0], batch_size=8)", "DataLoader(sets[0], batch_size=8, shuffle=True)")

SHAPES = [
    Shape("on-disk", {"train.py": TRAIN}, {"fill": ON_DISK, "loader": LOADERS, "expect": ("# expect: TL101",)}, ("TL101",)),
    Shape("in-memory", {"train.py": TRAIN}, {"fill": IN_MEMORY, "loader": LOADERS, "expect": ("",)}, ("TL101",)),
]


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_an_element_of_a_list_of_datasets(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
