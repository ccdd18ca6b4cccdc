"""Family A: a loop over the first dimension of a value the function itself shows to be a tensor (`x.size(0)`,
`x.detach()`, `torch.exp(x)`) is a per-sample loop whatever made the value: a parameter of a helper no caller
in sight fills, what an unknown call returns. Near misses: the same loops over a value only `.shape` or `len()`
describe (a list or an array fits too), over one rebound to a list or moved with `.to()` alone (a module or a
batch object has it too), over the rows of a NumPy array the value was turned into before the loop, over a grid
of values a factory builds, pieces cut from a tensor or a copy on the host, loops that read the row beside
their own (a scan), and a beam search run image by image."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 24

HELPER = """
import torch
import torch.nn.functional as F
from elsewhere import fetch


def $helper($x, $w):
    $source
    $loop
"""

# where the tensor comes from, and what shows it is one
SOURCES = (
    "$x = $x.contiguous()",
    "$x = fetch($x).detach()",
    "$x = F.normalize($x, dim=-1)",
    "scale = torch.exp($x)",
)

LOOPS = (
    "out = []\nfor i in range($x.size(0)):  # expect: TL401\n    out.append(torch.softmax($x[i], 0) @ $w)\nreturn torch.stack(out)",
    "n = $x.shape[0]\ntotal = 0\nfor i in range(n):  # expect: TL401\n    total = total + F.mse_loss($x[i], $w[i])\nreturn total",
    "rows = []\nfor row in $x:  # expect: TL401\n    rows.append(F.normalize(row, dim=0) * $w)\nreturn torch.cat(rows)",
    "return torch.stack([torch.softmax($x[i], 0) for i in range(len($x))])  # expect: TL401",
    "out = []\nfor i, (a, b) in enumerate(zip($x, $w)):  # expect: TL401\n    out.append(torch.dot(a, b))\nreturn torch.stack(out)",
)

NAMES = {
    "helper": ("match_rows", "assign", "combine"),
    "x": ("scores", "feats", "q"),
    "w": ("weights", "proj", "k"),
}

# near misses: nothing shows a tensor, a list rebound, or a host array read where the loop runs
NOT_TENSOR_SOURCES = (
    "$x = fetch($x)",
    "$x = [fetch(v) for v in $x]",
    "$x = $x.detach().cpu().numpy()",
    "$x = fetch($x).to($w.device)",
)


# near misses however the loop reads the size: a grid of values a factory builds, pieces cut from a tensor,
# rows copied to the host first (PIL or NumPy work per image follows)
BUILT_OR_CUT_SOURCES = (
    "$x = $x.detach().cpu()",
    "$x = torch.linspace(0.0, 1.0, 11).to($w.device)",
    "$x = 2.0 ** torch.arange(8)",
    "$x = fetch($x).detach().chunk(2)",
)

# near misses: each row read beside the previous one (a scan along the dimension), or host rows in a comprehension
NEIGHBOUR_LOOPS = (
    "out = $x.clone()\nfor i in range(1, $x.size(0)):\n    out[i] += out[i - 1] * $w[i]\nreturn out",
    "steps = []\nfor i in range(1, $x.size(0)):\n    steps.append(torch.norm($x[i] - $x[i - 1]))\nreturn torch.stack(steps)",
)
HOST_ROWS = "$x = $x.detach().cpu().numpy()\nreturn sum($x[i] / $x.shape[0] for i in range($x.shape[0]))"


# near miss: each image decoded by a beam search of its own, whatever the decoder's name ends with
BEAM = """
import torch
import torch.nn as nn


class Captioner(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def $decoder(self, feat):
        return torch.softmax(self.proj(feat), -1)

    def sample(self, feats):
        seqs = []
        for k in range(feats.size(0)):
            seqs.append(self.$decoder(feats[k:k + 1]))
        return torch.cat(seqs)
"""


def _shape(name: str, sources: tuple[str, ...], marked: bool, loops: tuple[str, ...] = LOOPS) -> Shape:
    if not marked:
        loops = tuple(loop.replace("  # expect: TL401", "") for loop in loops)
    return Shape(name=name, files={"ops.py": HELPER}, slots={**NAMES, "source": sources, "loop": loops}, select=("TL401",))


def _by_shape(loops: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(loop.replace("$x.size(0)", "$x.shape[0]") for loop in loops)  # `x.size(0)` itself shows a tensor


SHAPES = [
    _shape("first-dimension-of-a-shown-tensor", SOURCES, True),
    _shape("first-dimension-of-a-list-or-array", NOT_TENSOR_SOURCES, False, _by_shape(LOOPS)),
    _shape("first-dimension-of-a-grid-pieces-or-host-copy", BUILT_OR_CUT_SOURCES, False),
    _shape("neighbouring-rows-or-host-rows", SOURCES, False, (*NEIGHBOUR_LOOPS, HOST_ROWS)),
    Shape(
        name="beam-search-per-image",
        files={"captioner.py": BEAM},
        slots={"decoder": ("old_beam_search", "beam_search", "_diverse_beam_search")},
        select=("TL401",),
    ),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_loops_over_the_first_dimension_of_a_shown_tensor(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
