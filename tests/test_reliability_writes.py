"""--fix writes only what it should, where it should, and says what it did not write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lint_testing import LOADER_ZERO, write
from torchlint.cli import cli
from torchlint.lint import runner as runner_module
from torchlint.lint.source import SourceError, decode_python

FIXABLE = "import torch\n\nfor batch in loader:\n    x = torch.zeros(3).cuda()\n"


def _fixed(text: str) -> bool:
    return ".cuda()" not in text


@pytest.mark.parametrize("codec", ["hex", "base64", "zlib", "uu", "rot13", "bz2"])
def test_a_cookie_naming_a_non_text_codec_is_one_line(runner, project: Path, codec: str) -> None:
    write(project / "odd.py", f"# -*- coding: {codec} -*-\nx = 1\n")
    write(project / "good.py", LOADER_ZERO)
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "-j", "1"])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert "odd.py: error: unsupported encoding declaration: " in result.output
    assert "is not a text encoding" in result.output
    assert "good.py:3:10: TL101" in result.output


@pytest.mark.parametrize("codec", ["punycode"])
def test_bytes_a_codec_cannot_decode_are_a_source_error(codec: str) -> None:
    with pytest.raises(SourceError):
        decode_python("p.py", f"# -*- coding: {codec} -*-\nimport torch\nfor batch in loader:\n    x = torch.zeros(3).cuda()\n".encode())


def test_unicode_escape_files_are_linted_but_never_rewritten(runner, project: Path) -> None:
    original = b"# -*- coding: unicode_escape -*-\nimport torch\n\nfor batch in loader:\n    x = torch.zeros(3).cuda()\n"
    path = write(project / "esc.py", original)
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix", "--unsafe-fixes", "--select", "ALL"])
    assert path.read_bytes() == original
    assert "esc.py: warning: not fixed: its encoding (unicode_escape) cannot be written back safely" in result.output


def test_fix_writes_through_a_symlink_to_its_target(runner, project: Path) -> None:
    target = write(project / "real" / "model.py", FIXABLE)
    os.symlink("real/model.py", project / "link.py")
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix", "--unsafe-fixes", "--select", "ALL", "link.py"])
    assert (project / "link.py").is_symlink(), result.output
    assert _fixed(target.read_text())


def test_fix_keeps_hard_links_and_mode(runner, project: Path) -> None:
    path = write(project / "a.py", FIXABLE)
    os.link(path, project / "b_copy.txt")
    path.chmod(0o640)
    runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix", "--unsafe-fixes", "--select", "ALL", "a.py"])
    assert _fixed(path.read_text())
    assert (project / "b_copy.txt").read_text() == path.read_text()
    assert os.stat(path).st_nlink == 2
    assert os.stat(path).st_mode & 0o777 == 0o640


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to own a file as another user")
def test_fix_keeps_the_owner(runner, project: Path) -> None:
    path = write(project / "a.py", FIXABLE)
    os.chown(path, 4321, 4321)
    runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix", "--unsafe-fixes", "--select", "ALL", "a.py"])
    assert _fixed(path.read_text())
    assert (os.stat(path).st_uid, os.stat(path).st_gid) == (4321, 4321)


def test_an_edit_made_while_fixing_is_not_lost(runner, project: Path, monkeypatch) -> None:
    path = write(project / "a.py", FIXABLE)
    real_fix_file = runner_module.fix_file

    def fix_file(source, lint, unsafe):
        path.write_text(FIXABLE + "y = 2  # typed by the user meanwhile\n")
        return real_fix_file(source, lint, unsafe)

    monkeypatch.setattr(runner_module, "fix_file", fix_file)
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix", "--unsafe-fixes", "--select", "ALL", "-j", "1"])
    assert "typed by the user meanwhile" in path.read_text()
    assert "a.py: error: changed on disk while being fixed; not written" in result.output
    assert "Fixed 1" not in result.output


def test_a_fix_that_cannot_be_written_is_not_counted(runner, project: Path, monkeypatch) -> None:
    write(project / "a.py", FIXABLE)

    def refuse(path, data, read_digest):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(runner_module, "write_fixed", refuse)
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix", "--unsafe-fixes", "--select", "ALL", "-j", "1"])
    assert "a.py: error: cannot write the fixed file: Permission denied" in result.output
    assert "Fixed 1" not in result.output
    assert "TL" in result.output  # the problem is still reported: it is still in the file
    assert result.exit_code == 1


def test_add_noqa_that_cannot_write_is_one_line(runner, project: Path, monkeypatch) -> None:
    write(project / "a.py", LOADER_ZERO)
    from torchlint import cli as cli_module

    def refuse(path, data, read_digest):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cli_module, "write_fixed", refuse)
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--add-noqa", "-j", "1"])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "a.py: error: cannot write the file: Permission denied" in result.output
    assert result.exit_code == 1


def test_add_noqa_in_a_read_only_directory_writes_the_file_in_place(runner, project: Path) -> None:
    path = write(project / "ro" / "a.py", LOADER_ZERO)
    (project / "ro").chmod(0o555)
    try:
        result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--add-noqa", "-j", "1", "ro"])
    finally:
        (project / "ro").chmod(0o755)
    assert result.exit_code == 0, result.output
    assert "# noqa: TL101" in path.read_text()
