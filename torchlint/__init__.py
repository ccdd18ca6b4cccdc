"""torchlint: find and fix the PyTorch code that makes training and inference slow.

Importing this package never imports torch; `optimize`, `explain` and `trace` load it on first use.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from typing import Any

try:
    __version__ = _metadata.version("torchlint")
except _metadata.PackageNotFoundError:  # running from a source checkout
    __version__ = "0.0.0+local"

from torchlint.lint.api import lint_paths, lint_source  # noqa: E402
from torchlint import trace  # noqa: E402  (a callable package; torch is imported when a trace starts)

__all__ = ["__version__", "lint_paths", "lint_source", "optimize", "explain", "trace"]


def optimize(model: Any, example_inputs: Any = None, **options: Any) -> Any:
    """Return a faster copy of `model` that computes the same thing (see `torchlint.optimizer.optimize`)."""
    from torchlint.optimizer import optimize as _optimize

    return _optimize(model, example_inputs, **options)


def explain(model: Any) -> Any:
    """Return the report of what `optimize` did to `model` (see `torchlint.optimizer.explain`)."""
    from torchlint.optimizer import explain as _explain

    return _explain(model)
