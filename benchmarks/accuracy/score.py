"""Precision and recall of the linter against the hand-judged labels, per rule and per family.

Runs ``torchlint check`` (default rule selection) over each materialised repository of the chosen
split and matches its findings to every ``labels*.csv`` next to this script:

- a label whose rule is a code matches a finding at the same (repo, path, line, rule), or of a rule split
  off that code (SPLIT_FROM: TL406 and TL407 were part of TL401 when its labels were written);
  a label whose rule is a family letter (A..E) matches any finding of that family at (repo, path, line);
- a TP or FN label counts as TP when it is reported now and as FN when it is not;
- an FP label counts as FP when it is reported now (and as "FP gone" when it is not);
- findings with no label for their rule or family are "unjudged" and kept out of precision.

    python benchmarks/accuracy/score.py [--split tune|test|all] [--show-unjudged] [--show-errors [FAMILY]]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT_ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from materialise import corpus_name, read_repos  # noqa: E402

LABEL_COLUMNS = ("repo", "commit", "path", "line", "rule", "verdict", "reason")
VERDICTS = ("TP", "FP", "FN")
# The five mission families; every other rule is judged as "other" (no misses hunted).
FAMILY_RULES = {
    "A": ("TL401", "TL406", "TL407"),
    "B": ("TL301", "TL305"),
    "C": ("TL101", "TL107"),
    "D": ("TL102", "TL103"),
    "E": ("TL201", "TL202", "TL203", "TL204", "TL205", "TL206", "TL207"),
}
# Codes split off an older rule: a label written for the older code is matched by their findings too.
SPLIT_FROM = {"TL406": "TL401", "TL407": "TL401"}
FAMILY_NAMES = {
    "A": "per-sample loops",
    "B": "inference with autograd on",
    "C": "loading in the main process",
    "D": "unpinned memory / blocking copies",
    "E": "host-device syncs per step",
    "other": "other rules (findings judged, misses not hunted)",
}
RULE_CODE = re.compile(r"TL\d{3}")
LINE = re.compile(r"\d+|cell \d+:\d+")


def family_of(rule: str) -> str:
    """The family letter of a rule code (or of a family letter itself); "other" outside A..E."""
    if rule in FAMILY_RULES:
        return rule
    for letter, codes in FAMILY_RULES.items():
        if rule in codes:
            return letter
    return "other"


@dataclass(frozen=True)
class Label:
    repo: str
    path: str
    line: str
    rule: str  # a code such as TL201, or a family letter A..E
    verdict: str
    reason: str = ""


@dataclass(frozen=True)
class Finding:
    repo: str
    path: str
    line: str  # "12", or "cell 3:4" in a notebook, as the linter prints it
    code: str


def read_labels(folder: Path, commits: dict[str, str]) -> list[Label]:
    """Every row of every labels*.csv; bad rows stop with a one-line error naming file and line."""
    labels: list[Label] = []
    seen: dict[tuple[str, str, str, str], str] = {}
    for path in sorted(folder.glob("labels*.csv")):
        with path.open(newline="", encoding="utf-8") as handle:
            numbered = [(n, line) for n, line in enumerate(handle, start=1) if not line.startswith("#")]
        if not numbered:
            raise SystemExit(f"{path}: error: no CSV header")
        reader = csv.reader(line for _, line in numbered)
        header = tuple(next(reader))
        if header != LABEL_COLUMNS:
            raise SystemExit(f"{path}:{numbered[0][0]}: error: header must be {','.join(LABEL_COLUMNS)}")
        for (number, _), row in zip(numbered[1:], reader):
            if not row:
                continue
            where = f"{path}:{number}"
            if len(row) != len(LABEL_COLUMNS):
                raise SystemExit(f"{where}: error: expected {len(LABEL_COLUMNS)} fields, got {len(row)}")
            repo, commit, file, line, rule, verdict, reason = row
            if repo not in commits:
                raise SystemExit(f"{where}: error: {repo} is not in any repos*.csv")
            if commit != commits[repo]:
                raise SystemExit(f"{where}: error: commit {commit} is not the pinned {commits[repo]}")
            if not LINE.fullmatch(line):
                raise SystemExit(f"{where}: error: line {line!r} is neither a number nor 'cell N:M'")
            if not (RULE_CODE.fullmatch(rule) or rule in FAMILY_RULES):
                raise SystemExit(f"{where}: error: rule {rule!r} is neither a TL code nor a family A..E")
            if verdict not in VERDICTS:
                raise SystemExit(f"{where}: error: verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
            key = (repo, file, line, rule)
            if key in seen:
                raise SystemExit(f"{where}: error: {repo} {file}:{line} {rule} already labelled at {seen[key]}")
            seen[key] = where
            labels.append(Label(repo, file, line, rule, verdict, reason))
    return labels


def parse_findings(repo: str, root: Path, report: list[dict]) -> list[Finding]:
    """Findings from the linter's JSON output, with paths relative to the repository root."""
    findings = []
    for item in report:
        if not item.get("code"):  # a file the linter could not parse; it says so on stderr
            continue
        path = Path(item["filename"])
        relative = (path if not path.is_absolute() else path.relative_to(root.resolve())).as_posix()
        row = item["location"]["row"]
        line = f"cell {item['cell']}:{row}" if item.get("cell") else str(row)
        findings.append(Finding(repo, relative, line, item["code"]))
    return findings


EXTEND_SELECT: list[str] = []  # rules off by default to score too (--extend-select)


def run_linter(repo: str, root: Path) -> list[Finding]:
    """Lint one materialised repository with this checkout's torchlint, every default rule."""
    paths = [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))
    command = [sys.executable, "-m", "torchlint", "check", "--output-format", "json", "--no-cache", "--exit-zero",
               *(f"--extend-select={code}" for code in EXTEND_SELECT), "."]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{root}: error: torchlint exited {done.returncode}: {done.stderr.strip()[-300:]}")
    for problem in done.stderr.splitlines():
        print(f"{repo}: {problem}", file=sys.stderr)
    return parse_findings(repo, root, json.loads(done.stdout or "[]"))


@dataclass
class Tally:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    fp_gone: int = 0
    unjudged: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


@dataclass
class Score:
    by_rule: dict[str, Tally]
    by_family: dict[str, Tally]
    five_families: Tally  # A..E, where misses were hunted
    total: Tally  # every rule; its recall means little, as misses of other rules are not hunted
    unjudged: list[Finding]
    errors: list[Label]  # FN labels still missed and FP labels still reported


def score(labels: list[Label], findings: list[Finding]) -> Score:
    """Match labels to findings and count, per rule (or family letter) and per family."""
    findings = sorted(set(findings), key=lambda f: (f.repo, f.path, f.line, f.code))  # one per (line, rule)
    codes_at: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for f in findings:
        codes_at[(f.repo, f.path, f.line)].add(f.code)

    by_rule: dict[str, Tally] = defaultdict(Tally)
    errors: list[Label] = []
    judged: set[tuple[str, str, str, str]] = set()  # findings covered by a label
    for label in labels:
        place = (label.repo, label.path, label.line)
        if label.rule in FAMILY_RULES:
            matched = sorted(c for c in codes_at.get(place, ()) if family_of(c) == label.rule)
        else:
            matched = sorted(c for c in codes_at.get(place, ()) if label.rule in (c, SPLIT_FROM.get(c)))
        judged.update((*place, code) for code in matched)
        # A family-letter label that is reported now counts under the rule that reports it.
        tally = by_rule[matched[0] if matched else label.rule]
        if label.verdict == "FP":
            if matched:
                tally.fp += 1
                errors.append(label)
            else:
                tally.fp_gone += 1
        elif matched:
            tally.tp += 1
        else:
            tally.fn += 1
            errors.append(Label(label.repo, label.path, label.line, label.rule, "FN", label.reason))

    unjudged = [f for f in findings if (f.repo, f.path, f.line, f.code) not in judged]
    for f in unjudged:
        by_rule[f.code].unjudged += 1

    by_family: dict[str, Tally] = defaultdict(Tally)
    five_families, total = Tally(), Tally()
    for rule, tally in by_rule.items():
        family = family_of(rule)
        for into in (by_family[family], total, *([five_families] if family in FAMILY_RULES else [])):
            into.tp += tally.tp
            into.fp += tally.fp
            into.fn += tally.fn
            into.fp_gone += tally.fp_gone
            into.unjudged += tally.unjudged
    return Score(dict(by_rule), dict(by_family), five_families, total, unjudged, errors)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


NOT_HUNTED = "not hunted"


def table(first: str, rows: list[tuple[str, Tally, bool]]) -> list[str]:
    """Markdown rows; recall is shown only where misses were hunted."""
    lines = [f"| {first} | TP | FP | FN | precision | recall | unjudged | FP gone |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, t, hunted in rows:
        recall = percent(t.recall) if hunted else NOT_HUNTED
        lines.append(f"| {name} | {t.tp} | {t.fp} | {t.fn} | {percent(t.precision)} | {recall} "
                     f"| {t.unjudged} | {t.fp_gone} |")
    return lines


def render(result: Score, split: str, repos: int, labels: int) -> str:
    def rule_order(rule: str) -> tuple[int, str]:
        return (0 if RULE_CODE.fullmatch(rule) else 1, rule)

    rule_rows = []
    for rule in sorted(result.by_rule, key=rule_order):
        name = rule if RULE_CODE.fullmatch(rule) else f"{rule} (family, no single rule)"
        family = family_of(rule)
        rule_rows.append((f"{name} [{family}]", result.by_rule[rule], family in FAMILY_RULES))
    family_rows = [(f"{fam}: {FAMILY_NAMES[fam]}", result.by_family[fam], fam in FAMILY_RULES)
                   for fam in [*FAMILY_RULES, "other"] if fam in result.by_family]
    family_rows.append(("**families A-E**", result.five_families, True))
    family_rows.append(("**all rules**", result.total, False))
    out = [f"Split: {split} ({repos} repositories, {labels} labels)", "", "Per family:", "",
           *table("family", family_rows), "", "Per rule:", "", *table("rule [family]", rule_rows)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("tune", "test", "all"), default="tune")
    parser.add_argument("--corpus", type=Path, default=HERE / "corpus", help="materialised repositories")
    parser.add_argument("--repo", action="append", default=[], metavar="TEXT",
                        help="score only repositories whose owner/name contains TEXT (repeatable)")
    parser.add_argument("--extend-select", action="append", default=[], metavar="CODE",
                        help="also run a rule that is off by default (repeatable)")
    parser.add_argument("--show-unjudged", action="store_true", help="list every unjudged finding")
    parser.add_argument("--show-errors", metavar="FAMILY", nargs="?", const="all",
                        help="list the misses and false positives that stand, of one family (A..E, other) or all")
    args = parser.parse_args(argv)
    EXTEND_SELECT.extend(args.extend_select)

    repos = [r for r in read_repos(HERE) if args.split in ("all", r["split"])]
    if args.repo:
        repos = [r for r in repos if any(text in r["repo"] for text in args.repo)]
    labels = read_labels(HERE, {r["repo"]: r["commit"] for r in read_repos(HERE)})
    findings: list[Finding] = []
    scored: set[str] = set()
    for row in repos:
        root = args.corpus / corpus_name(row["repo"])
        if not root.is_dir():
            print(f"skipped {row['repo']}: not materialised (run materialise.py)", file=sys.stderr)
            continue
        findings.extend(run_linter(row["repo"], root))
        scored.add(row["repo"])
    labels = [label for label in labels if label.repo in scored]
    result = score(labels, findings)
    print(render(result, args.split, len(scored), len(labels)))
    if args.show_errors:
        print(f"\nMisses and false positives ({args.show_errors}):")
        for label in result.errors:
            if args.show_errors in ("all", family_of(label.rule)):
                print(f"  {label.verdict} {label.rule} {label.repo} {label.path}:{label.line}  {label.reason}")
    if args.show_unjudged:
        print("\nUnjudged findings:")
        for f in result.unjudged:
            print(f"  {f.repo} {f.path}:{f.line} {f.code}")
    else:
        counts = Counter(f.code for f in result.unjudged)
        by_code = ", ".join(f"{code} {n}" for code, n in sorted(counts.items()))
        print(f"\n{len(result.unjudged)} unjudged findings ({by_code}); --show-unjudged lists them.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
