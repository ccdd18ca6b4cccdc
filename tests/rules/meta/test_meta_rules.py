"""TL0xx rules: suppressions."""

from __future__ import annotations

from torchlint.lint.api import lint_source

SOURCE = """import torch
from torch.utils.data import DataLoader

loader = DataLoader(dataset)  # noqa: TL101
x = torch.zeros(3)  # noqa: TL101
"""


def test_a_directive_that_silences_nothing_is_reported_and_the_fix_removes_it() -> None:
    result = lint_source(SOURCE, "script.py", select=["TL001", "TL101"])
    assert [(f.line, f.code) for f in result.findings] == [(5, "TL001")]
    fixed = lint_source(SOURCE, "script.py", select=["TL001", "TL101"], fix=True)
    assert fixed.fixed_text is not None
    assert fixed.fixed_text.splitlines()[4] == "x = torch.zeros(3)"
    assert "# noqa: TL101" in fixed.fixed_text.splitlines()[3]
