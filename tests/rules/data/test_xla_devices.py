"""TL102 and TL103 are about CUDA's page-locked memory: a program whose device comes from torch_xla (a TPU) copies
through XLA, where pinning does nothing, so neither rule speaks; the same program on a CUDA device is reported."""

from __future__ import annotations

import pytest

from lint_testing import found

PROGRAM = """
import torch
{imports}
from torch.utils.data import DataLoader

device = {device}
model = torch.nn.Linear(10, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(dataset, batch_size=64, num_workers=4, shuffle=True{pin})

for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

XLA_DEVICES = [
    ("import torch_xla.core.xla_model as xm", "xm.xla_device()"),
    ("from torch_xla.core import xla_model as xm", "xm.xla_device()"),
    ("import torch_xla", "torch_xla.device()"),
    ("from torch_xla.core.xla_model import xla_device", "xla_device()"),
]


@pytest.mark.parametrize("imports, device", XLA_DEVICES)
@pytest.mark.parametrize("pin", ["", ", pin_memory=True"])
def test_loaders_feeding_an_xla_device_are_not_reported(imports: str, device: str, pin: str) -> None:
    code = PROGRAM.format(imports=imports, device=device, pin=pin)
    assert found(code, ["TL102", "TL103"]) == []


@pytest.mark.parametrize("device", ['torch.device("cuda")', '"cuda:0"', 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'])
@pytest.mark.parametrize("pin, rule", [("", "TL102"), (", pin_memory=True", "TL103")])
def test_the_same_loaders_feeding_a_cuda_device_are_reported(device: str, pin: str, rule: str) -> None:
    code = PROGRAM.format(imports="import torch_xla.core.xla_model as xm", device=device, pin=pin)
    assert {code for _, code in found(code, ["TL102", "TL103"])} == {rule}
