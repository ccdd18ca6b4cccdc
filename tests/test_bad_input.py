"""Bad input never crashes the run: one clear line per file, the other files still linted."""

from __future__ import annotations

import os
from pathlib import Path


from lint_testing import LOADER_ZERO, write
from torchlint.cli import cli
from torchlint.lint import source as source_module


def _errors(output: str) -> dict[str, str]:
    found = {}
    for line in output.splitlines():
        path, sep, rest = line.partition(": error: ")
        if sep:
            found[path] = rest
    return found


def test_each_bad_file_gets_one_line_and_the_rest_is_linted(runner, project: Path, monkeypatch) -> None:
    write(project / "good.py", LOADER_ZERO)
    write(project / "syntax.py", "def f(:\n    pass\n")
    write(project / "latin.py", b"x = '\xe9'\n")
    write(project / "binary.py", b"\x7fELF\x00\x01\x02")
    write(project / "nb.ipynb", "{not json")
    os.symlink("loop.py", project / "loop.py")
    os.symlink("missing_target.py", project / "dangling.py")
    unreadable = write(project / "secret.py", "x = 1\n")
    unreadable.chmod(0)
    monkeypatch.setattr(source_module, "MAX_FILE_BYTES", 1000)
    write(project / "huge.py", "x = 1\n" * 400)

    result = runner.invoke(cli, ["check", "--no-cache", "-j", "1", "--output-format", "concise"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    errors = _errors(result.output)
    assert "syntax.py:1:7: TL000 syntax error: " in result.output  # a finding, not an unreadable file
    assert errors["latin.py"] == "not valid utf-8 (byte 0xe9 at offset 5)"
    assert errors["binary.py"] == "binary file (contains NUL bytes)"
    assert errors["nb.ipynb"].startswith("not a valid notebook: invalid JSON")
    assert errors["loop.py"] == "symbolic link loop"
    assert errors["dangling.py"].startswith("broken symbolic link")
    assert errors["huge.py"].startswith("file too large")
    if os.geteuid() != 0:  # root reads anything
        assert errors["secret.py"] == "permission denied"
    assert "good.py:3:10: TL101" in result.output
    assert "could not be linted" in result.output


def test_missing_path_is_reported(runner, project: Path) -> None:
    result = runner.invoke(cli, ["check", "nope.py"])
    assert result.exit_code == 1
    assert _errors(result.output) == {"nope.py": "no such file or directory"}


def test_syntax_error_in_a_file_no_rule_needs(runner, project: Path) -> None:
    write(project / "a.py", "x = (\n")
    result = runner.invoke(cli, ["check", "--no-cache", "--output-format", "concise"])
    assert result.exit_code == 1 and _errors(result.output) == {}
    assert result.output.splitlines()[0] == "a.py:1:5: TL000 syntax error: '(' was never closed"


def test_broken_files_in_a_pool(runner, project: Path) -> None:
    for i in range(8):
        write(project / f"ok{i}.py", LOADER_ZERO)
    write(project / "bad.py", b"\xff\xfe\x00")
    result = runner.invoke(cli, ["check", "--no-cache", "-j", "2", "--output-format", "concise"])
    assert result.output.count("TL101") == 8 and "bad.py: error: binary file" in result.output
