"""`torchlint.trace()`: run training or evaluation code under observation and report, at the lines of the
user's source, what the linter suspects (confirmed or not) and what it missed.

    with torchlint.trace(steps=20) as t:
        train()
    print(t.report)

Importing this package does not import torch; starting a trace does.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Optional, Sequence


def trace(steps: int = 0, roots: Optional[Sequence[str]] = None, lint: bool = True) -> Any:
    """A context manager that traces the code inside it; `.report` holds the report once it exits.

    steps: stop the code (cleanly, at a step boundary) after this many steps; 0 lets it run to the end.
    roots: folders that hold the user's code (default: the working directory); frames elsewhere are libraries.
    lint: also run the linter on the user's files that ran, to merge its findings with the trace's.
    """
    from torchlint.trace.tracer import Tracer

    return Tracer(steps=steps, roots=roots, lint=lint)


class _CallableModule(types.ModuleType):
    """Lets `torchlint.trace(...)` work although `torchlint.trace` is this package."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return trace(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["trace"]
