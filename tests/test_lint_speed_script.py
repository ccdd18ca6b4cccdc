"""benchmarks/lint_speed.py: argument handling, output parsing and table rendering (no tool is run)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "lint_speed.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("lint_speed", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["lint_speed"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("lint_speed", None)


def test_defaults(bench):
    args = bench.parse_args([])
    assert args.trees == ["timm", "torch"]
    assert args.peer_trees == ["timm"]
    assert (args.reps, args.peer_reps, args.large_reps) == (3, 1, 1)
    assert args.torchfix_j1 and args.torchfix_default and args.large_j1
    assert not args.skip_peers and not args.skip_fixit


def test_quick(bench):
    args = bench.parse_args(["--quick"])
    assert args.trees == ["timm"]
    assert args.skip_fixit
    assert args.reps == 1 and args.peer_reps == 1


def test_options(bench):
    args = bench.parse_args(["--trees", "torch", "--tree", "/x", "--reps", "5", "--skip-peers", "-j", "4"])
    assert args.trees == ["torch"] and args.tree == ["/x"]
    assert args.reps == 5 and args.skip_peers and args.jobs == 4


def test_rejects_unknown_tree(bench):
    with pytest.raises(SystemExit):
        bench.parse_args(["--trees", "numpy"])


def test_output_parsers(bench):
    run = bench.Run(1.0, 1024, 0, '[{"code": "TL101"}, {"code": "TL101"}, {"code": "TL203"}]', "")
    assert bench.count_torchlint(run) == (3, {"TL101": 2, "TL203": 1})
    out = (
        "a/b.py:3:5: TOR401 Detected DataLoader running with synchronized implementation.\n"
        "--- a/b.py\n+++ a/b.py\n"
        "c.py:10:1: TOR102 `torch.load` without `weights_only` parameter is unsafe.\n"
    )
    assert bench.count_torchfix(bench.Run(1.0, 0, 1, out, "")) == (2, {"TOR401": 1, "TOR102": 1})
    fixit = "x/y.py@4:0 NoRedundantFString: message\nx/z.py@1:2 UseFstring (has autofix): other\n🛠️  2 files\n"
    assert bench.count_fixit(bench.Run(1.0, 0, 1, fixit, "")) == (2, {"NoRedundantFString": 1, "UseFstring": 1})
    assert bench.count_parse(bench.Run(1.0, 0, 0, "parsed 7 failed 1\n", "")) == (None, {"parsed": 7, "failed": 1})


def test_table(bench, tmp_path):
    tree = bench.Tree("timm", tmp_path, "test", files=2, lines=1000)

    def entry(tool, group, jobs, seconds, out, count, problem=None):
        e = bench.Entry(tree, tool, jobs, ["x"], tmp_path, 1, count, group)
        e.runs = [bench.Run(s, 100 * 1024, 0, out, "") for s in seconds]
        e.problem = problem
        return e

    entries = [
        entry("torchlint cold", "torchlint", "2", [1.0, 3.0, 2.0], '[{"code": "TL101"}]', bench.count_torchlint),
        entry("torchlint warm", "torchlint", "2", [0.05], "[]", bench.count_torchlint),
        entry("bare libcst parse", "parse", "1", [4.0], "parsed 2 failed 0", bench.count_parse),
        entry("TorchFix --select ALL", "torchfix", "2", [20.0], "a.py:1:1: TOR401 x\n", bench.count_torchfix),
    ]
    failed = bench.Entry(tree, "Fixit lint", "all", ["fixit"], tmp_path, 1, bench.count_fixit, "fixit")
    failed.problem = "`pip install fixit` failed: no network"
    entries.append(failed)
    table = bench.render_table(entries, [tree])
    lines = table.splitlines()
    assert lines[0].startswith("| Tree | Tool |")
    assert len(lines) == 2 + len(entries)
    cold = lines[2]
    assert "| 2.00 |" in cold  # median of 1, 3, 2
    assert "| 500 |" in cold  # 1000 lines / 2 s
    assert "10.0×" in cold  # TorchFix 20 s / 2 s
    assert "2.0×" in cold  # bare parse 4 s / 2 s
    assert "1 (TL101: 1)" in cold
    assert "not run: `pip install fixit` failed" in lines[-1]
    goals = bench.goal_lines(entries, [tree], 2)
    assert any("10.0× TorchFix" in g and "met" in g for g in goals)
    assert any("2.5% of cold" in g for g in goals)
    assert any("TL101 1 vs TorchFix TOR401 1" in g for g in goals)


def test_formatting(bench):
    assert bench.fmt_seconds(None) == "–"
    assert bench.fmt_seconds(1.234) == "1.23"
    assert bench.fmt_seconds(123.4) == "123"
    assert bench.fmt_rate(2_000_000, 1.0) == "2.00M"
    assert bench.fmt_ratio(10.0, 0.05) == "200×"
