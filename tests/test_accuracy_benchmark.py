"""benchmarks/accuracy/score.py: label reading, matching findings to labels, and the metrics (no linter run)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parent.parent / "benchmarks" / "accuracy"
COMMIT = "a" * 40
HEADER = "repo,commit,path,line,rule,verdict,reason\n"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("accuracy_score", FOLDER / "score.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["accuracy_score"] = module
    spec.loader.exec_module(module)
    yield module
    if str(FOLDER) in sys.path:  # score.py puts its folder on the path to import materialise
        sys.path.remove(str(FOLDER))
    sys.modules.pop("accuracy_score", None)
    sys.modules.pop("materialise", None)


def write_labels(folder: Path, name: str, rows: list[str]) -> None:
    body = "".join(f"o/r,{COMMIT},{row}\n" for row in rows)
    (folder / name).write_text("# criteria\n# more criteria\n" + HEADER + body, encoding="utf-8")


@pytest.fixture
def labels(bench, tmp_path):
    write_labels(tmp_path, "labels.csv", [
        "train.py,10,TL201,TP,per-step item",      # reported now: TP
        "train.py,11,TL201,FN,missed item",        # reported now: counts as TP
        "train.py,12,TL201,TP,per-step item",      # no longer reported: FN
        "train.py,20,TL201,FP,logging interval",   # reported: FP
        "train.py,21,TL203,FP,host value",         # not reported any more: FP gone
        "eval.py,5,B,FN,eval forward with grad",   # family letter, reported as TL301: TP
        "eval.py,9,E,FN,per-batch cpu gathering",  # family letter, not reported: FN
    ])
    write_labels(tmp_path, "labels_part2.csv", [
        "nb.ipynb,cell 3:4,TL101,TP,decodes files",  # notebook finding: TP
    ])
    return bench.read_labels(tmp_path, {"o/r": COMMIT})


def finding(bench, path, line, code):
    return bench.Finding("o/r", path, line, code)


def test_reads_every_labels_file_and_skips_comments(labels):
    assert len(labels) == 8
    assert labels[-1].line == "cell 3:4" and labels[-1].rule == "TL101"


def test_matching_and_metrics(bench, labels):
    findings = [
        finding(bench, "train.py", "10", "TL201"),
        finding(bench, "train.py", "10", "TL201"),  # a second column on the same line counts once
        finding(bench, "train.py", "11", "TL201"),
        finding(bench, "train.py", "20", "TL201"),
        finding(bench, "train.py", "30", "TL201"),  # no label: unjudged
        finding(bench, "train.py", "12", "TL202"),  # label is for TL201, so this is unjudged
        finding(bench, "eval.py", "5", "TL301"),
        finding(bench, "nb.ipynb", "cell 3:4", "TL101"),
        finding(bench, "model.py", "7", "TL701"),   # other family, unjudged
    ]
    result = bench.score(labels, findings)

    tl201 = result.by_rule["TL201"]
    assert (tl201.tp, tl201.fp, tl201.fn, tl201.unjudged) == (2, 1, 1, 1)
    assert tl201.precision == pytest.approx(2 / 3) and tl201.recall == pytest.approx(2 / 3)
    assert result.by_rule["TL203"].fp_gone == 1 and result.by_rule["TL203"].precision is None
    assert (result.by_rule["TL301"].tp, result.by_rule["TL301"].fn) == (1, 0)
    assert result.by_rule["E"].fn == 1  # the family-letter miss keeps its own row
    assert result.by_rule["TL202"].unjudged == 1

    family_e = result.by_family["E"]
    assert (family_e.tp, family_e.fp, family_e.fn, family_e.unjudged, family_e.fp_gone) == (2, 1, 2, 2, 1)
    assert (result.by_family["B"].tp, result.by_family["C"].tp) == (1, 1)
    assert result.by_family["other"].unjudged == 1
    total = result.total
    assert (total.tp, total.fp, total.fn, total.unjudged) == (4, 1, 2, 3)
    assert total.precision == pytest.approx(4 / 5) and total.recall == pytest.approx(4 / 6)
    five = result.five_families  # the TL701 finding is outside A..E
    assert (five.tp, five.fp, five.fn, five.unjudged) == (4, 1, 2, 2)
    assert [(f.path, f.line, f.code) for f in result.unjudged] == [
        ("model.py", "7", "TL701"), ("train.py", "12", "TL202"), ("train.py", "30", "TL201")]
    # What still stands: the TP label no longer reported is now a miss; the reported FP stays; reasons kept.
    assert [(e.line, e.rule, e.verdict, e.reason) for e in result.errors] == [
        ("12", "TL201", "FN", "per-step item"), ("20", "TL201", "FP", "logging interval"),
        ("9", "E", "FN", "per-batch cpu gathering")]


def test_rendered_table_has_rules_and_families(bench, labels):
    result = bench.score(labels, [finding(bench, "train.py", "10", "TL201")])
    text = bench.render(result, "tune", 1, len(labels))
    assert "| TL201 [E] | 1 | 0 | 2 | 100% | 33% | 0 | 1 |" in text
    assert "| E (family, no single rule) [E] | 0 | 0 | 1 | - | 0% | 0 | 0 |" in text
    assert "| **families A-E** | 1 | 0 | 5 | 100% | 17% | 0 | 2 |" in text
    assert "| **all rules** | 1 | 0 | 5 | 100% | not hunted | 0 | 2 |" in text


def test_recall_of_rules_outside_the_families_is_not_shown(bench, labels):
    findings = [finding(bench, "model.py", "7", "TL701")]
    extra = labels + [bench.Label("o/r", "model.py", "7", "TL701", "TP")]
    result = bench.score(extra, findings)
    assert result.by_rule["TL701"].tp == 1 and result.by_family["other"].tp == 1
    text = bench.render(result, "tune", 1, len(extra))
    assert "| TL701 [other] | 1 | 0 | 0 | 100% | not hunted | 0 | 0 |" in text
    assert result.five_families.tp == 0


def test_parse_findings_relative_paths_and_notebook_cells(bench, tmp_path):
    report = [
        {"code": "TL201", "filename": str(tmp_path / "pkg" / "train.py"), "location": {"row": 4}, "cell": None},
        {"code": "TL101", "filename": str(tmp_path / "nb.ipynb"), "location": {"row": 2}, "cell": 3},
        {"code": None, "filename": str(tmp_path / "py2.py"), "location": {"row": 1}, "cell": None},
    ]
    found = bench.parse_findings("o/r", tmp_path, report)
    assert [(f.path, f.line, f.code) for f in found] == [
        ("pkg/train.py", "4", "TL201"), ("nb.ipynb", "cell 3:2", "TL101")]


@pytest.mark.parametrize(("row", "problem"), [
    ("train.py,x,TL201,TP,r", "neither a number"),
    ("train.py,3,TL9,TP,r", "neither a TL code"),
    ("train.py,3,TL201,maybe,r", "is not one of"),
    ("train.py,3,TL201,TP", "expected 7 fields"),
])
def test_bad_rows_name_file_and_line(bench, tmp_path, row, problem):
    write_labels(tmp_path, "labels.csv", [row])
    with pytest.raises(SystemExit, match=rf"labels\.csv:4: error: .*{problem}"):
        bench.read_labels(tmp_path, {"o/r": COMMIT})


def test_duplicate_and_unknown_repo_rejected(bench, tmp_path):
    write_labels(tmp_path, "labels.csv", ["a.py,3,TL201,TP,r", "a.py,3,TL201,FP,r"])
    with pytest.raises(SystemExit, match="already labelled"):
        bench.read_labels(tmp_path, {"o/r": COMMIT})
    with pytest.raises(SystemExit, match="not in any repos"):
        bench.read_labels(tmp_path, {"x/y": COMMIT})
    with pytest.raises(SystemExit, match="not the pinned"):
        bench.read_labels(tmp_path, {"o/r": "b" * 40})


def test_the_committed_labels_read_without_error(bench):
    # Every row names a listed repository at its pinned commit, and no line is labelled twice for a rule (two
    # judges of the same finding would otherwise both count).
    from materialise import read_repos

    repos = read_repos(FOLDER)
    labels = bench.read_labels(FOLDER, {r["repo"]: r["commit"] for r in repos})
    assert len(labels) > 600 and len({r["repo"] for r in repos}) >= 30
