"""Family A: a range over the first size unpacked from a tensor's leading dimensions (`n, c = y.shape[:2]`,
`n, c = y.size()[:2]`, `b, _, _ = y.shape[0:3]`) walks its samples, as one over `y.size(0)` does. Near
misses: sizes unpacked from later dimensions (`c, h = y.shape[1:3]`), a strided slice of the sizes, or a
count named as time steps stay silent."""

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
        self.conv = nn.Conv2d(3, 8, 3)
        self.$head = nn.Linear(8, 4)

    def forward(self, x):
        $y = self.conv(x)
        $sizes
        $parts = []
        for $k in range($n):$mark
            $parts.append($work)
        return torch.stack($parts)


device = torch.device("cuda")
net = $Net().to(device)
for step in range(10):
    net(torch.randn(8, 3, 32, 32, device=device)).sum().backward()
"""

NAMES = {
    "Net": ("Net", "Model", "Encoder"),
    "head": ("head", "fc", "proj"),
    "y": ("y", "feats", "h"),
    "parts": ("parts", "outs", "pooled"),
    "k": ("k", "i", "idx"),
    "work": (
        "self.$head(F.adaptive_avg_pool2d($y[$k], 1).flatten())",
        "F.adaptive_avg_pool2d($y[$k], 1).flatten()",
        "self.$head($y[$k].mean((1, 2)))",
    ),
}

LEADING = (
    "$n, c = $y.shape[:2]",
    "$n, c = $y.size()[:2]",
    "$n, _, _ = $y.shape[0:3]",
    "$n, c, hh, ww = $y.shape",
)

NOT_LEADING = (
    "c, $n = $y.shape[1:3]",
    "$n, c = $y.shape[::2]",
)


def _shape(name: str, sizes: tuple[str, ...], counts: tuple[str, ...], mark: str) -> Shape:
    return Shape(
        name=name,
        files={"main.py": PROGRAM},
        slots={**NAMES, "sizes": sizes, "n": counts, "mark": (mark,)},
        select=("TL401",),
    )


SHAPES = [
    _shape("range-over-leading-size", LEADING, ("n", "bs", "num"), "  # expect: TL401"),
    _shape("range-over-later-size", NOT_LEADING, ("n", "num", "m"), ""),  # a name saying "batch size" is evidence alone
    _shape("range-over-time-steps", LEADING, ("T", "n_steps", "seq_len"), ""),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_range_over_sizes_unpacked_from_leading_dimensions(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
