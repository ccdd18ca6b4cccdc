"""TL401 on a function whose batch comes from the training code of another project file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchlint.lint.api import lint_paths

LOSSES = """
import torch.nn.functional as F


def sample_loss(pred, target):
    loss = 0
    for i in range(len(pred)):
        loss = loss + F.mse_loss(pred[i], target[i])
    return loss / len(pred)
"""

TRAIN = """
from losses import sample_loss


def main(model, loader, opt):
    for x, y in loader:
        {prediction}
        loss = sample_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.mark.parametrize(
    "prediction, expected",
    [
        ("out = model(x.cuda())", [6]),  # a module's output: a batch, one row per sample
        ("out = [model(x), model(x.flip(0))]", []),  # a list of outputs: not one batch
    ],
)
def test_tl401_parameter_that_another_file_passes_a_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prediction: str, expected: list[int]
) -> None:
    (tmp_path / "losses.py").write_text(textwrap.dedent(LOSSES).lstrip())
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN).lstrip().replace("{prediction}", prediction))
    monkeypatch.chdir(tmp_path)
    results = lint_paths(["losses.py", "train.py"], select=["TL401"])
    lines = [f.line for r in results if r.path.endswith("losses.py") for f in r.findings]
    assert lines == expected
