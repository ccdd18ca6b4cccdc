"""Family A: a method of a class whose parameters the training code of another file fills with tensors
(`scorer = Scorer()`, then `scorer.score(model(x), y)`) loops over the samples of those tensors as a function
would: its parameters are batches. Near misses: the same method handed lists of tensors (feature levels,
per-image targets), or called on an object the caller's code does not show to be an instance of the class,
stays silent."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 24

METRICS = """
import torch
import torch.nn as nn


class $Scorer:
    def __init__(self):
        self.criterion = nn.MSELoss()

    def $score(self, $outputs, $targets):
        $body
"""

BODIES = (
    "total = 0\nfor o, t in zip($outputs, $targets):  # expect: TL401\n    total += self.criterion(o, t)\nreturn total",
    "losses = []\nfor o, t in zip($outputs, $targets):  # expect: TL401\n    losses.append(self.criterion(o, t))\nreturn torch.stack(losses).mean()",
    "return sum(self.criterion(o, t) for o, t in zip($outputs, $targets))  # expect: TL401",
)

TRAIN = """
import torch
import torch.nn as nn
from metrics import $Scorer

device = torch.device("cuda")
model = nn.Linear(8, 4).to(device)
$scorer = $Scorer()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    x = torch.randn(32, 8, device=device)
    y = torch.randn(32, 4, device=device)
    $call
    loss.backward()
    optimizer.step()
"""

NAMES = {
    "Scorer": ("Scorer", "Evaluator", "LossComputer"),
    "score": ("score", "evaluate", "compute"),
    "scorer": ("scorer", "ev", "metric"),
    "outputs": ("outputs", "preds", "out"),
    "targets": ("targets", "labels", "gt"),
    "body": BODIES,
}

TENSOR_CALLS = (
    "loss = $scorer.$score(model(x), y)",
    "out = model(x)\nloss = $scorer.$score(out, y)",
    "pred = torch.sigmoid(model(x))\nloss = $scorer.$score(pred, y)",
)

# near misses: lists of tensors handed in, or a receiver the caller does not show to be a `$Scorer`
NOT_TENSOR_CALLS = (
    "loss = $scorer.$score([model(x), model(2 * x)], [y, y])",
    "levels = [model(x), model(x * 2)]\nloss = $scorer.$score(levels, [y, y])",
    "other = make_scorer()\nloss = other.$score(model(x), y)",
)


def _shape(name: str, calls: tuple[str, ...], marked: bool) -> Shape:
    bodies = BODIES if marked else tuple(b.replace("  # expect: TL401", "") for b in BODIES)
    return Shape(
        name=name,
        files={"metrics.py": METRICS, "train.py": TRAIN},
        slots={**NAMES, "body": bodies, "call": calls},
        select=("TL401",),
    )


SHAPES = [
    _shape("method-given-tensors-by-another-file", TENSOR_CALLS, True),
    _shape("method-given-lists-or-unknown-receiver", NOT_TENSOR_CALLS, False),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_method_parameters_filled_with_tensors_by_another_file(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
