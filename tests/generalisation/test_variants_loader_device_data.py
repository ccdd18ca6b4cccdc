"""TL101: a dataset whose data already sits on the GPU gains nothing from worker processes (they cannot use
CUDA tensors made in the parent, nor start CUDA themselves), however the data gets there.

Silent: a Dataset class (in the training file or another) that moves the data it indexes to the GPU when it
is built (`.cuda()`, `.to(device)`, `torch.tensor(..., device=device)`, `torch.load(..., map_location="cuda")`)
and does per-item work on it (a random flip, a crop). Near misses stay reported: the same classes with the
data moved to the CPU, or kept where it was loaded."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 8

DATASET = '''
import numpy as np
import torch
from torch.utils.data import Dataset

device = torch.device("$where")


class $dataset_class(Dataset):
    def __init__(self, path):
        $load

    def __len__(self):
        return len(self.$data)

    def __getitem__(self, $index):
        x = self.$data[$index]
        if torch.rand(1).item() < 0.5:
            x = x.flip(-1)
        return x[:, 2:30, 2:30], self.labels[$index]
'''

LOADS = (
    "self.$data = torch.load(path).$move\nself.labels = torch.load(path + '.labels').$move",
    "arrays = np.load(path)\nself.$data = torch.tensor(arrays['x'], device=device)\nself.labels = torch.tensor(arrays['y'], device=device)",
    "self.$data, self.labels = torch.load(path, map_location=$location)",
    "x, y = torch.load(path)\nself.$data, self.labels = x.$move, y.$move",
)

TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
$definition

gpu = torch.device("cuda")
$holder = DataLoader($dataset_class("frames.pt"), batch_size=256, shuffle=True)  $expect
model = nn.Sequential(nn.Flatten(), nn.LazyLinear(10)).to(gpu)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(20):
    for x, y in $holder:
        loss = nn.functional.cross_entropy(model(x.to(gpu)), y.to(gpu))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

SLOTS = {
    "dataset_class": ("FrameSet", "GpuFrames"),
    "data": ("data", "frames"),
    "index": ("idx", "i"),
    "holder": ("loader", "train_dl"),
    "load": LOADS,
}


def _shape(name: str, where: str, move: str, location: str, expect: str, separate: bool) -> Shape:
    slots = {**SLOTS, "where": (where,), "move": (move,), "location": (location,), "expect": (expect,)}
    if separate:
        files = {"train.py": TRAIN.replace("$definition", "from frames import $dataset_class"), "frames.py": DATASET}
    else:
        files = {"train.py": TRAIN.replace("$definition", DATASET.replace("import torch\n", "", 1))}
    return Shape(name, files, slots, ("TL101",))


SHAPES = [
    _shape("data-on-the-gpu-same-file", "cuda", "to(device)", '"cuda"', "", False),
    _shape("data-on-the-gpu-other-file", "cuda:0", "cuda()", "device", "", True),
    _shape("data-on-the-cpu-same-file", "cpu", "to(device)", '"cpu"', "# expect: TL101", False),
    _shape("data-on-the-cpu-other-file", "cpu", "cpu()", "device", "# expect: TL101", True),
]


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_where_the_dataset_keeps_its_data_decides(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
