"""Family A: the per-sample work of a loop hidden in a helper of another project file, reached by name
(`from utils import predict`), through its module (`utils.predict`), or as the method of an instance of a
project class bound once (`agent = Agent(net)`, then `agent.evaluate(x)`). A helper that runs the model on
its parameter made a batch of one shows that the loop walks samples; one that only loads, or that runs the
model on what it is given as it is (a batch), does not."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 24

HELPERS = """
import torch


def $predict(model, sample):
    with torch.no_grad():
        return model($one).argmax(1)


def run_as_given(model, batch):
    with torch.no_grad():
        return model(batch).argmax(1)


def read(path):
    return torch.load(path)


class $Agent:
    def __init__(self, net):
        self.net = net

    def $predict(self, sample):
        with torch.no_grad():
            return self.net($one).max(1)[0]

    def run_as_given(self, batch):
        with torch.no_grad():
            return self.net(batch).max(1)[0]
"""

MAIN = """
import torch
import torch.nn as nn
import helpers
from helpers import $Agent, $predict, run_as_given, read

device = torch.device("cuda")
$model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10)).to(device)
$agent = $Agent($model)


def $evaluate($items):
    $results = []
    for $x in $items:$mark
        $results.append($call)
    return $results


for epoch in range(10):
    $evaluate(load_items())
"""

NAMES = {
    "predict": ("predict", "infer_one", "classify", "q_value"),
    "Agent": ("Agent", "Predictor", "Runner"),
    "model": ("model", "net", "policy"),
    "agent": ("agent", "predictor", "dqn"),
    "evaluate": ("evaluate", "validate", "score_all"),
    "items": ("items", "states", "test_set", "memory"),
    "results": ("results", "preds", "values"),
    "x": ("x", "state", "image", "sample"),
    "one": ("sample.unsqueeze(0)", "sample[None]", "sample.view(1, -1)", "torch.unsqueeze(sample, 0)"),
}

PER_SAMPLE_CALLS = (
    "$predict($model, $x)",
    "helpers.$predict($model, $x)",
    "$predict($model, $x.to(device))",
    "$agent.$predict($x)",
    "$agent.$predict($x.to(device))",
)

# near misses: the helper loads what it is given, or runs the model on it as it is (each element a batch)
NOT_SAMPLE_CALLS = (
    "read($x)",
    "helpers.read($x)",
    "run_as_given($model, $x)",
    "helpers.run_as_given($model, $x)",
    "$agent.run_as_given($x)",
)


def _shape(name: str, calls: tuple[str, ...], mark: str) -> Shape:
    return Shape(
        name=name,
        files={"main.py": MAIN, "helpers.py": HELPERS},
        slots={**NAMES, "call": calls, "mark": (mark,)},
        select=("TL401",),
    )


SHAPES = [
    _shape("helper-of-another-file-runs-one-sample", PER_SAMPLE_CALLS, "  # expect: TL401"),
    _shape("helper-of-another-file-takes-a-batch-or-a-path", NOT_SAMPLE_CALLS, ""),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_per_sample_work_in_a_helper_of_another_file(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
