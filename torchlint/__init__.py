"""torchlint: find and fix the PyTorch code that makes training and inference slow.

Importing this package never imports torch; `optimize`, `explain` and `trace` load it on first use.
"""

from __future__ import annotations

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("torchlint")
except _metadata.PackageNotFoundError:  # running from a source checkout
    __version__ = "0.0.0+local"

from torchlint.lint.api import lint_paths, lint_source  # noqa: E402
from torchlint import trace  # noqa: E402  (a callable package; torch is imported when a trace starts)

__all__ = ["__version__", "lint_paths", "lint_source", "optimize", "explain", "trace"]


# The optimizer's own functions (their full signatures show in help()); importing them does not import torch.
from torchlint.optimizer import explain, optimize  # noqa: E402
