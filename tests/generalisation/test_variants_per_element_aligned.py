"""Family A: a loop over the rows of a device tensor (`range(labels.size(0))`, `range(len(x))`) reads back, one
row at a time, any device tensor its index walks, not only the one whose size bounds the range (`c[i].item()`,
`int(out[i].argmax())`). Near misses stay silent: rows of a tensor copied to the host before the loop, and a
Python list indexed by the loop."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 6  # name combinations for each loop

EVAL = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = nn.Linear(8, 4).to(device)
loader = DataLoader(list(range(10)), batch_size=4)


def evaluate():
    $hits = [0] * 4
    kept = []
    with torch.no_grad():
        for $x, $y in loader:
            $x, $y = $x.to(device), $y.to(device)
            $out = model($x)
            $pred = $out.argmax(1)
            $c = ($pred == $y).squeeze()
            $loop
    return $hits, kept


for epoch in range(10):
    evaluate()
"""

READS = (
    "for i in range($y.size(0)):  # expect: TL407\n    label = $y[i]\n    $hits[label] += $c[i].item()",
    "for i in range(len($y)):  # expect: TL407\n    $hits[0] += float($c[i])",
    "for j in range($x.shape[0]):  # expect: TL407\n    kept.append($out[j].argmax().item())",
    "for j in range($x.size(0)):  # expect: TL407\n    kept.append(int($pred[j].cpu()))",
)

NOT_READS = (
    # copied to the host once before the loop
    "host = $c.cpu()\nfor i in range($y.size(0)):\n    $hits[0] += host[i].item()",
    "scores = $out.cpu().numpy()\nfor j in range($x.size(0)):\n    kept.append(scores[j].argmax().item())",
    # a Python list walked beside the batch
    "sizes = [3, 4, 5, 6]\nfor j in range($x.size(0)):\n    kept.append(sizes[j] * 2)",
)

NAMES = {
    "hits": ("hits", "class_correct", "a"),
    "x": ("x", "images", "inputs"),
    "y": ("y", "labels", "targets"),
    "out": ("out", "outputs", "logits"),
    "pred": ("pred", "predicted", "p"),
    "c": ("c", "correct", "same"),
}

SHAPES = [
    Shape(name=f"{kind}/{number}", files={"evaluate.py": EVAL}, slots={**NAMES, "loop": (loop,)}, select=("TL407",))
    for kind, loops in (("reads", READS), ("host", NOT_READS))
    for number, loop in enumerate(loops)
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_rows_walked_by_the_index_are_read_back(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
