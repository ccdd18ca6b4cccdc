"""Loops whose number of trips is written in the code."""

from __future__ import annotations

import libcst as cst
from semantic_probe import ask

from torchlint.semantic.dataset_items import in_per_item_method
from torchlint.semantic.model import SemanticModel
from torchlint.semantic.trip_counts import few_by_nature, literal_trips


def _trips(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> object:
    loop = next(a for a in model.context.ancestors(call) if isinstance(a, (cst.For, cst.While)))
    return literal_trips(model.context, loop)


def test_counts_written_in_the_code() -> None:
    source = """
n = 10
for i in range(1, n + 1):
    probe()
for i in range(0, 10, 3):
    probe()
for i, net in enumerate((G, D)):
    probe()
for x in [a, b, c]:
    probe()
for i in range(5, 2):
    probe()
"""
    assert ask(source, _trips) == ["10", "4", "2", "3", "0"]


def test_counts_not_written_in_the_code() -> None:
    source = """
for i in range(num_steps):
    probe()
for x, y in loader:
    probe()
while True:
    probe()
for i in range(0, 10, step):
    probe()
for i in range(10, 0, -1):
    probe()
"""
    assert ask(source, _trips) == ["None"] * 5


def test_names_bound_only_to_short_literals() -> None:
    source = """
class Anchors:
    def __init__(self, levels=None):
        self.levels = [3, 4, 5, 6, 7]
        if levels is None:
            levels = [1, 2]
        for level in levels:
            probe()
        for level in self.levels:
            probe()
        for level in self.sizes:
            probe()

def grow(widths):
    for w in widths:
        probe()
    widths = [1, 2, 3]
"""
    # `self.sizes` is never assigned a literal; `widths` is a parameter without a None default
    assert ask(source, _trips) == ["2", "5", "None", "None"]


def test_per_item_methods_of_a_dataset() -> None:
    source = """
from torch.utils.data import Dataset

class Boxes(Dataset):
    def __init__(self, files):
        probe()
        self.items = self.load(files)

    def load(self, files):
        probe()

    def __getitem__(self, i):
        probe()
        return self.parse(i)

    def parse(self, i):
        probe()

class Plain:
    def __getitem__(self, i):
        probe()
"""
    answer = lambda model, call, expr: in_per_item_method(model.context, call)  # noqa: E731
    assert ask(source, answer) == ["False", "False", "True", "True", "False"]


def _few(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> object:
    loop = next(a for a in model.context.ancestors(call) if isinstance(a, (cst.For, cst.While)))
    return few_by_nature(model.context, loop)


def test_few_by_what_the_loop_walks() -> None:
    source = """
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        for conv in self.convs:
            probe()
        for i, (head, level) in enumerate(zip(self.heads, self.levels)):
            probe()
        modules = self.blocks[1:]
        for i in range(len(modules)):
            probe()
        for i in range(1, len(self.device_id)):
            probe()
        for row in x:
            probe()

class Trainer:
    def run(self):
        for batch in self.loader:
            probe()

for gpu in gpu_ids:
    probe()
for x, y in loader:
    probe()
"""
    assert ask(source, _few) == ["True", "True", "True", "True", "False", "False", "True", "False"]
