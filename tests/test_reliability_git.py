"""Discovery asks git for the files to lint, but never lets the linted repository run a program."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lint_testing import LOADER_ZERO, write
from torchlint.cli import cli


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_repository_fsmonitor_hook_is_not_run(runner, project: Path) -> None:
    repo = project / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    marker = project / "MARKER"
    hook = write(project / "hook.sh", f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", str(hook)], check=True)
    write(repo / "a.py", LOADER_ZERO)
    write(repo / "ignored.py", LOADER_ZERO)
    write(repo / ".gitignore", "ignored.py\n")
    subprocess.run(["git", "-C", str(repo), "add", "a.py"], check=True)
    marker.unlink(missing_ok=True)  # `git add` itself may have run it

    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", str(repo)])
    assert not marker.exists()
    assert "a.py:3:10: TL101" in result.output
    assert "ignored.py" not in result.output  # .gitignore still applies
