"""remove_dropout: Dropout modules, F.dropout(training=False) and Identity go; active dropout stays."""

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from optimizer_helpers import count_modules, run_pass  # noqa: E402
from torch import nn  # noqa: E402

from torchlint.optimizer.passes.dropout import remove_dropout  # noqa: E402


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.5)
        self.drop2d = nn.Dropout2d(0.3)
        self.alpha = nn.AlphaDropout(0.2)
        self.identity = nn.Identity()

    def forward(self, x):
        x = self.identity(self.drop(self.fc(x)))
        x = F.dropout(x, 0.5, self.training)  # traced as a constant False in eval mode
        x = F.dropout(x, 0.1, training=False)
        return self.alpha(x) + F.dropout(x, 0.2)  # the last one defaults to training=True: active even in eval


def test_eval_dropouts_and_identity_removed():
    model = Mixed().eval()
    x = torch.randn(4, 8)
    gm, report = run_pass(remove_dropout, model)
    assert count_modules(gm, (nn.Dropout, nn.AlphaDropout, nn.Identity)) == 0
    targets = [n.target for n in gm.graph.nodes]
    assert targets.count(F.dropout) == 1  # only the active one is left
    assert len(report.rewrites) == 5
    torch.manual_seed(0)
    expected = model(x)
    torch.manual_seed(0)
    assert torch.allclose(expected, gm(x))


def test_user_dropout_subclass_keeps_its_own_work():
    class NoisyDropout(nn.Dropout):
        def forward(self, x):
            return super().forward(x) + 1

    model = nn.Sequential(nn.Linear(4, 4), NoisyDropout()).eval()
    gm, report = run_pass(remove_dropout, model)
    x = torch.randn(2, 4)
    assert torch.allclose(model(x), gm(x))  # fx traced into the subclass: only its inner dropout went
