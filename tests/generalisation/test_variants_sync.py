"""Family E (host-device syncs per step) written many ways: a sync in a training step is reported
whatever the names, the loop header, or where the loop, the model and the loader live."""

from __future__ import annotations

import pytest

from tests.generalisation import pools
from tests.generalisation.variants import Shape, check

SELECT = ("TL201", "TL202", "TL203", "TL204")

IMPORTS = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from tqdm import tqdm
"""

SETUP = """
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
criterion = nn.CrossEntropyLoss()
"""

STEP = """
$header
    $x, $y = $x.to(device), $y.to(device)
    $O.zero_grad()
    $loss = criterion($M($x), $y)
    $loss.backward()
    $O.step()
    $sync
"""

SYNC = (
    "running += $loss.item()  # expect: TL201",
    "history.append(float($loss))  # expect: TL202",
    "print('loss', $loss)  # expect: TL203",
    "if $loss < 0.01:  # expect: TL204\n    break",
)

BUILD = """
$model = $construct.to(device)
$loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)
"""

CONSTRUCT = (
    "Net()",
    "torchvision.models.resnet18(num_classes=10)",
    "nn.Sequential(nn.Flatten(), nn.Linear(784, 10))",
)

FRAMES = {
    "script": {
        "main.py": IMPORTS
        + "import torchvision\n"
        + pools.NET_CLASS
        + SETUP
        + BUILD
        + """
running, history = 0.0, []
for epoch in range(10):
    $step
""",
    },
    "function": {
        "main.py": IMPORTS
        + "import torchvision\n"
        + pools.NET_CLASS
        + SETUP
        + """

def train_epoch($model, $loader, $optimizer):
    running, history = 0.0, []
    $model.train()
    $step
    return running


def main():
"""
        + "    "
        + BUILD.strip().replace("\n", "\n    ")
        + """
    for epoch in range(10):
        train_epoch($model, $loader, $optimizer)


if __name__ == "__main__":
    main()
""",
    },
    "other_file": {
        "engine.py": IMPORTS
        + SETUP
        + """

def train_epoch($model, $loader, $optimizer):
    running, history = 0.0, []
    $model.train()
    $step
    return running
""",
        "main.py": IMPORTS
        + "import torchvision\nfrom engine import train_epoch\n"
        + pools.NET_CLASS
        + SETUP
        + BUILD
        + """
for epoch in range(10):
    train_epoch($model, $loader, $optimizer)
""",
    },
}

SHAPES = [
    Shape(
        name=f"sync-in-step/{frame}",
        files=files,
        slots={
            "step": (STEP,),
            "sync": SYNC,
            "header": pools.HEADER,
            "construct": CONSTRUCT,
            "model": pools.MODEL,
            "loader": pools.LOADER,
            "optimizer": pools.OPTIMIZER,
            "M": ("$model",),
            "O": ("$optimizer",),
            "x": pools.INPUT,
            "y": pools.TARGET,
            "loss": pools.LOSS,
        },
        select=SELECT,
    )
    for frame, files in FRAMES.items()
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_sync_in_a_step_is_found_however_written(shape: Shape) -> None:
    failures = [
        report for choice in shape.choices(limit=24) if (report := check(shape, choice))
    ]
    assert not failures, f"{len(failures)} of 24 variants differ; first:\n{failures[0]}"
