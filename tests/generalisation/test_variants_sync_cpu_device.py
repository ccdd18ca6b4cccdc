"""Family E: a program that names its device and moves everything to it, where that device is the CPU
(`device = torch.device("cpu")  # use cuda or cpu`), runs on the host: its host reads cost nothing, however
the device is spelt or used. The same program on an accelerator device is reported."""

from __future__ import annotations

import re

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 10
SELECT = ("TL201", "TL202", "TL204", "TL207")

PROGRAM = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from sklearn.metrics import accuracy_score


def accuracy(target, pred):
    return accuracy_score(target.detach().cpu().numpy(), pred.detach().cpu().numpy())


$devline
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10)).to($dev)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)
probe = model(torch.randn(2, 1, 28, 28, device=$dev))
history = []
for epoch in range(10):
    for inputs, targets in loader:
        inputs, targets = inputs.to($dev), targets.to($dev)
        output = model(inputs)
        loss = criterion(output, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        $sync
print("GPUs:", [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
"""

SYNC = (
    "history.append(loss.item())  # expect: TL201",
    "history.append(float(loss))  # expect: TL202",
    "history.append(accuracy(targets, output.argmax(1)))  # expect: TL207",
    "if loss < 0.01:  # expect: TL204\n    break",
    "history.append(loss.detach().cpu().numpy())  # expect: TL201",
)

CPU_DEVICE = (
    ("device = torch.device('cpu')  # use cuda or cpu", "device"),
    ('device = "cpu"', "device"),
    ("DEVICE = torch.device(type='cpu')", "DEVICE"),
    ("dev = torch.device('cpu')", "dev"),
)

GPU_DEVICE = (
    ("device = torch.device('cuda')", "device"),
    ('device = "cuda:0"', "device"),
    ("DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')", "DEVICE"),
    ("dev = torch.device('cuda', 0)", "dev"),
)


def _shapes(name: str, devices: tuple[tuple[str, str], ...], silent: bool) -> list[Shape]:
    syncs = tuple(re.sub(r"\s*# expect: TL\d{3}", "", s) for s in SYNC) if silent else SYNC
    return [
        Shape(f"{name}/{dev}", {"main.py": PROGRAM}, {"devline": (line,), "dev": (dev,), "sync": syncs}, SELECT)
        for line, dev in devices
    ]


SHAPES = _shapes("cpu-device-placed", CPU_DEVICE, silent=True) + _shapes("gpu-device-placed", GPU_DEVICE, silent=False)


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_the_device_moved_to_decides_whether_host_reads_cost(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
