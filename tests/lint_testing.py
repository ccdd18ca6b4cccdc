"""Constants and small helpers shared by the linter's tests."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LOADER_ZERO = "from torch.utils.data import DataLoader\n\nloader = DataLoader(ds, batch_size=8)\n"
CLEAN = "import torch\n\nx = torch.zeros(3)\n"


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path
