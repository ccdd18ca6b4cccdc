"""What an expression evaluates to: a device tensor, a host value, or unknown."""

from __future__ import annotations

import libcst as cst
from semantic_probe import ask

from torchlint.semantic.model import SemanticModel


def _kind(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> str:
    return model.values.kind(expr)


def test_a_name_whose_backward_runs_is_a_tensor() -> None:
    source = """
def step(trainer, x):
    loss = trainer(x).mean()
    probe(loss)
    loss.backward()
    other = trainer(x).mean()
    probe(other)
"""
    assert ask(source, _kind) == ["tensor", "unknown"]


def test_a_binding_in_the_other_branch_does_not_reach_the_use() -> None:
    source = """
import torch
def predict(x):
    scores = torch.relu(x.cuda())
    if isinstance(scores, list):
        scores = [s.tolist() for s in scores]
    else:
        probe(scores)
    probe(scores)
"""
    assert ask(source, _kind) == ["tensor", "unknown"]


def test_the_legacy_tensor_constructor_builds_on_the_host() -> None:
    source = """
import torch
probe(torch.Tensor([1.0, 2.0]).unsqueeze(0))
probe(torch.ones(3, device="cuda").unsqueeze(0))
"""
    assert ask(source, _kind) == ["cpu", "tensor"]
