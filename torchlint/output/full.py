"""`--output-format full` (the default, as in ruff): each finding with its source lines and the fix it offers."""

from __future__ import annotations

import difflib
from typing import Optional

from torchlint.lint.finding import FileResult, Finding
from torchlint.lint.fix import applicable
from torchlint.lint.source import Edit
from torchlint.output.report import Report, location
from torchlint.output.terminal import Painter, safe, safe_source_line
from torchlint.output.text import render as render_concise
from torchlint.output.text import summary, where

CONTEXT = 2  # source lines shown around a finding and around a fix's changes


def render(report: Report) -> str:
    if report.statistics:
        return render_concise(report)
    paint = Painter(report.color)
    blocks = []
    texts: dict[str, Optional[str]] = {}
    for result, finding in report.findings():
        if result.path not in texts:
            texts[result.path] = report.source_text(result)
        blocks.append(_finding(report, result, finding, texts[result.path], paint))
    out = "".join(blocks)
    if not report.quiet:
        out += summary(report) + "\n"
    return out


def _finding(report: Report, result: FileResult, finding: Finding, text: Optional[str], paint: Painter) -> str:
    lines = text.splitlines() if text is not None else None
    marker = " " + paint("[*]", fg="cyan") if applicable(finding, report.unsafe_fixes) else ""
    out = [f"{paint(finding.code, fg='red', bold=True)}{marker} {paint(safe(finding.message), bold=True)}"]
    width = len(str(max(finding.end_line, finding.line) + CONTEXT))
    gutter = " " * width
    out.append(f"{gutter}{paint('-->', fg='blue', bold=True)} {where(result, finding)}")
    bar = paint("|", fg="blue", bold=True)
    if lines is not None and 1 <= finding.line <= len(lines):
        out.append(f"{gutter} {bar}")
        first, last = max(1, finding.line - CONTEXT), min(len(lines), finding.line + CONTEXT)
        for number in range(first, last + 1):
            shown = safe_source_line(lines[number - 1])
            out.append(f"{_number(result, number, width, paint)} {bar} {shown}".rstrip())
            if number == finding.line:
                out.append(f"{gutter} {bar} {_underline(lines[number - 1], finding, paint)}")
        out.append(f"{gutter} {bar}")
    fix = finding.fix
    if fix is not None and fix.edits:
        out.append(f"{paint('help', fg='cyan', bold=True)}: {safe(fix.message)}")
        if text is not None:
            out.extend(_fix_diff(result, text, fix.edits, paint))
        if not fix.safe:
            out.append(f"{paint('note', bold=True)}: This is an unsafe fix and may change runtime behavior")
    return "\n".join(out) + "\n\n"


def _number(result: FileResult, line: int, width: int, paint: Painter) -> str:
    return paint(f"{location(result, line)[1]:>{width}}", fg="blue", bold=True)


def _underline(line: str, finding: Finding, paint: Painter) -> str:
    """Carets under the finding's span on its first line (to the end of the line if it goes on)."""
    start = len(safe_source_line(line[: finding.column - 1]))
    end_column = finding.end_column if finding.end_line == finding.line else len(line) + 1
    length = max(1, len(safe_source_line(line[: end_column - 1])) - start)
    return " " * start + paint("^" * length, fg="red", bold=True)


def _fix_diff(result: FileResult, text: str, edits, paint: Painter) -> list[str]:
    """The lines the fix changes, ruff-style: `-` old lines, `N +` new ones, with a little context."""
    applied = text
    for edit in sorted((e.as_edit() for e in edits), key=lambda e: (e.start, e.end), reverse=True):
        if not isinstance(edit, Edit) or edit.end > len(text):
            return []  # offsets from another version of the file (e.g. cached findings of a changed file)
        applied = applied[: edit.start] + edit.content + applied[edit.end :]
    old, new = text.splitlines(), applied.splitlines()
    width = len(str(len(new) + 1))
    gutter = " " * width
    bar = paint("|", fg="blue", bold=True)
    out = [f"{gutter} {bar}"]
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(CONTEXT):
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(f"{_number(result, j + 1, width, paint)} {bar} {safe_source_line(new[j])}".rstrip() for j in range(j1, j2))
                continue
            out.extend(f"{gutter} {paint('-', fg='red')} {paint(safe_source_line(old[i]), fg='red')}".rstrip() for i in range(i1, i2))
            out.extend(
                f"{_number(result, j + 1, width, paint)} {paint('+', fg='green')} {paint(safe_source_line(new[j]), fg='green')}".rstrip()
                for j in range(j1, j2)
            )
    out.append(f"{gutter} {bar}")
    return out
