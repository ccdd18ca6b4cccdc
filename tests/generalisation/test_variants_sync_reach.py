"""Family E: a sync is reported where the step runs, however far the code is from the loop that shows it.

An `if it % n_critic == 0:` that runs a one-step training function (a GAN's generator step) is a step, not a
logging interval: a read in it runs once per generator step. A layer's module two imports away from the GPU
training script (`layers.py`, imported by `model.py`, imported by `train.py`) runs on that device. Near misses
stay silent: a logging interval that trains nothing, and the same layers under a script that stays on the CPU."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 8
SELECT = ("TL201", "TL202")

GAN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

device = torch.device("cuda")
G = nn.Sequential(nn.Linear(100, 784), nn.Tanh()).to(device)
D = nn.Sequential(nn.Linear(784, 1)).to(device)
g_opt = torch.optim.Adam(G.parameters(), lr=2e-4)
d_opt = torch.optim.Adam(D.parameters(), lr=2e-4)
loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)


def $train_d(real):
    fake = G(torch.randn(real.size(0), 100, device=device)).detach()
    loss = D(fake).mean() - D(real).mean()
    d_opt.zero_grad()
    loss.backward()
    d_opt.step()
    return loss


def $train_g():
    loss = -D(G(torch.randn(64, 100, device=device))).mean()
    g_opt.zero_grad()
    loss.backward()
    g_opt.step()
    return loss


history = []
$counter = 0
for epoch in range(100):
    for real in loader:
        real = real.to(device, non_blocking=True).view(-1, 784)
        d_loss = $train_d(real)
        $counter += 1
        if $counter % $every == 0:
            $body
"""

GAN_SLOTS = {
    "train_d": ("train_D", "critic_step", "update_discriminator"),
    "train_g": ("train_G", "generator_step", "update_generator"),
    "counter": ("it_d", "step", "iteration"),
    "every": ("n_critic", "args.n_d", "5"),
}

TRAINS = (
    "g_loss = $train_g()\nhistory.append(g_loss.item())  # expect: TL201",
    "g_loss = $train_g()\nhistory.append(float(g_loss))  # expect: TL202",
    "history.append($train_g().item())  # expect: TL201",
)

LOGS = (
    "history.append(d_loss.item())",
    "print(float(d_loss))",
)

LAYER = '''
import torch
import torch.nn as nn


class $Layer(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(channels))
        self.register_buffer("$flag", torch.tensor(0, dtype=torch.uint8))

    def forward(self, x):
        if self.$flag.item() == 0:  $expect
            self.scale.data.copy_(1 / (x.std() + 1e-6))
            self.$flag.fill_(1)
        return x * self.scale
'''

MODEL = '''
import torch.nn as nn
from layers import $Layer


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(784, 256), $Layer(256), nn.Linear(256, 10))

    def forward(self, x):
        return self.body(x)
'''

TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from model import Net

$device_line
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

# the same script with nothing placed on a device: it trains on the CPU
TRAIN_ON_CPU = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from model import Net

model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4)
for epoch in range(10):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

LAYER_SLOTS = {"Layer": ("ActNorm", "ScaleNorm", "DataInitScale"), "flag": ("initialized", "ready", "inited")}

GPU = ('device = torch.device("cuda")', 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")')


def _layer_shape(name: str, train: str, expect: str) -> Shape:
    return Shape(
        name,
        {"layers.py": LAYER, "model.py": MODEL, "train.py": train},
        {**LAYER_SLOTS, "device_line": GPU, "expect": (expect,)},
        SELECT,
    )


SHAPES = [
    Shape("step-under-interval", {"main.py": GAN}, {**GAN_SLOTS, "body": TRAINS}, SELECT),
    Shape("log-under-interval", {"main.py": GAN}, {**GAN_SLOTS, "body": LOGS}, SELECT),
    _layer_shape("layer-two-imports-from-gpu-script", TRAIN, "# expect: TL201"),
    _layer_shape("layer-two-imports-from-cpu-script", TRAIN_ON_CPU, ""),
]


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_syncs_are_reported_where_the_step_runs(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
