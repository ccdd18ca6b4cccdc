"""Family E: a helper that runs a whole evaluation is called once per split, not once per step.

`valid(loader)` with its own loop over the batches reads a value per batch inside that loop: the read is reported
there (TL201), once per batch. The call in the training loop runs the whole split once (after each epoch, or when
the loader's iterator runs out, `except StopIteration:`): reporting it as a sync on every step would count the same reads twice and at
the wrong rate. A near miss stays reported: a per-batch helper without a loop of its own, called on every step."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 12
SELECT = ("TL201", "TL207")

TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

device = torch.device("cuda")


def $valid(loader, model):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            out = model(x)
            $read


def $accuracy(out, y):
    return (out.argmax(1) == y).float().mean().item()


def main():
    model = nn.Linear(10, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True)
    valid_loader = DataLoader(valid_set, batch_size=64, num_workers=4, pin_memory=True)
    train_iter = iter(train_loader)
    for step in range($steps):
        model.train()
        try:
            x, y = next(train_iter)
        except StopIteration:
            train_iter = iter(train_loader)
            x, y = next(train_iter)
            $per_epoch
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        $per_step
"""

SLOTS = {
    "valid": ("valid", "evaluate", "run_validation"),
    "accuracy": ("accuracy", "batch_acc", "top1"),
    "read": (
        "total += (out.argmax(1) == y).float().mean().item()  # expect: TL201",
        "total += nn.functional.cross_entropy(out, y).item()  # expect: TL201",
    ),
    "steps": ("total_steps", "args.max_steps", "100000"),
    "per_step": ("pass", "history.append(loss.detach())"),
    "per_epoch": (
        "val_acc = $valid(valid_loader, model)",
        "print(epoch, $valid(valid_loader, model))",
        "scores.append($valid(valid_loader, model))",
    ),
}

PER_SPLIT = Shape("an evaluation helper called once per epoch", {"train.py": TRAIN}, SLOTS, SELECT)

PER_BATCH = Shape(
    "a per-batch helper without a loop of its own",
    {"train.py": TRAIN},
    {**SLOTS, "per_step": ("accs.append($accuracy(out, y))  # expect: TL207", "acc = $accuracy(out, y)  # expect: TL207")},
    SELECT,
)


@pytest.mark.parametrize("shape", [PER_SPLIT, PER_BATCH], ids=lambda s: s.name)
def test_every_spelling(shape: Shape) -> None:
    report = differing(shape, LIMIT)
    assert report is None, report
