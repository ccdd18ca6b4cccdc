"""The pre-commit hooks: the manifest validates, and the hooks run from this repository on another one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lint_testing import LOADER_ZERO, ROOT, write

pytestmark = pytest.mark.skipif(shutil.which("pre-commit") is None, reason="pre-commit is not installed")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRE_COMMIT")}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "test"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "test@example.com"
    return env


def test_manifest_validates() -> None:
    proc = subprocess.run(["pre-commit", "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_try_repo_runs_the_hooks(tmp_path: Path) -> None:
    repo = tmp_path / "user-repo"
    repo.mkdir()
    env = _env(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    write(repo / "train.py", LOADER_ZERO)
    write(repo / "notes.txt", "not python\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)

    check = subprocess.run(
        ["pre-commit", "try-repo", str(ROOT), "torchlint", "--all-files"], cwd=repo, capture_output=True, text=True, env=env
    )
    output = check.stdout + check.stderr
    assert check.returncode == 1, output
    assert "train.py:3:10: TL101" in output

    # No Python file staged: the hook has nothing to do and passes.
    empty = tmp_path / "empty-repo"
    empty.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=empty, check=True, env=env)
    write(empty / "README.txt", "hello\n")
    subprocess.run(["git", "add", "."], cwd=empty, check=True, env=env)
    none = subprocess.run(
        ["pre-commit", "try-repo", str(ROOT), "torchlint", "--all-files"], cwd=empty, capture_output=True, text=True, env=env
    )
    assert none.returncode == 0, none.stdout + none.stderr
