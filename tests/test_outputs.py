"""Every output format, checked for shape."""

from __future__ import annotations

import json
from pathlib import Path

from lint_testing import LOADER_ZERO, write
from torchlint.cli import cli


def _run(runner, fmt: str):
    return runner.invoke(cli, ["check", "--no-cache", "--output-format", fmt])


def test_json_has_ruffs_shape(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    data = json.loads(_run(runner, "json").stdout)
    assert len(data) == 1
    item = data[0]
    assert set(item) == {"cell", "code", "end_location", "filename", "fix", "location", "message", "noqa_row", "url"}
    assert item["filename"] == str(project / "a.py")
    assert item["location"] == {"row": 3, "column": 10} and item["end_location"] == {"row": 3, "column": 38}
    assert item["noqa_row"] == 3
    assert item["fix"]["applicability"] == "unsafe"
    edits = item["fix"]["edits"]
    assert {"content", "location", "end_location"} == set(edits[0])
    assert any(e["content"] == "import os\n" for e in edits)
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
        assert rule["shortDescription"]["text"] and rule["helpUri"]
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
