"""`path:line:col: CODE message`, then a summary, the way ruff and flake8 print."""

from __future__ import annotations

from collections import Counter

from torchlint.lint.fix import applicable
from torchlint.lint.rule import all_rules
from torchlint.output.report import Report, location


def render(report: Report) -> str:
    lines = []
    for result, finding in report.findings():
        cell, line = location(result, finding.line)
        where = f"{result.path}:cell {cell}:{line}" if cell else f"{result.path}:{line}"
        marker = " [*]" if applicable(finding, report.unsafe_fixes) else ""
        lines.append(f"{where}:{finding.column}: {finding.code}{marker} {finding.message}")
    if report.statistics:
        lines = _statistics(report)
    if not report.quiet:
        lines.append(summary(report))
    return "".join(line + "\n" for line in lines)


def _statistics(report: Report) -> list[str]:
    rules = all_rules()
    counts = Counter(f.code for _, f in report.findings())
    fixable = {f.code for _, f in report.findings() if applicable(f, report.unsafe_fixes)}
    width = max((len(str(n)) for n in counts.values()), default=1)
    return [
        f"{n:>{width}}\t{code}\t{'[*] ' if code in fixable else ''}{rules[code].name if code in rules else ''}"
        for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def summary(report: Report) -> str:
    count, fixed = report.count, report.fixed
    parts = []
    if report.fixing and fixed:
        noun = "problem" if fixed == 1 else "problems"
        parts.append(f"Fixed {fixed} {noun} ({count} remaining).")
    elif count:
        noun = "problem" if count == 1 else "problems"
        hint = []
        safe = report.fixable(unsafe=False)
        total = report.fixable(unsafe=True)
        if report.unsafe_fixes and total:
            hint.append(f"{total} fixable with --fix --unsafe-fixes")
        else:
            if safe:
                hint.append(f"{safe} fixable with --fix")
            if total > safe:
                hint.append(f"{total - safe} more with --unsafe-fixes")
        parts.append(f"Found {count} {noun}" + (f" ({', '.join(hint)})." if hint else "."))
    elif not report.errors:
        parts.append("All checks passed!")
    if report.errors:
        n = len(report.errors)
        parts.append(f"{n} file{'s' if n != 1 else ''} could not be linted.")
    return " ".join(parts)
