"""inplace_activations: only where nothing else can see the overwritten tensor, and autograd allows it."""

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from optimizer_helpers import run_pass  # noqa: E402
from torch import nn  # noqa: E402

from torchlint.optimizer.passes.inplace import inplace_activations  # noqa: E402

ACTIVATIONS = [nn.ReLU(), nn.ReLU6(), nn.LeakyReLU(0.1), nn.Hardtanh(-2, 2), nn.ELU(), nn.SiLU(), nn.Hardswish(),
               nn.Mish(), nn.SELU(), nn.Hardsigmoid()]


def _inplace_calls(gm):
    return [n for n in gm.graph.nodes if n.kwargs.get("inplace") is True]


@pytest.mark.parametrize("act", ACTIVATIONS, ids=lambda a: type(a).__name__)
def test_each_activation_in_place_in_eval(act):
    model = nn.Sequential(nn.Linear(8, 8), act, nn.Linear(8, 4)).eval()
    x = torch.randn(3, 8)
    gm, report = run_pass(inplace_activations, model)
    assert len(_inplace_calls(gm)) == 1 and len(report.rewrites) == 1
    with torch.no_grad():
        assert torch.allclose(model(x), gm(x), atol=1e-6)


class Uses(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        a = F.relu(x)  # graph input: the caller's tensor
        b = torch.relu(y)  # y is used again below
        c = F.silu(self.fc.weight)  # a parameter
        v = y.view(-1)
        d = F.relu(v)  # a view: y aliases it
        return a, b + y, c, d


def test_inputs_used_elsewhere_inputs_params_and_views_not_in_place():
    model = Uses().eval()
    x = torch.randn(2, 8)
    gm, report = run_pass(inplace_activations, model)
    assert not _inplace_calls(gm) and not report.rewrites
    assert len(report.skipped) == 4
    x_before = x.clone()
    with torch.no_grad():
        for expected, got in zip(model(x), gm(x)):
            assert torch.allclose(expected, got)
    assert torch.equal(x, x_before)


def test_training_only_where_autograd_allows():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 8), nn.Sigmoid(),
                          nn.ReLU()).train()
    gm, report = run_pass(inplace_activations, model)
    # ReLU after Linear: yes. SiLU needs its input for backward: no. ReLU after Sigmoid (saves its output): no.
    assert len(_inplace_calls(gm)) == 1
    assert any("autograd needs its input" in e.detail for e in report.skipped)
    x = torch.randn(4, 8, requires_grad=True)
    torch.manual_seed(0)
    gm(x).sum().backward()
    grad = x.grad.clone()
    x.grad = None
    model(x).sum().backward()
    assert torch.allclose(grad, x.grad, atol=1e-6)
