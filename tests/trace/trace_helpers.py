"""Running the trace fixtures in this process, and reading their reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "trace"


def trace_fixture(name: str, *args: str, steps: int = 0, lint: bool = True):
    """(report, exit code) of `torchlint trace --steps N -- python fixtures/trace/NAME ARGS`, in-process."""
    from torchlint.trace.runner import parse_command, run_program
    from torchlint.trace.tracer import Tracer

    program = parse_command(["python", str(FIXTURES / name), *args])
    tracer = Tracer(steps=steps, roots=[program.root], lint=lint)

    def traced(run) -> None:
        with tracer:
            run()

    code = run_program(program, traced)
    return tracer.report, code


def at(report, line: int, code: Optional[str] = None) -> list:
    """The report's findings at `line` (the static finding's line, or the runtime site for a miss)."""
    return [t for t in report.findings if t.finding.line == line and (code is None or t.finding.code == code)]


def torchlint_cli(*args: str, cwd: Path = ROOT, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "torchlint", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=300)
