"""A tensor the code itself shows on an accelerator, for reads of every element in any loop."""

from __future__ import annotations

import libcst as cst
from semantic_probe import ask

from torchlint.semantic.model import SemanticModel
from torchlint.semantic.placed_values import shown_on_device


def _placed(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> bool:
    return shown_on_device(model.context, model.values, expr)


def test_a_placement_is_followed_through_ops_indexing_and_unpacking() -> None:
    source = """
import torch
device = torch.device("cuda")
def run(model, batch, flags):
    done = torch.Tensor(flags).to(device)
    probe(done)
    scores, labels = model(batch.to(device)).softmax(-1).max(-1)
    probe(scores)
    probe((scores > 0.5)[0])
    obs, mask = torch.zeros(4, device="cuda"), flags
    probe(obs)
    probe(torch.ones(3).cuda().view(-1).data)
"""
    assert ask(source, _placed) == ["True", "True", "True", "True", "True"]


def test_parameters_host_copies_unmoved_inputs_and_legacy_constructors_prove_nothing() -> None:
    source = """
import torch
device = torch.device("cuda")
def decode(pred, model, img, flags):
    probe(pred)
    probe(pred.squeeze(0) > 0.1)
    probe(model(img))
    probe(torch.softmax(model(img), dim=1)[0])
    probe(torch.FloatTensor(flags))
    probe(model(img.to(device)).cpu())
    probe(torch.zeros(3, device="cpu"))
    host = model(img.cuda())
    host = host.cpu()
    probe(host)
"""
    assert ask(source, _placed) == ["False"] * 8
