"""Output formats: each module renders a run's results for one kind of reader."""

from __future__ import annotations

from typing import Callable

from torchlint.output.report import Report

# `text` is the older name of `concise`.
FORMATS = ("full", "concise", "text", "json", "sarif", "github")
DEFAULT_FORMAT = "full"


def renderer(name: str) -> Callable[[Report], str]:
    if name == "json":
        from torchlint.output.json_format import render
    elif name == "sarif":
        from torchlint.output.sarif import render
    elif name == "github":
        from torchlint.output.github import render
    elif name == "full":
        from torchlint.output.full import render
    else:
        from torchlint.output.text import render
    return render
