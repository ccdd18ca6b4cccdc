"""A rule's findings on a file do not depend on which other rules run (benchmarks/order_independence.py,
over files whose questions to the semantic model recurse), and the context answers a question about a node
the walk has not reached yet as it would once there."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import libcst as cst
import pytest

from torchlint.lint.engine import prepare_context
from torchlint.lint.source import decode_python

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "order_independence.py"
# Fixtures of a rule whose questions recurse (helpers called every step, through hot loops and values);
# the other rules' fixtures take longer, and the benchmark script covers them.
FIXTURES = ["TL207"]

HELPERS = """\
import torch


def accuracy_fn(y_true, y_pred):
    correct = torch.eq(y_true, y_pred).sum().item()
    return correct / len(y_pred) * 100
"""

# `x = x.to(device)` in a loop, helpers that call each other, a method that calls itself through `self`.
RECURSIVE = """\
import torch
from helpers import accuracy_fn


def train(model, loader, optimizer, device):
    model = model.to(device)
    for x, y in loader:
        x = x.to(device)
        y = y.to(device)
        x = x.float()
        loss = step(model, x, y)
        optimizer.step()
        log(loss)
        accuracy_fn(y, model(x).argmax(1))


def step(model, x, y):
    out = model(x)
    loss = ((out - y) ** 2).mean()
    loss.backward()
    return helper(loss, model, x)


def helper(loss, model, x):
    if x.dim() > 4:
        return step(model, x.flatten(1), x)
    return loss


def log(value):
    print(value.item())
    return other(value)


def other(value):
    return log(value) if value is None else value


def evaluate(model: torch.nn.Module, loader: torch.utils.data.DataLoader, loss_fn: torch.nn.Module):
    total = 0
    with torch.inference_mode():
        for X, y in loader:
            pred = model(X)
            total += loss_fn(pred, y)
            acc = accuracy_fn(y_true=y, y_pred=pred.argmax(dim=1))
    return total / len(loader), acc


class Net(torch.nn.Module):
    def forward(self, x):
        if x.dim() > 2:
            return self.forward(x.flatten(1))
        return self.run(x)

    def run(self, x):
        y = self.forward(x) if x is None else x
        return y.sum().item()


net = Net().to("cuda")
for batch in loader:
    batch = batch.to("cuda")
    out = net(batch)
    total = out.item()
"""


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("order_independence", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["order_independence"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("order_independence", None)


def test_recursive_shapes_give_the_same_findings_under_any_selection(harness, tmp_path):
    (tmp_path / "helpers.py").write_text(HELPERS)
    (tmp_path / "train.py").write_text(RECURSIVE)
    codes = harness.default_codes()
    runs = harness.findings_by_selection(str(tmp_path / "train.py"), codes)
    assert sum(len(found) for found in runs["ALL"].values()) >= 3  # the file gives the rules something to say
    for code in codes:
        assert runs[code].get(code, set()) == runs["ALL"].get(code, set()), code


@pytest.mark.parametrize("code", FIXTURES)
def test_fixtures_give_the_same_findings_alone_and_with_every_rule(harness, code):
    codes = harness.default_codes()
    for path in sorted((ROOT / "fixtures" / "lint" / code).glob("*.py")):
        assert harness.differences(str(path), codes) == [], path.name


def test_the_unused_noqa_check_is_left_out(harness):
    assert "TL001" not in harness.default_codes()


def test_the_held_out_split_is_never_linted(harness, tmp_path, capsys):
    held_out = sorted(harness.held_out_folders())
    assert held_out  # the lists are read
    folder = tmp_path / held_out[0]
    folder.mkdir()
    (folder / "a.py").write_text("x = 1\n")
    assert harness._files([str(folder)], set(held_out)) == []
    assert "held-out split folder, skipped" in capsys.readouterr().err


def test_a_node_the_walk_has_not_reached_has_its_enclosing_function():
    source = decode_python("a.py", b"def first():\n    return 1\n\n\ndef second(loss_fn):\n    return loss_fn(1)\n")
    context = prepare_context(source)
    first, second = context.module.body
    context.current = first  # the walk is in `first`; a rule asks about a call in `second`
    call = second.body.body[0].body[0].value
    assert isinstance(call, cst.Call)
    assert context.enclosing_function(call) is second
