"""Family A: an object handed to a function by its callers is what they pass. `validate(agent, states)` whose
every caller passes an instance of the project class `Agent` calls `Agent.evaluate` on `agent.evaluate(s)`;
a loop that runs that method, which makes its argument a batch of one for the network, on each element is
per-sample. Near misses stay silent: callers passing instances of two different classes, a method that
takes the whole batch, and an argument that is not built from a project class."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 8

AGENT = """
import torch
import torch.nn as nn


class $Agent:
    def __init__(self, n_actions):
        self.net = nn.Linear(4, n_actions).cuda()

    def $evaluate(self, state):
        with torch.no_grad():
            return self.net($batched).max(1)[0].item()


class Other:
    def $evaluate(self, state):
        return 0.0
"""

CHECKS = """
import torch


def $validate(args, $agent, $states):
    $qs = []
    for $s in $states:$mark
        $qs.append($agent.$evaluate($s))
    return sum($qs) / len($qs)
"""

MAIN = """
import torch
from agent import $Agent, Other
from checks import $validate

$agent = $Agent(2)
$other
$states = [torch.randn(4).cuda() for _ in range(500)]
for step in range(10000):
    if step % 1000 == 0:
        $call
"""

NAMES = {
    "Agent": ("Agent", "DQN", "Learner"),
    "evaluate": ("evaluate_q", "value_of", "score"),
    "validate": ("validate", "test", "check_q"),
    "agent": ("agent", "dqn", "learner"),
    "states": ("states", "val_mem", "memory"),
    "s": ("s", "state", "x"),
    "qs": ("qs", "values", "t_qs"),
}

ONE_CLASS = (
    "$validate(None, $agent, $states)",
    "$validate(None, $agent=$agent, $states=$states)",
    "$validate(None, $agent, $states)\n$validate(None, $agent, $states[:10])",
)


def _shape(name: str, batched: tuple[str, ...], other: tuple[str, ...], calls: tuple[str, ...], mark: str) -> Shape:
    return Shape(
        name=name,
        files={"agent.py": AGENT, "checks.py": CHECKS, "main.py": MAIN},
        slots={**NAMES, "batched": batched, "other": other, "call": calls, "mark": (mark,)},
        select=("TL401",),
    )


SHAPES = [
    _shape("passed-instance", ("state.unsqueeze(0)", "state[None]", "state.view(1, -1)"), ("",), ONE_CLASS,
           "  # expect: TL401"),
    # two classes passed by different callers: which method runs is not known
    _shape("two-classes", ("state.unsqueeze(0)",), ("other = Other()",),
           ("$validate(None, $agent, $states)\n$validate(None, other, $states)",), ""),
    # the method takes the whole batch: no batch of one made
    _shape("whole-batch", ("state",), ("",), ONE_CLASS, ""),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_methods_of_instances_the_callers_pass(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
