"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request."""

from __future__ import annotations

from torchlint.output.report import Report


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: Report) -> str:
    lines = []
    for result, finding in report.findings():
        props = ",".join(
            [
                f"title={_escape_property('torchlint (' + finding.code + ')')}",
                f"file={_escape_property(result.path)}",
                f"line={finding.line}",
                f"col={finding.column}",
                f"endLine={finding.end_line}",
                f"endColumn={finding.end_column}",
            ]
        )
        lines.append(f"::error {props}::{_escape_data(finding.code + ' ' + finding.message)}")
    for result in report.errors:
        lines.append(f"::error title=torchlint,file={_escape_property(result.path)}::{_escape_data(result.error or '')}")
    return "\n".join(lines) + ("\n" if lines else "")
