"""`torchlint optimize` says that it runs FILE, and checks for torch before running anything."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lint_testing import write
from torchlint.cli import cli


def test_help_says_the_file_is_run(runner) -> None:
    result = runner.invoke(cli, ["optimize", "--help"])
    assert "FILE.py is imported and FACTORY() is called: this runs their code" in " ".join(result.output.split())


def test_without_torch_nothing_runs(runner, project: Path, monkeypatch) -> None:
    marker = project / "ran"
    write(project / "model.py", f"open({str(marker)!r}, 'w').close()\ndef make():\n    return None\n")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    result = runner.invoke(cli, ["optimize", "model.py:make", "--input-shape", "1,3"])
    assert result.exit_code == 2
    assert "torch is not installed" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not marker.exists()
