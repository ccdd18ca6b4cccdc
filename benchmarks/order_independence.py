"""Findings must not depend on which rules run: lint every file with all default rules, then with each rule
alone, and list every (file, rule) whose findings differ between the two.

    PYTHONPATH=. python benchmarks/order_independence.py fixtures/lint /path/to/corpus/some_repo [--jobs 2]

A rule's findings on a file can only differ when the semantic model remembers an answer that depends on
which question was asked first (a cycle cut in a recursive question). Each file is parsed once and linted
once per selection, each time with a fresh model and no project summaries left from the previous run, so
only the selection differs. Exit status 1 when some pair differs.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Iterable, Optional

HERE = Path(__file__).resolve().parent
# Folders of the held-out split: never linted here.
_HELD_OUT_LISTS = ("repos_part3.csv", "repos_part4.csv")

Key = tuple[int, int, str, str]  # line, column, code, message


def held_out_folders() -> set[str]:
    names: set[str] = set()
    for name in _HELD_OUT_LISTS:
        path = HERE / "accuracy" / name
        if path.is_file():
            with open(path, newline="") as handle:
                names.update(row["repo"].replace("/", "__") for row in csv.DictReader(handle))
    return names


def default_codes() -> list[str]:
    """The default rules, less the unused-`noqa` check: which directives it reports depends on the
    selection by design (a directive for a rule that does not run is not judged)."""
    from torchlint.config import select_rules
    from torchlint.lint.engine import UNUSED_NOQA

    return [rule.code for rule in select_rules((), (), ()) if rule.code != UNUSED_NOQA]


def _fresh_run() -> None:
    """Forget what earlier lints left in this process (project layout and other files' summaries)."""
    from torchlint.semantic import project

    project.new_run()
    for summary in project._SUMMARIES.values():
        if summary is not None:
            summary.release()
    project._SUMMARIES.clear()


def findings_by_selection(path: str, codes: list[str]) -> dict[str, dict[str, set[Key]]]:
    """{selection: {rule: findings}} for one file: selection "ALL" (every code in `codes`) and each code alone."""
    from torchlint.config import select_rules
    from torchlint.lint import engine
    from torchlint.lint.runner import _lint_source
    from torchlint.lint.source import read_source

    source = read_source(path)
    parse = engine.parse
    tree = {}

    def parse_once(src):  # one parse for every selection: the tree is never changed by linting
        if src.text not in tree:
            tree.clear()
            tree[src.text] = parse(src)
        return tree[src.text]

    engine.parse = parse_once
    out: dict[str, dict[str, set[Key]]] = {}
    try:
        for selection in ["ALL", *codes]:
            rules = select_rules(tuple(codes) if selection == "ALL" else (selection,), (), ())
            _fresh_run()
            result = _lint_source(source, rules, 0)  # no time limit: the benchmark compares findings
            found: dict[str, set[Key]] = {}
            for f in result.findings:
                found.setdefault(f.code, set()).add((f.line, f.column, f.code, f.message))
            if result.error:
                found.setdefault("error", set()).add((0, 0, "error", result.error))
            out[selection] = found
    finally:
        engine.parse = parse
    return out


def differences(path: str, codes: list[str]) -> list[tuple[str, str, set[Key], set[Key]]]:
    """(file, rule, only with all rules, only alone) for each rule whose findings on `path` differ."""
    from torchlint.lint.source import SourceError

    try:
        runs = findings_by_selection(path, codes)
    except SourceError:
        return []  # unreadable: the same under every selection
    together = runs["ALL"]
    found = []
    for code in codes:
        a, b = together.get(code, set()), runs[code].get(code, set())
        if a != b:
            found.append((path, code, a - b, b - a))
    return found


def _files(paths: Iterable[str], held_out: set[str]) -> list[str]:
    files: list[str] = []
    for root in paths:
        parts = set(Path(root).resolve().parts)
        if parts & held_out:
            print(f"{root}: held-out split folder, skipped", file=sys.stderr)
            continue
        if os.path.isfile(root):
            files.append(root)
            continue
        for directory, folders, names in os.walk(root):
            folders[:] = sorted(f for f in folders if not f.startswith(".") and f not in held_out)
            files.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith((".py", ".ipynb")))
    return files


def _work(args: tuple[str, list[str]]) -> list[tuple[str, str, set[Key], set[Key]]]:
    return differences(*args)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="files or folders to lint")
    parser.add_argument("--jobs", "-j", type=int, default=1)
    parser.add_argument("--select", help="comma-separated rule codes (default: every default rule)")
    parser.add_argument("--quiet", "-q", action="store_true", help="counts only, no findings")
    args = parser.parse_args(argv)

    codes = args.select.split(",") if args.select else default_codes()
    files = _files(args.paths, held_out_folders())
    started = time.perf_counter()
    pairs = []
    with ProcessPoolExecutor(args.jobs) if args.jobs > 1 else _InProcess() as pool:
        # printed as each file is done, so that a run cut short still tells what it found
        for done, per_file in enumerate(pool.map(_work, [(f, codes) for f in files], chunksize=1), 1):
            print(f"{done}/{len(files)} {files[done - 1]}", file=sys.stderr, flush=True)
            for path, code, only_all, only_alone in per_file:
                print(f"{path}: {code}: {len(only_all)} only with all rules, {len(only_alone)} only alone", flush=True)
                if not args.quiet:
                    for line, column, _, message in sorted(only_all):
                        print(f"    all   {line}:{column} {message}", flush=True)
                    for line, column, _, message in sorted(only_alone):
                        print(f"    alone {line}:{column} {message}", flush=True)
            pairs.extend(per_file)
    print(
        f"{len(files)} files x {len(codes)} rules: {len(pairs)} (file, rule) pairs differ "
        f"in {len({p[0] for p in pairs})} files ({time.perf_counter() - started:.0f} s)"
    )
    return 1 if pairs else 0


class _InProcess:
    """`map` in this process (one job), with the pool's interface."""

    def __enter__(self) -> "_InProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, function, items, chunksize=1):
        return map(function, items)


if __name__ == "__main__":
    sys.exit(main())
