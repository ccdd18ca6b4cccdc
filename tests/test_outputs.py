"""Every output format, checked for shape."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lint_testing import LOADER_ZERO, ROOT, write
from torchlint.cli import cli


def _run(runner, fmt: str):
    return runner.invoke(cli, ["check", "--no-cache", "--output-format", fmt])


def test_json_has_ruffs_shape(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    data = json.loads(_run(runner, "json").stdout)
    assert len(data) == 1
    item = data[0]
    assert set(item) == {
        "cell", "code", "end_location", "filename", "fix", "location", "message", "name", "noqa_row", "severity", "url"
    }
    assert item["name"] == "dataloader-num-workers-zero" and item["severity"] == "error"
    assert item["filename"] == str(project / "a.py")
    assert item["location"] == {"row": 3, "column": 10} and item["end_location"] == {"row": 3, "column": 38}
    assert item["noqa_row"] == 3
    assert item["fix"]["applicability"] == "unsafe"
    edits = item["fix"]["edits"]
    assert {"content", "location", "end_location"} == set(edits[0])
    assert any(e["content"] == "import os\n\n" for e in edits)  # a block of its own above the torch import
    assert item["url"].endswith("/rules/TL101.md")


def test_sarif_has_the_required_fields(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    write(project / "b.py", b"\x00")
    doc = json.loads(_run(runner, "sarif").stdout)
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "torchlint" and driver["version"]
    ids = [r["id"] for r in driver["rules"]]
    assert "TL101" in ids
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and (rule["id"] == "TL000" or rule["helpUri"])
    result = run["results"][0]
    assert result["ruleId"] == "TL101" and ids[result["ruleIndex"]] == "TL101"
    assert result["message"]["text"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "a.py"
    assert location["region"] == {"startLine": 3, "startColumn": 10, "endLine": 3, "endColumn": 38}
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert notes[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "b.py"


def test_github_annotations(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    message = json.loads(_run(runner, "json").stdout)[0]["message"]
    out = _run(runner, "github").stdout.splitlines()
    assert out == [
        "::error title=torchlint (TL101),file=a.py,line=3,col=10,endLine=3,endColumn=38::"
        + ("TL101 " + message).replace("%", "%25")
    ]


def _ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff")
    command = [exe] if exe else [sys.executable, "-m", "ruff"]
    return subprocess.run([*command, *args], capture_output=True, text=True, cwd=cwd)


def _keys(value, prefix: str = "") -> set[str]:
    """Every key path of a JSON value (`fix.edits[].location.row`), to compare shapes."""
    if isinstance(value, dict):
        return {k for key, item in value.items() for k in {prefix + key} | _keys(item, prefix + key + ".")}
    if isinstance(value, list) and value:
        return _keys(value[0], prefix[:-1] + "[].")
    return set()


def test_json_fields_are_ruffs_own(runner, project: Path) -> None:
    pytest.importorskip("ruff")
    write(project / "r.py", "import os, sys\nx = 1 \n")
    theirs = json.loads(_ruff("check", "--no-cache", "--select", "E401", "--output-format", "json", "r.py", cwd=project).stdout)
    write(project / "a.py", LOADER_ZERO)
    ours = json.loads(_run(runner, "json").stdout)
    assert theirs and ours
    assert _keys(ours[0]) == _keys(theirs[0])
    # the syntax error of a file that does not parse is a finding too, shaped as ruff shapes its own
    write(project / "b.py", "x = (\n")
    theirs_syntax = json.loads(_ruff("check", "--no-cache", "--output-format", "json", "b.py", cwd=project).stdout)
    ours_syntax = [f for f in json.loads(_run(runner, "json").stdout) if f["code"] == "TL000"]
    assert len(ours_syntax) == 1 and set(ours_syntax[0]) == set(theirs_syntax[0])
    assert ours_syntax[0]["url"] is None and ours_syntax[0]["noqa_row"] is None
    assert ours_syntax[0]["location"] == {"row": 1, "column": 5} and "was never closed" in ours_syntax[0]["message"]


def test_statistics_as_ruff_prints_them(runner, project: Path) -> None:
    pytest.importorskip("ruff")
    # TL103: two safe fixes, TL101: an unsafe one (not applied without --unsafe-fixes), TL000: no fix
    write(project / "a.py", LOADER_ZERO + LOADER_ZERO.splitlines()[-1] + "\n")
    write(project / "b.py", "x = (\n")
    out = runner.invoke(cli, ["check", "--no-cache", "--statistics"]).stdout.splitlines()
    assert out[:2] == ["2\tTL101\t[ ] dataloader-num-workers-zero", "1\tTL000\t[ ] syntax-error"]
    unsafe = runner.invoke(cli, ["check", "--no-cache", "--statistics", "--unsafe-fixes"]).stdout.splitlines()
    assert unsafe[0] == "2\tTL101\t[*] dataloader-num-workers-zero"
    rows = json.loads(runner.invoke(cli, ["check", "--no-cache", "--statistics", "--output-format", "json"]).stdout)
    assert rows[0] == {"code": "TL101", "name": "dataloader-num-workers-zero", "count": 2, "fixable": False, "fixable_count": 0}
    # Same keys as ruff's, and `[-]` when only some of a rule's findings can be fixed, as ruff marks them.
    write(project / "r.py", "def f():\n    try:\n        pass\n    except ValueError as e:\n        pass\n    x = 1\n")
    theirs = _ruff("check", "--no-cache", "--select", "F841", "--statistics", "r.py", cwd=project).stdout.splitlines()
    assert theirs[0] == "2\tF841\t[-] unused-variable"
    theirs_json = json.loads(_ruff("check", "--no-cache", "--select", "F841", "--statistics", "--output-format", "json", "r.py", cwd=project).stdout)
    assert set(theirs_json[0]) == set(rows[0])
    ours_partly = runner.invoke(cli, ["check", "--no-cache", "--statistics", str(ROOT / "fixtures/lint/TL601/bad.py")])
    assert ours_partly.stdout.splitlines()[0] == "16\tTL601\t[-] host-tensor-then-move"
    # counts of several widths are aligned on the right, as ruff aligns them
    both = runner.invoke(cli, ["check", "--no-cache", "--statistics", str(ROOT / "fixtures/lint/TL601/bad.py"), "a.py"])
    assert both.stdout.splitlines()[1] == " 2\tTL101\t[ ] dataloader-num-workers-zero"


def test_statistics_and_diff_do_not_combine(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    result = runner.invoke(cli, ["check", "--statistics", "--diff"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "torchlint: error: --statistics cannot be combined with --diff (the one counts findings, the other shows fixes)"
    ]


def test_full_format_is_the_default_and_shows_source_and_fix(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    out = runner.invoke(cli, ["check", "--no-cache"]).stdout
    assert out == runner.invoke(cli, ["check", "--no-cache", "--output-format", "full"]).stdout
    lines = out.splitlines()
    assert lines[0].startswith("TL101 DataLoader loads every batch")
    assert lines[1] == " --> a.py:3:10"
    assert "3 | loader = DataLoader(ds, batch_size=8)" in lines
    assert "  |          " + "^" * 28 in lines  # under `DataLoader(ds, batch_size=8)`
    assert "help: Set num_workers=min(8, os.cpu_count() or 1)" in lines
    assert "  - loader = DataLoader(ds, batch_size=8)" in lines
    assert any(line.endswith("+ loader = DataLoader(ds, batch_size=8, num_workers=min(8, os.cpu_count() or 1))") for line in lines)
    assert "note: This is an unsafe fix and may change runtime behavior" in lines
    assert lines[-1] == "Found 1 problem (1 more with --unsafe-fixes)."
    assert all(line == line.rstrip() for line in lines)
    concise = runner.invoke(cli, ["check", "--no-cache", "--output-format", "concise"]).stdout
    assert concise.splitlines()[0].startswith("a.py:3:10: TL101 DataLoader")
    assert runner.invoke(cli, ["check", "--no-cache", "--output-format", "text"]).stdout == concise


def test_colour_on_request_and_never_with_no_color(runner, project: Path, monkeypatch) -> None:
    write(project / "a.py", LOADER_ZERO)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert "\x1b[" not in runner.invoke(cli, ["check", "--no-cache"]).stdout  # not a terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    for fmt in ("full", "concise"):
        coloured = runner.invoke(cli, ["check", "--no-cache", "--output-format", fmt]).stdout
        assert "\x1b[31m\x1b[1mTL101\x1b[0m" in coloured
    assert "\x1b[" not in runner.invoke(cli, ["check", "--no-cache", "--output-format", "json"]).stdout
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in runner.invoke(cli, ["check", "--no-cache"]).stdout


def test_terminal_colour_follows_the_stream(monkeypatch) -> None:
    from torchlint.output.terminal import use_color

    class Stream:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert use_color(Stream(True)) and not use_color(Stream(False))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Stream(True))


@pytest.mark.parametrize("fmt", ["full", "concise"])
def test_control_characters_in_names_cannot_reach_the_terminal(runner, project: Path, fmt: str) -> None:
    name = "evil\x1b]0;pwned\x07\nfake.py:1:1: TL999 forged.py"
    write(project / name, LOADER_ZERO)
    write(project / "b\x1b[2J.py", "x = (\n")
    out = runner.invoke(cli, ["check", "--no-cache", "--output-format", fmt]).stdout
    assert "\x1b" not in out and "\x07" not in out
    assert not any(line.startswith("fake.py") for line in out.splitlines())
    assert "evil\\x1b]0;pwned\\x07\\nfake.py:1:1: TL999 forged.py:3:10" in out
    assert "b\\x1b[2J.py:1:5" in out


def test_a_file_that_does_not_parse_is_a_finding_in_every_format(runner, project: Path) -> None:
    write(project / "a.py", "def f(:\n    pass\n")
    concise = runner.invoke(cli, ["check", "--no-cache", "--output-format", "concise"])
    assert concise.exit_code == 1
    assert concise.stdout.splitlines() == ["a.py:1:7: TL000 syntax error: invalid syntax", "Found 1 problem."]
    full = runner.invoke(cli, ["check", "--no-cache"]).stdout
    assert full.startswith("TL000 syntax error: invalid syntax\n --> a.py:1:7\n") and "1 | def f(:" in full
    doc = json.loads(_run(runner, "sarif").stdout)
    assert [r["ruleId"] for r in doc["runs"][0]["results"]] == ["TL000"]
    assert doc["runs"][0]["tool"]["driver"]["rules"][doc["runs"][0]["results"][0]["ruleIndex"]]["id"] == "TL000"
    assert doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    github = _run(runner, "github").stdout
    assert github.startswith("::error title=torchlint (TL000),file=a.py,line=1,col=7,")


def test_full_format_shows_the_fix_of_a_crlf_file(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO.replace("\n", "\r\n").encode())
    lines = runner.invoke(cli, ["check", "--no-cache"]).stdout.splitlines()
    assert "  - loader = DataLoader(ds, batch_size=8)" in lines
    assert "5 + loader = DataLoader(ds, batch_size=8, num_workers=min(8, os.cpu_count() or 1))" in lines
