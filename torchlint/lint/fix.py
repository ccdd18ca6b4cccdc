"""Applying fixes: all of a file's non-overlapping fixes at once, re-parsed, repeated until nothing changes."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Sequence

from torchlint.lint.finding import FileResult, Finding
from torchlint.lint.source import Edit, SourceFile

MAX_ROUNDS = 10


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and bool(finding.fix.edits) and (finding.fix.safe or unsafe)


def _choose(findings: Sequence[Finding], unsafe: bool, source: SourceFile, skip: set[tuple[str, int]]) -> list[Finding]:
    """Fixes whose edits overlap no edit already chosen (identical edits, such as one import, are shared)."""
    chosen: list[Finding] = []
    taken: list[Edit] = []
    for finding in sorted(findings, key=lambda f: f.sort_key):
        if not applicable(finding, unsafe) or (finding.code, finding.line) in skip:
            continue
        edits = [e.as_edit() for e in finding.fix.edits]  # type: ignore[union-attr]
        if any(source.edit_spans_cells(e) for e in edits):
            continue
        if any(_overlaps(e, t) and e != t for e in edits for t in taken):
            continue
        chosen.append(finding)
        taken.extend(e for e in edits if e not in taken)
    return chosen


def _overlaps(a: Edit, b: Edit) -> bool:
    if a.start == a.end or b.start == b.end:  # insertions collide only at the same point
        return a.start == b.start and a.end == b.end or (b.start < a.start < b.end) or (a.start < b.start < a.end)
    return a.start < b.end and b.start < a.end


def _edits_of(findings: Sequence[Finding]) -> list[Edit]:
    unique: list[Edit] = []
    for finding in findings:
        for edit in finding.fix.edits:  # type: ignore[union-attr]
            as_edit = edit.as_edit()
            if as_edit not in unique:
                unique.append(as_edit)
    return unique


def _parses(source: SourceFile) -> bool:
    import libcst as cst

    try:
        cst.parse_module(source.text)
    except Exception:
        return False
    return True


def fix_file(
    source: SourceFile, lint: Callable[[SourceFile], FileResult], unsafe: bool
) -> tuple[SourceFile, FileResult]:
    """Fix `source` until no applicable fix remains; returns the fixed source and its final lint result."""
    result = lint(source)
    fixable_before = Counter(f.code for f in result.findings if applicable(f, unsafe))
    fixed_by_code: Counter[str] = Counter()
    notes: list[str] = []
    skip: set[tuple[str, int]] = set()
    for _ in range(MAX_ROUNDS):
        chosen = _choose(result.findings, unsafe, source, skip)
        if not chosen:
            break
        candidate = source.with_edits(_edits_of(chosen))
        if not _parses(candidate):
            # Find the culprits one by one; keep the fixes that parse on their own.
            candidate = None
            for finding in chosen:
                alone = source.with_edits(_edits_of([finding]))
                if _parses(alone):
                    candidate, chosen = alone, [finding]
                    break
                skip.add((finding.code, finding.line))
                notes.append(f"fix for {finding.code} at line {finding.line} dropped: the result would not parse")
            if candidate is None:
                break
        if candidate.text == source.text:
            break
        source = candidate
        fixed_by_code.update(f.code for f in chosen)
        result = lint(source)
    result.fixed = sum(fixed_by_code.values())
    # More fixes of a rule than it had fixable findings at the start: the surplus appeared after fixing.
    result.fixed_new = sum(max(0, n - fixable_before[code]) for code, n in fixed_by_code.items())
    result.notes.extend(notes)
    return source, result
