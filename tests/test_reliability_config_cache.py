"""Malformed configurations are usage errors (exit 2, one line); the cache lives at the project root,
is pruned, and never trusts what it reads back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lint_testing import LOADER_ZERO, write
from torchlint.cli import cli
from torchlint.lint import cache as cache_module
from torchlint.lint.cache import CACHE_DIR, Cache, project_root


@pytest.mark.parametrize("value", ["5", '"x"', "[1, 2]", "true"])
@pytest.mark.parametrize("name", ["pyproject.toml", "torchlint.toml"])
def test_a_tool_key_that_is_not_a_table_is_a_usage_error(runner, project: Path, name: str, value: str) -> None:
    write(project / name, f"tool = {value}\n")
    write(project / "a.py", LOADER_ZERO)
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache"])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "'tool' must be a table" in result.output
    assert len([line for line in result.output.splitlines() if "error" in line.lower()]) == 1


def _entries(root: Path) -> list[Path]:
    return sorted(root.glob(f"{CACHE_DIR}/*/*/*.json"))


def test_the_cache_goes_to_the_project_root_not_the_current_directory(runner, project: Path, monkeypatch) -> None:
    repo = project / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "src" / "a.py", LOADER_ZERO)
    elsewhere = project / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    runner.invoke(cli, ["check", "--output-format", "concise", str(repo / "src")])
    assert not (elsewhere / CACHE_DIR).exists()
    assert _entries(repo)


def test_project_root_without_git_or_config_is_the_common_directory(tmp_path: Path) -> None:
    write(tmp_path / "p" / "x" / "a.py", "")
    write(tmp_path / "p" / "y" / "b.py", "")
    root = project_root([str(tmp_path / "p" / "x" / "a.py"), str(tmp_path / "p" / "y")], None)
    assert root == str(tmp_path / "p")
    assert project_root(["whatever"], str(tmp_path / "cfg" / "torchlint.toml")) == str(tmp_path / "cfg")


def test_entries_no_recent_run_used_are_pruned(runner, project: Path, monkeypatch) -> None:
    monkeypatch.setattr(cache_module, "KEEP_RUNS", 3)
    write(project / "old.py", LOADER_ZERO)
    write(project / "new.py", LOADER_ZERO)
    runner.invoke(cli, ["check", "--output-format", "concise", "old.py", "new.py"])
    assert len(_entries(project)) == 2
    for _ in range(4):
        runner.invoke(cli, ["check", "--output-format", "concise", "new.py"])  # old.py's entry is not read by these runs
    assert len(_entries(project)) == 1
    result = runner.invoke(cli, ["check", "--output-format", "concise", "old.py", "new.py"])
    assert result.output.count("TL101") == 2


@pytest.mark.parametrize(
    "entry",
    [
        {"error": None, "notes": [], "cells": [], "findings": {"a": 1}},
        {"error": None, "notes": [], "cells": [], "findings": [5]},
        {"error": None, "notes": [], "cells": [[1]], "findings": []},
        {"error": 3, "notes": [], "cells": [], "findings": []},
        {"error": None, "notes": [], "cells": [], "findings": [{"code": "TL101", "message": "m", "line": "1", "column": 1,
            "end_line": 1, "end_column": 1, "noqa_line": 1, "fix": None}]},
        {"error": None, "notes": [], "cells": [], "findings": [{"code": "TL101", "message": "m", "line": 1, "column": 1,
            "end_line": 1, "end_column": 1, "noqa_line": 1, "fix": {"message": "x", "safe": True, "edits": [{"start": "a"}]}}]},
        [1, 2, 3],
        "[[[[" * 50_000,
    ],
    ids=["findings-dict", "finding-int", "cell-short", "error-int", "line-str", "edit-str", "list", "deep"],
)
def test_a_crafted_cache_entry_is_a_miss(runner, project: Path, entry) -> None:
    write(project / "a.py", LOADER_ZERO)
    runner.invoke(cli, ["check"])
    (target,) = _entries(project)
    target.write_text(entry if isinstance(entry, str) else json.dumps(entry))
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--fix"])
    assert isinstance(result.exception, SystemExit), result.exception
    assert "a.py:3:10: TL101" in result.output


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_planted_in_the_cache_is_a_miss(project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    cache = Cache(str(project), "f")
    key = cache.key("a.py", b"data")
    target = Path(cache._file(key))
    target.parent.mkdir(parents=True)
    os.mkfifo(target)
    assert cache.get(key) is None
