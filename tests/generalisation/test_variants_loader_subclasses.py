"""Family D: a loader built from a project subclass of `DataLoader` that hands its arguments to the base
unchanged (no `__init__`, or `super().__init__(*args, **kwargs)` with keyword-only options of its own) has
the settings its call passes: unpinned batches copied to the GPU are reported at that call (TL102), pinned
ones copied without `non_blocking=True` at the copy (TL103). Near misses stay silent: a subclass that sets
its own settings (`pin_memory=True` inside its `__init__`), whose calls then say nothing about pinning."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 12
SELECT = ("TL102", "TL103")

LOADERS = """
import torch
from torch.utils.data import DataLoader


def collate(batch):
    return torch.utils.data.default_collate(batch)


class $Loader(DataLoader):
    $body
"""

BODIES = (
    "pass",
    "def __init__(self, *args, **kwargs):\n    super().__init__(*args, **kwargs)\n    self.collate_fn = collate",
    "def __init__(self, *args, frames=1, **kwargs):\n    super($Loader, self).__init__(*args, **kwargs)\n    self.frames = frames",
)

TRAIN = """
import torch
from loaders import $Loader


def train(model, dataset, optimizer):
    device = torch.device("cuda")
    model.to(device)
    loader = $Loader(dataset, batch_size=32, shuffle=True, num_workers=4$pin)$unpinned
    for images, labels in loader:
        images = images.to(device)$blocking
        labels = labels.to(device)$blocking
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

UNPINNED = Shape(
    "an unpinned loader of a DataLoader subclass",
    {"loaders.py": LOADERS, "train.py": TRAIN},
    {
        "Loader": ("AudioDataLoader", "BucketingDataLoader"),
        "body": BODIES,
        "pin": ("", ", pin_memory=False"),
        "unpinned": ("  # expect: TL102",),
        "blocking": ("",),
    },
    SELECT,
)

PINNED = Shape(
    "a pinned loader of a DataLoader subclass, copied without non_blocking",
    {"loaders.py": LOADERS, "train.py": TRAIN},
    {
        "Loader": ("AudioDataLoader", "BucketingDataLoader"),
        "body": BODIES,
        "pin": (", pin_memory=True",),
        "unpinned": ("",),
        "blocking": ("  # expect: TL103",),
    },
    SELECT,
)

OWN_SETTINGS = Shape(
    "a DataLoader subclass that sets its own settings",
    {"loaders.py": LOADERS, "train.py": TRAIN.replace(", num_workers=4$pin", "")},
    {
        "Loader": ("AudioDataLoader", "BucketingDataLoader"),
        "body": (
            "def __init__(self, dataset, batch_size, shuffle):\n"
            "    super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=4, pin_memory=True)",
            "def __init__(self, *args, **kwargs):\n    super().__init__(*args, pin_memory=True, **kwargs)",
        ),
        "unpinned": ("",),
        "blocking": ("",),
    },
    SELECT,
)


@pytest.mark.parametrize("shape", [UNPINNED, PINNED, OWN_SETTINGS], ids=lambda s: s.name)
def test_every_spelling(shape: Shape) -> None:
    report = differing(shape, LIMIT)
    assert report is None, report
