"""TL5xx rules: memory."""

from __future__ import annotations

from torchlint.lint.api import lint_source

LOOP = """
import torch
import torch.nn as nn
criterion = nn.CrossEntropyLoss()
def train(model, train_loader, optimizer, device):
    for i, (x, y) in enumerate(train_loader):
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        {line}
"""


def _in_loop(line: str, code: str) -> list[str]:
    result = lint_source(LOOP.replace("{line}", line), select=[code])
    assert result.error is None and not result.notes, (result.error, result.notes)
    return [f.code for f in result.findings]


def test_empty_cache_every_step_is_reported_but_not_under_an_interval() -> None:
    assert _in_loop("torch.cuda.empty_cache()", "TL501") == ["TL501"]
    assert _in_loop("if i % 500 == 0: torch.cuda.empty_cache()", "TL501") == []


def test_moving_the_model_every_step_is_reported_but_not_a_dtype_cast_or_data() -> None:
    assert _in_loop("model.to(device)", "TL602") == ["TL602"]
    assert _in_loop("model.to(torch.float16)", "TL602") == []
    assert _in_loop("z = x.to(device)", "TL602") == []
