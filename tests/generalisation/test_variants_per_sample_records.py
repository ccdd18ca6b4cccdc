"""Family A: a loop over `range(len(x))` whose body reads `x[i]` by key (`x[i]["x"]`) walks a list of records (the
outputs of the layers of a detector, one dict each), not the rows of a tensor, whatever says `x` is a batch: a
tensor takes no string index. The same loop reading `x[i]` as a row stays a per-sample loop."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 24

PROGRAM = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def $merge($x):
    outs = []
    for i in range($size):$mark
        $body
    return torch.stack(outs)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(128, 10).to(device)
loader = DataLoader(TensorDataset(torch.randn(512, 128), torch.randint(0, 10, (512,))), batch_size=64, num_workers=4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy($merge(model(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

RECORD_SIZES = ("len($x)",)
ROW_SIZES = ("len($x)", "$x.size(0)", "$x.shape[0]")

RECORD_BODIES = (
    "outs.append(torch.sigmoid($x[i]['x']))",
    "pred = $x[i][\"x\"]\nouts.append(torch.sigmoid(pred) * 2)",
    "outs.append(F.softmax($x[i]['feat'], -1) * $x[i]['scale'])",
)

ROW_BODIES = (
    "outs.append(torch.sigmoid($x[i]))",
    "pred = $x[i]\nouts.append(torch.sigmoid(pred) * 2)",
    "outs.append(F.softmax($x[i], -1) * 3)",
)

NAMES = {
    "merge": ("get_all_boxes", "merge_levels", "collect"),
    "x": ("output", "outputs", "out"),
}


def _shape(name: str, sizes: tuple[str, ...], bodies: tuple[str, ...], marked: bool) -> Shape:
    mark = ("  # expect: TL401",) if marked else ("",)
    return Shape(
        name=name,
        files={"main.py": PROGRAM},
        slots={**NAMES, "size": sizes, "body": bodies, "mark": mark},
        select=("TL401",),
    )


SHAPES = [
    _shape("records-read-by-key", RECORD_SIZES, RECORD_BODIES, False),
    _shape("rows-of-a-batch", ROW_SIZES, ROW_BODIES, True),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_records_read_by_key_are_not_samples(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
