"""Family A: a comprehension over the samples of a batch whose results are collected through `list(...)` or
`tuple(...)` before `torch.stack`/`torch.cat`/`sum` (directly, or bound to a name stacked later) is the same
per-sample loop as the bare comprehension. Near misses: the same wrappers around a walk over layers, or around
results that are never combined, stay silent."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 24

PROGRAM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class $Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.$head = nn.Linear(16, 4)
        self.layers = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])

    def forward(self, $x):
        $body
        return $out


device = torch.device("cuda")
model = $Net().to(device)
for step in range(100):
    model(torch.randn(32, 16, device=device)).sum().backward()
"""

NAMES = {
    "Net": ("Net", "Model", "Classifier"),
    "head": ("head", "fc", "proj"),
    "x": ("x", "inputs", "feats"),
    "out": ("out", "result", "y"),
    "wrap": ("list", "tuple"),
    "combine": ("torch.stack", "torch.cat", "sum"),
    "one": ("self.$head($x[i:i + 1])", "self.$head($x[i].unsqueeze(0))", "F.relu(self.$head($x[i:i + 1]))"),
}

PER_SAMPLE = (
    "$out = $combine($wrap($one for i in range($x.size(0))))  # expect: TL401",
    "$out = $combine($wrap($one for i in range(len($x))))  # expect: TL401",
    "$out = $combine($wrap([$one for i in range($x.shape[0])]))  # expect: TL401",
    "parts = $wrap($one for i in range($x.size(0)))  # expect: TL401\n$out = $combine(parts)",
)

# near misses: layers walked in turn, results kept as a list nobody stacks
NOT_PER_SAMPLE = (
    "$out = $combine($wrap(layer($x) for layer in self.layers))",
    "$out = $wrap($one for i in range($x.size(0)))",
    "parts = $wrap($one for i in range($x.size(0)))\n$out = parts",
)


def _shape(name: str, bodies: tuple[str, ...]) -> Shape:
    return Shape(name=name, files={"main.py": PROGRAM}, slots={**NAMES, "body": bodies}, select=("TL401",))


SHAPES = [_shape("wrapped-comprehension-per-sample", PER_SAMPLE), _shape("wrapped-comprehension-near-miss", NOT_PER_SAMPLE)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_comprehensions_collected_through_list_or_tuple(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
