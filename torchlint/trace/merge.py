"""Static findings against what ran: confirmed, not seen, not reached; runtime findings no rule reported: misses."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from torchlint.lint.finding import FileResult, Finding
from torchlint.trace.findings import CONFIRMS, OBSERVED_CODES, RuntimeFinding, message
from torchlint.trace.lines_run import LinesRun
from torchlint.trace.source_map import statement_lines

CONFIRMED, NOT_SEEN, NOT_REACHED, NOT_OBSERVED, MISS = "confirmed", "not seen", "not reached", "not observed", "miss"
STATUSES = (CONFIRMED, NOT_SEEN, NOT_REACHED, NOT_OBSERVED, MISS)


@dataclass
class TracedFinding:
    path: str  # as shown: relative to the working directory when under it
    finding: Finding
    status: str
    runtime: Optional[RuntimeFinding] = None


def display(path: str, cwd: str) -> str:
    return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path


def _matches(finding: Finding, path: str, first: int, last: int, runtime: RuntimeFinding) -> bool:
    if finding.code not in CONFIRMS[runtime.family]:
        return False
    return any(p == path and first <= line <= last for p, line in runtime.stack[:1] + runtime.stack)


def merge(static: list[FileResult], runtime: list[RuntimeFinding], lines_run: LinesRun, cwd: str) -> list[TracedFinding]:
    merged: list[TracedFinding] = []
    used: set[int] = set()
    for result in static:
        path = os.path.realpath(os.path.join(cwd, result.path))
        for finding in result.findings:
            first, last, runs_from = statement_lines(path, finding.line)
            last = max(last, finding.end_line)
            ran = lines_run.ran(path, runs_from, last)
            if finding.code not in OBSERVED_CODES:
                merged.append(TracedFinding(result.path, finding, NOT_OBSERVED if ran else NOT_REACHED))
                continue
            hits = [i for i, r in enumerate(runtime) if _matches(finding, path, first, last, r)]
            if hits:
                used.update(hits)
                best = max((runtime[i] for i in hits), key=lambda r: r.count)
                merged.append(TracedFinding(result.path, finding, CONFIRMED, best))
            else:
                merged.append(TracedFinding(result.path, finding, NOT_SEEN if ran else NOT_REACHED))
    for i, r in enumerate(runtime):
        if i in used:
            continue
        path, line = r.site
        finding = Finding(r.code, message(r), line, 1, line, 1, line)
        merged.append(TracedFinding(display(path, cwd), finding, MISS, r))
    return sorted(merged, key=lambda t: (t.path, t.finding.line, t.finding.column, t.finding.code))
