"""Constants and small helpers shared by the linter's tests."""

from __future__ import annotations

import textwrap
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


def lint(code: str, rule: str | list[str], path: str = "example.py", **kwargs):  # noqa: ANN201
    """Lint dedented `code` with one rule (or several); the file must lint cleanly (no error, no note)."""
    from torchlint.lint.api import lint_source

    select = [rule] if isinstance(rule, str) else rule
    result = lint_source(textwrap.dedent(code), path, select=select, **kwargs)
    assert result.error is None, result.error
    assert not result.notes, result.notes
    return result


def lines(code: str, rule: str, path: str = "example.py") -> list[int]:
    return [f.line for f in lint(code, rule, path).findings if f.code == rule]


def found(code: str, select: list[str], path: str = "example.py") -> list[tuple[int, str]]:
    """(line, code) of every finding of the selected rules, in report order."""
    return [(f.line, f.code) for f in lint(code, select, path).findings]


def fixed(code: str, rule: str, unsafe: bool = True) -> str:
    """The fixed text; it parses, and fixing it again changes nothing."""
    import libcst as cst

    from torchlint.lint.api import lint_source

    result = lint(code, rule, fix=True, unsafe_fixes=unsafe)
    text = result.fixed_text if result.fixed_text is not None else textwrap.dedent(code)
    cst.parse_module(text)
    again = lint_source(text, "example.py", select=[rule], fix=True, unsafe_fixes=unsafe)
    assert again.fixed_text is None, "fixing twice changed the file"
    return text


def project_findings(root: Path, files: dict[str, str], select: list[str]) -> list[tuple[str, int, str]]:
    """Write dedented `files` (name -> text) under `root`, lint them together (a project), and return
    (file name, line, code) of every finding, sorted; every file must lint without an error."""
    from torchlint.lint.api import lint_paths

    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    results = lint_paths([str(root / name) for name in files], select=select)
    assert all(r.error is None for r in results), [(r.path, r.error) for r in results]
    return sorted((Path(r.path).name, f.line, f.code) for r in results for f in r.findings)
