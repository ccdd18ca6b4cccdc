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
        ("out, _ = model(x.cuda())", []),  # one part of an unpacked result: perhaps a list of outputs
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


METRICS = """
import torch
import torch.nn.functional as F


def calc_psnr(a, b):
    return 10 * torch.log10(1.0 / F.mse_loss(a, b))


def count_positive(a):
    return len(torch.nonzero(a > 0))
"""

VALIDATE = """
import torch
from metrics import {helper}


def validate(model, loader):
    scores = []
    with torch.no_grad():
        for lr, hr in loader:
            sr = model(lr.cuda())
            for i in range(sr.size(0)):
                scores.append({helper}(sr[i], hr[i]).item())
    return scores
"""


@pytest.mark.parametrize(
    "helper, expected",
    [
        ("calc_psnr", [10]),  # a metric computed with torch, one image at a time
        ("count_positive", []),  # work of a different size per image: no batched form
    ],
)
def test_tl401_metric_imported_from_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper: str, expected: list[int]
) -> None:
    (tmp_path / "metrics.py").write_text(textwrap.dedent(METRICS).lstrip())
    (tmp_path / "validate.py").write_text(textwrap.dedent(VALIDATE).lstrip().replace("{helper}", helper))
    monkeypatch.chdir(tmp_path)
    results = lint_paths(["validate.py"], select=["TL401"])
    assert [f.line for r in results for f in r.findings] == expected
