"""A JSON array in the shape of ruff's `--output-format json` (and of its `--statistics` in JSON)."""

from __future__ import annotations

import json

from torchlint.lint.finding import SYNTAX_ERROR
from torchlint.lint.rule import rule_url
from torchlint.output.names import rule_name
from torchlint.output.report import Report, absolute, location


def _point(row: int, column: int) -> dict[str, int]:
    return {"row": row, "column": column}


def _cell_point(result, row: int, column: int) -> dict[str, int]:
    return _point(location(result, row)[1], column)


def _statistics(report: Report) -> str:
    rows = [
        {"code": code, "name": rule_name(code), "count": count, "fixable": fixable == count, "fixable_count": fixable}
        for code, count, fixable in report.statistics_rows()
    ]
    return json.dumps(rows, indent=2) + "\n"


def render(report: Report) -> str:
    if report.statistics:
        return _statistics(report)
    out = []
    for result, finding in report.findings():
        cell, _ = location(result, finding.line)
        syntax_error = finding.code == SYNTAX_ERROR
        fix = None
        if finding.fix is not None:
            fix = {
                "applicability": "safe" if finding.fix.safe else "unsafe",
                "message": finding.fix.message,
                "edits": [
                    {
                        "content": e.content,
                        "location": _cell_point(result, e.row, e.column),
                        "end_location": _cell_point(result, e.end_row, e.end_column),
                    }
                    for e in finding.fix.edits
                ],
            }
        out.append(
            {
                "cell": cell,
                "code": finding.code,
                "end_location": _cell_point(result, finding.end_line, finding.end_column),
                "filename": absolute(result.path),
                "fix": fix,
                "location": _cell_point(result, finding.line, finding.column),
                "message": finding.message,
                "name": rule_name(finding.code),
                "noqa_row": None if syntax_error else location(result, finding.noqa_line)[1],
                "severity": "error",
                "url": None if syntax_error else rule_url(finding.code),
            }
        )
    for result in report.errors:
        out.append(
            {
                "cell": None,
                "code": None,
                "end_location": _point(1, 1),
                "filename": absolute(result.path),
                "fix": None,
                "location": _point(1, 1),
                "message": result.error,
                "name": None,
                "noqa_row": None,
                "severity": "error",
                "url": None,
            }
        )
    return json.dumps(out, indent=2, sort_keys=True) + "\n"
