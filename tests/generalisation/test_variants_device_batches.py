"""Family D: a loader whose batches are already on the GPU when they come out of it (the dataset's items
are moved when read, in this file or another, the tensors it wraps were moved before it was built, or the
collate function moves the batch). Pinning such batches raises and copying them again is a no-op, so
neither TL102 nor TL103 speaks; the same programs over a dataset that hands out host tensors are reported."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 24

HEADER = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset
"""

# Dataset classes whose items are moved to the accelerator when they are read (`$device` is how they get
# the device: an attribute, a module-level device, a literal).
ON_DEVICE_CLASSES = (
    """
class $cls(Dataset):
    def __init__(self, features, targets, device="cuda"):
        self.features, self.targets, self.device = features, targets, device

    def __len__(self):
        return len(self.features)

    def __getitem__(self, index):
        return self.features[index].to(self.device), self.targets[index].to(self.device)
""",
    """
class $cls(Dataset):
    def __init__(self, features, targets, device=None):
        self.features = features
        self.targets = targets

    def __len__(self):
        return self.features.shape[0]

    def __getitem__(self, index):
        x = self.features[index].float().cuda()
        y = self.targets[index].cuda()
        return x, y
""",
    """
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class $cls(Dataset):
    def __init__(self, features, targets, device=None):
        self.data = list(zip(features, targets))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        x, y = self.data[index]
        return {"x": x.to(DEVICE), "y": y.to(DEVICE)}
""",
    """
class $cls(IterableDataset):
    def __init__(self, features, targets, device="cuda"):
        self.features, self.targets, self.device = features, targets, device

    def __iter__(self):
        for x, y in zip(self.features, self.targets):
            yield x.to(self.device), y.to(self.device)
""",
)

# The same classes handing out host tensors: the near miss, whose loaders are reported.
HOST_CLASSES = (
    """
class $cls(Dataset):
    def __init__(self, features, targets, device=None):
        self.features, self.targets = features, targets

    def __len__(self):
        return len(self.features)

    def __getitem__(self, index):
        return self.features[index].float(), self.targets[index]
""",
    """
class $cls(Dataset):
    def __init__(self, features, targets, device=None):
        self.features, self.targets = features, targets
        self.device = device  # kept, never used to move anything

    def __len__(self):
        return len(self.features)

    def __getitem__(self, index):
        return self.features[index], self.targets[index]
""",
)

PROGRAM = """
$device_line
$model = nn.Linear(16, 4).to(dev)
$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)
features, targets = torch.randn(512, 16), torch.randint(0, 4, (512,))
$make_dataset
$loader = DataLoader($data, batch_size=32, shuffle=True$pin)$loader_mark
for epoch in range(5):
    for $x, $y in $loader:
        $x, $y = $x.to(dev), $y.to(dev)$copy_mark
        loss = nn.functional.cross_entropy($model($x), $y)
        $optimizer.zero_grad()
        loss.backward()
        $optimizer.step()
"""

NAMES = {
    "cls": ("GpuDataset", "CachedSet", "Samples"),
    "model": ("model", "net"),
    "optimizer": ("optimizer", "opt"),
    "loader": ("loader", "train_loader", "batches"),
    "data": ("dataset", "train_set"),
    "x": ("inputs", "xb"),
    "y": ("labels", "yb"),
    "device_line": ('dev = torch.device("cuda")', 'dev = "cuda" if torch.cuda.is_available() else "cpu"'),
}
# how the dataset is built: given the device or not (a class that is given one and never moves anything
# still hands out host tensors)
MAKE_ON_DEVICE = ("$data = $ref(features, targets, dev)", "$data = $ref(features, targets)", "$data = $ref(features, targets, device=dev)")
MAKE_ON_HOST = ("$data = $ref(features, targets)", "$data = $ref(features, targets, device=dev)")

# frames: the class in this file, or imported from another project file (by name, or as `module.Class`),
# with how the program names it
FRAMES = {
    "here": ({"main.py": HEADER + "$class_def\n" + PROGRAM}, "$cls"),
    "other_file": (
        {"main.py": HEADER + "from datasets_gpu import $cls\n" + PROGRAM, "datasets_gpu.py": HEADER + "$class_def\n"},
        "$cls",
    ),
    "module_attribute": (
        {"main.py": HEADER + "import datasets_gpu\n" + PROGRAM, "datasets_gpu.py": HEADER + "$class_def\n"},
        "datasets_gpu.$cls",
    ),
}

PINNING = {
    # unpinned: TL102 would ask to pin; pinned: TL103 would ask for non_blocking=True
    "unpinned": ("", "  # expect: TL102", ""),
    "pinned": (", pin_memory=True", "", "  # expect: TL103"),
}


def _shape(frame: str, pinning: str, on_device: bool) -> Shape:
    pin, loader_mark, copy_mark = PINNING[pinning]
    return Shape(
        name=f"{'device' if on_device else 'host'}-items/{frame}/{pinning}",
        files=FRAMES[frame][0],
        slots={
            **NAMES,
            "ref": (FRAMES[frame][1],),
            "class_def": ON_DEVICE_CLASSES if on_device else HOST_CLASSES,
            "make_dataset": MAKE_ON_DEVICE if on_device else MAKE_ON_HOST,
            "pin": (pin,),
            "loader_mark": ("" if on_device else loader_mark,),
            "copy_mark": ("" if on_device else copy_mark,),
        },
        select=("TL102", "TL103"),
    )


SHAPES = [_shape(f, p, d) for f in FRAMES for p in PINNING for d in (True, False)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_device_items_are_neither_pinned_nor_copied_again(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)


# Tensors moved to the GPU before the TensorDataset wraps them, and a collate function of another file that
# moves the batch: silent; the same programs on host tensors, or a collate that only stacks, are reported.
WRAPPED = """
dev = torch.device("cuda")
model = nn.Linear(16, 4).to(dev)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
$tensors
loader = DataLoader($dataset, batch_size=32, shuffle=True$collate$pin)$loader_mark
for epoch in range(5):
    for xb, yb in loader:
        xb, yb = xb.to(dev), yb.to(dev)$copy_mark
        loss = nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
ON_DEVICE_TENSORS = (
    "features = torch.randn(512, 16).to(dev)\ntargets = torch.randint(0, 4, (512,)).to(dev)",
    "features = torch.randn(512, 16)\ntargets = torch.randint(0, 4, (512,))\nfeatures = features.to(dev)\ntargets = targets.to(dev)",
    "features = torch.randn(512, 16, device=dev)\ntargets = torch.randint(0, 4, (512,), device=dev)",
    "features, targets = torch.randn(512, 16), torch.randint(0, 4, (512,))\nfeatures, targets = features.cuda(), targets.cuda()\nfeatures = features.cuda()",
)
HOST_TENSORS = (
    "features = torch.randn(512, 16)\ntargets = torch.randint(0, 4, (512,))",
    "features = torch.randn(512, 16).float()\ntargets = torch.randint(0, 4, (512,)).to(torch.long)",
)
COLLATES = """
import torch


def collate_to_gpu(items):
    xs, ys = zip(*items)
    return torch.stack(xs).cuda(), torch.stack(ys).cuda()


def collate_to(items, device="cuda"):
    xs, ys = zip(*items)
    return torch.stack(xs).to(device), torch.stack(ys).to(device)


def stack_only(items):
    xs, ys = zip(*items)
    return torch.stack(xs), torch.stack(ys)
"""


def _wrapped(pinning: str, on_device: bool, how: str) -> Shape:
    pin, loader_mark, copy_mark = PINNING[pinning]
    if how == "tensors":
        tensors = ON_DEVICE_TENSORS if on_device else HOST_TENSORS
        collate: tuple[str, ...] = ("",)
    else:
        tensors = HOST_TENSORS
        collate = (
            (", collate_fn=collate_to_gpu", ", collate_fn=partial(collate_to, device=dev)")
            if on_device
            else (", collate_fn=stack_only",)
        )
    return Shape(
        name=f"{'device' if on_device else 'host'}-{how}/{pinning}",
        files={
            "main.py": HEADER + "from functools import partial\nfrom collates import collate_to_gpu, collate_to, stack_only\n" + WRAPPED,
            "collates.py": COLLATES,
        },
        slots={
            "tensors": tensors,
            "dataset": ("TensorDataset(features, targets)",),
            "collate": collate,
            "pin": (pin,),
            "loader_mark": ("" if on_device else loader_mark,),
            "copy_mark": ("" if on_device else copy_mark,),
        },
        select=("TL102", "TL103"),
    )


WRAPPED_SHAPES = [_wrapped(p, d, h) for p in PINNING for d in (True, False) for h in ("tensors", "collate")]


@pytest.mark.parametrize("shape", WRAPPED_SHAPES, ids=lambda s: s.name)
def test_moved_tensors_and_moving_collates_are_neither_pinned_nor_copied_again(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
