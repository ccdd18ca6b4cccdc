"""`--output-format concise`: `path:line:col: CODE message`, one line a finding, then a summary (as ruff)."""

from __future__ import annotations

from torchlint.lint.finding import FileResult, Finding
from torchlint.lint.fix import applicable
from torchlint.output.report import Report, location
from torchlint.output.terminal import Painter, safe


def where(result: FileResult, finding: Finding) -> str:
    """`path:line:col`, or `path:cell N:line:col` in a notebook (the path escaped for the terminal)."""
    cell, line = location(result, finding.line)
    path = safe(result.path)
    return f"{path}:cell {cell}:{line}:{finding.column}" if cell else f"{path}:{line}:{finding.column}"


def render(report: Report) -> str:
    paint = Painter(report.color)
    lines = []
    if report.statistics:
        lines = statistics(report)
    else:
        for result, finding in report.findings():
            marker = " " + paint("[*]", fg="cyan") if applicable(finding, report.unsafe_fixes) else ""
            code = paint(finding.code, fg="red", bold=True)
            lines.append(f"{paint(where(result, finding), bold=True)}: {code}{marker} {safe(finding.message)}")
    if not report.quiet:
        lines.append(summary(report))
    return "".join(line + "\n" for line in lines)


def statistics(report: Report) -> list[str]:
    """ruff's table: count, code, `[*]` all fixable / `[-]` some / `[ ]` none (with the fixes enabled), name."""
    from torchlint.output.names import rule_name

    rows = report.statistics_rows()
    count_width = max((len(str(n)) for _, n, _ in rows), default=1)
    code_width = max((len(code) for code, _, _ in rows), default=1)
    lines = []
    for code, count, fixable in rows:
        mark = "[*]" if fixable == count else "[-]" if fixable else "[ ]"
        lines.append(f"{count:>{count_width}}\t{code:<{code_width}}\t{mark} {rule_name(code)}")
    return lines


def summary(report: Report) -> str:
    count, fixed = report.count, report.fixed
    parts = []
    if report.fixing and fixed:
        found_later = report.found_by_fixes
        before = fixed - found_later
        parts.append(f"Fixed {before} {'problem' if before == 1 else 'problems'}")
        if found_later:
            parts[-1] += f"; {found_later} found by the fixes and fixed too"
        parts[-1] += f" ({count} remaining)."
    elif count:
        noun = "problem" if count == 1 else "problems"
        hint = []
        safe_fixes = report.fixable(unsafe=False)
        total = report.fixable(unsafe=True)
        if report.unsafe_fixes and total:
            hint.append(f"{total} fixable with --fix --unsafe-fixes")
        else:
            if safe_fixes:
                hint.append(f"{safe_fixes} fixable with --fix")
            if total > safe_fixes:
                hint.append(f"{total - safe_fixes} more with --unsafe-fixes")
        parts.append(f"Found {count} {noun}" + (f" ({', '.join(hint)})." if hint else "."))
    elif not report.errors:
        parts.append("All checks passed!")
    if report.errors:
        n = len(report.errors)
        parts.append(f"{n} file{'s' if n != 1 else ''} could not be linted.")
    return " ".join(parts)
