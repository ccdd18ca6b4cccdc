"""The pre-commit hooks: the manifest validates, the hooks run from this repository on another one, and the
README's configuration works as written. pre-commit runs from this interpreter (the `dev` extra installs it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lint_testing import LOADER_ZERO, ROOT, write

pytest.importorskip("pre_commit")
PRE_COMMIT = [sys.executable, "-m", "pre_commit"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRE_COMMIT")}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "test"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "test@example.com"
    return env


def _repo(path: Path, env: dict[str, str], files: dict[str, str]) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=path, check=True, env=env)
    for name, text in files.items():
        write(path / name, text)
    subprocess.run(["git", "add", "."], cwd=path, check=True, env=env)
    return path


def test_manifest_validates() -> None:
    proc = subprocess.run([*PRE_COMMIT, "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_try_repo_runs_the_hooks(tmp_path: Path) -> None:
    env = _env(tmp_path)
    repo = _repo(tmp_path / "user-repo", env, {"train.py": LOADER_ZERO, "notes.txt": "not python\n"})
    check = subprocess.run(
        [*PRE_COMMIT, "try-repo", str(ROOT), "torchlint", "--all-files"], cwd=repo, capture_output=True, text=True, env=env
    )
    output = check.stdout + check.stderr
    assert check.returncode == 1, output
    assert "train.py:3:10" in output and "TL101" in output

    # No Python file staged: the hook has nothing to do and passes.
    empty = _repo(tmp_path / "empty-repo", env, {"README.txt": "hello\n"})
    none = subprocess.run(
        [*PRE_COMMIT, "try-repo", str(ROOT), "torchlint", "--all-files"], cwd=empty, capture_output=True, text=True, env=env
    )
    assert none.returncode == 0, none.stdout + none.stderr


def _readme_config() -> str:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("### pre-commit", 1)[1]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match, "the README's pre-commit section has no yaml block"
    return match.group(1)


def test_readme_configuration_works_as_written(tmp_path: Path) -> None:
    env = _env(tmp_path)
    # As the README says: torchlint installed where pre-commit runs (this checkout, on this interpreter).
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    config = _readme_config()
    repo = _repo(tmp_path / "user-repo", env, {".pre-commit-config.yaml": config, "train.py": LOADER_ZERO})
    validate = subprocess.run([*PRE_COMMIT, "validate-config"], cwd=repo, capture_output=True, text=True, env=env)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    run = subprocess.run([*PRE_COMMIT, "run", "--all-files"], cwd=repo, capture_output=True, text=True, env=env)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "train.py:3:10" in output and "TL101" in output
    write(repo / "train.py", "import torch\n\nx = torch.zeros(3)\n")
    clean = subprocess.run([*PRE_COMMIT, "run", "--all-files"], cwd=repo, capture_output=True, text=True, env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
