"""One parse per file per run: a file linted and also summarised for the files that import it (or that it
imports) is parsed once, and its findings do not depend on which came first."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchlint.config import Settings
from torchlint.lint import engine, runner, trees
from torchlint.lint.discovery import Discovered

# data.py's TL102 rests on where its importer copies the batches; train.py's TL207 on what data.py's helper does.
DATA = """
import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, i):
        return torch.load(self.paths[i])


def make_loader(paths):
    return DataLoader(Images(paths), batch_size=32)


def accuracy(out, y):
    return (out.argmax(1) == y).float().mean().item()
"""

TRAIN = """
import torch
from data import accuracy, make_loader


def train(model, optimizer, paths, device):
    for xb, yb in make_loader(paths):
        xb, yb = xb.to(device), yb.to(device)
        out = model(xb)
        loss = torch.nn.functional.cross_entropy(out, yb)
        loss.backward()
        optimizer.step()
        acc = accuracy(out, yb)
"""

Found = dict[str, list[tuple[int, int, str]]]


@pytest.fixture
def parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The project (data.py, train.py) as the working directory; the files parsed, in order."""
    monkeypatch.chdir(tmp_path)
    for name, text in {"data.py": DATA, "train.py": TRAIN}.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    parsed: list[str] = []
    real = engine._parse
    monkeypatch.setattr(engine, "_parse", lambda source: parsed.append(Path(source.path).name) or real(source))
    return parsed


def _lint(names: list[str]) -> Found:
    items = [Discovered(name, name, True) for name in names]
    job = runner.Job(settings=Settings(select=["TL101", "TL102", "TL207"]), use_cache=False)
    results = list(runner.run(items, job, jobs=1, cache_root=None))
    assert all(r.error is None and not r.notes for r in results)
    return {r.path: [(f.line, f.column, f.code) for f in r.findings] for r in results}


@pytest.mark.parametrize(
    ("order", "parsed"),
    [
        # train.py's lint summarises data.py, whose lint takes that tree; the callers of data.py's helpers,
        # asked during train.py's lint (what `accuracy(out, yb)` is handed), include train.py: that summary is
        # built while train.py is linted and gets a tree of its own, which data.py's lint then reuses
        (["train.py", "data.py"], ["data.py", "train.py", "train.py"]),
        # data.py's lint summarises train.py, whose lint later takes that tree; the summary of data.py that
        # train.py's asks for during data.py's own lint gets a tree of its own
        (["data.py", "train.py"], ["data.py", "data.py", "train.py"]),
    ],
    ids=["summary-then-lint", "lint-then-summary"],
)
def test_files_are_parsed_once_and_their_findings_are_those_they_have_alone(
    parses: list[str], order: list[str], parsed: list[str]
) -> None:
    together = _lint(order)
    assert sorted(parses) == parsed
    assert together == {
        "data.py": [(14, 12, "TL101"), (14, 12, "TL102")],  # TL102: `xb.to(device)` in train.py
        "train.py": [(12, 15, "TL207")],  # accuracy() of data.py reads `.item()`
    }
    for name in order:
        assert _lint([name]) == {name: together[name]}


def test_a_second_run_parses_again(parses: list[str]) -> None:
    _lint(["train.py"])
    first = parses.count("train.py")
    _lint(["train.py"])
    assert parses.count("train.py") > first  # files may change between runs: a run starts with no trees


def test_a_tree_is_kept_by_file_and_text(tmp_path: Path) -> None:
    trees.forget()
    made: list[str] = []

    def parse(text: str):
        return lambda: made.append(text) or object()

    first = trees.parsed("a.py", "x = 1\n", parse("a"))
    assert trees.parsed("a.py", "x = 1\n", parse("a again")) is first
    assert trees.parsed("b.py", "x = 1\n", parse("b")) is not first  # the same text in another file
    assert trees.parsed("a.py", "x = 2\n", parse("a edited")) is not first
    assert made == ["a", "b", "a edited"]


def test_the_tree_being_linted_is_not_handed_to_another_reader() -> None:
    trees.forget()
    mine = trees.parsed("a.py", "x = 1\n", lambda: object())
    with trees.in_use("a.py", "x = 1\n"):
        assert trees.parsed("a.py", "x = 1\n", lambda: object()) is not mine
    assert trees.parsed("a.py", "x = 1\n", lambda: object()) is mine


def test_only_the_most_recent_trees_within_the_budget_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    trees.forget()
    monkeypatch.setattr(trees, "MAX_KEPT_CHARS", 10)
    a = trees.parsed("a.py", "aaaa", lambda: object())
    b = trees.parsed("b.py", "bbbb", lambda: object())
    assert trees.parsed("a.py", "aaaa", lambda: object()) is a  # a is now the most recent
    trees.parsed("c.py", "cccc", lambda: object())  # 12 characters: b, the least recent, goes
    assert trees.parsed("a.py", "aaaa", lambda: object()) is a
    assert trees.parsed("b.py", "bbbb", lambda: object()) is not b
    assert trees.parsed("d.py", "d" * 11, lambda: object()) is not trees.parsed("d.py", "d" * 11, lambda: object())



@pytest.mark.parametrize("order", [["train.py", "data.py"], ["data.py", "train.py"]], ids=["summary-then-lint", "lint-then-summary"])
def test_a_tree_walked_whole_is_not_walked_again_for_its_parents(
    parses: list[str], monkeypatch: pytest.MonkeyPatch, order: list[str]
) -> None:
    walks: list[str] = []
    real = engine._record_parents_and_imports
    monkeypatch.setattr(engine, "_record_parents_and_imports", lambda c: walks.append(Path(c.source.path).name) or real(c))
    taken: list[str] = []
    take = engine.Context.take_parents
    monkeypatch.setattr(engine.Context, "take_parents", lambda c, p: taken.append(Path(c.source.path).name) or take(c, p))
    found = _lint(order)
    assert found["train.py"] == [(12, 15, "TL207")] and (14, 12, "TL102") in found["data.py"]
    if order[0] == "train.py":
        # train.py's lint summarises data.py (a walk) and, through the callers of data.py's helpers, train.py
        # with a tree of its own (a walk: train.py is being linted); data.py's lint takes data.py's parents
        assert (walks, taken) == (["data.py", "train.py"], ["data.py"])
    else:
        # data.py's lint summarises train.py (a walk), which summarises data.py with a tree of its own (a
        # walk: data.py is being linted); train.py's lint takes the parents of its summary
        assert (walks, taken) == (["train.py", "data.py"], ["train.py"])


def test_a_walk_is_kept_only_with_the_kept_tree() -> None:
    trees.forget()
    kept = trees.parsed("a.py", "x = 1\n", lambda: cst.parse_module("x = 1\n"))
    other = cst.parse_module("x = 1\n")
    walk = trees.Walk({}, ())
    trees.keep_walk("a.py", "x = 1\n", other, walk)  # a tree of its own (parsed while a.py was linted)
    assert trees.walk_of("a.py", "x = 1\n", kept) is None
    trees.keep_walk("a.py", "x = 1\n", kept, walk)
    assert trees.walk_of("a.py", "x = 1\n", kept) is walk
    assert trees.walk_of("a.py", "x = 1\n", other) is None
