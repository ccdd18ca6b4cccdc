"""Family A: what a helper function returns is a batch when every one of its returns is what a module or a
torch op computes on a batch (`return F.normalize(model(x), dim=1)`), whether the helper is in this file or
another; a loop over its rows that runs a module per row is per-sample. Near misses: a helper returning a
tuple, a stack of several values or a list stays silent."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 24

FEATURES = """
import torch
import torch.nn.functional as F


def $embed(model, x):
    $returned
"""

MAIN = """
import torch
import torch.nn as nn
import features
from features import $embed

device = torch.device("cuda")
model = nn.Linear(8, 4).to(device)
$head = nn.Linear(4, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    x = torch.randn(32, 8, device=device)
    $e = $call
    $outs = []
    $loop$mark
        $outs.append($head($row))
    torch.stack($outs).sum().backward()
    optimizer.step()
"""

NAMES = {
    "embed": ("embed", "features_of", "encode"),
    "head": ("head", "classifier", "proj"),
    "e": ("e", "emb", "z"),
    "outs": ("outs", "scores", "logits"),
    "call": ("$embed(model, x)", "features.$embed(model, x)"),
}

BATCH_RETURNS = (
    "return F.normalize(model(x), dim=1)",
    "return torch.relu(model(x))",
    "out = model(x)\nreturn torch.tanh(out)",
    "return model(x).detach()",
)

NOT_BATCH_RETURNS = (
    "return model(x), x",
    "return torch.stack([model(x), model(2 * x)])",
    "return [model(x), model(2 * x)]",
)

def _shape(name: str, returns: tuple[str, ...], mark: str) -> Shape:
    return Shape(
        name=name,
        files={"main.py": MAIN, "features.py": FEATURES},
        slots={**NAMES, "returned": returns, "loop": ("for $row in $e:",), "row": ("row", "vec", "item"), "mark": (mark,)},
        select=("TL401",),
    )


SHAPES = [
    _shape("helper-returns-a-batch", BATCH_RETURNS, "  # expect: TL401"),
    _shape("helper-returns-several-values", NOT_BATCH_RETURNS, ""),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_rows_of_what_a_helper_returns(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
