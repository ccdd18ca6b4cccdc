"""A trace's report: the merged findings, the step-time table and the DataLoaders, in three formats."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchlint.trace.events import LoaderRecord
from torchlint.trace.merge import TracedFinding, display, merge

if TYPE_CHECKING:
    from torchlint.trace.tracer import Tracer


@dataclass
class TraceReport:
    findings: list[TracedFinding]
    steps: dict  # StepClock.summary()
    step_limit: int
    stopped: bool  # the program was stopped after `step_limit` steps
    loaders: list[LoaderRecord] = field(default_factory=list)
    linted: list[str] = field(default_factory=list)
    cwd: str = ""

    def by_status(self, status: str) -> list[TracedFinding]:
        return [f for f in self.findings if f.status == status]

    def render(self, output_format: str = "text") -> str:
        from torchlint.trace import render

        return {"text": render.text, "json": render.json_text, "sarif": render.sarif}[output_format](self)

    def __str__(self) -> str:
        return self.render("text")

    def loader_site(self, loader: LoaderRecord) -> str:
        if loader.site is None:
            return "?"
        return f"{display(loader.site[0], self.cwd)}:{loader.site[1]}"


def build_report(tracer: "Tracer", lint: bool = True) -> TraceReport:
    from torchlint.trace.findings import runtime_findings

    runtime = runtime_findings(tracer.events, tracer.clock)
    cwd = tracer.cwd
    files = [display(path, cwd) for path in tracer.lines_run.files()]
    static: list[Any] = []
    if lint and files:
        from torchlint.lint.api import lint_paths

        here = os.getcwd()
        os.chdir(cwd)  # the program may have moved; find the configuration from where the trace began
        try:
            static = [r for r in lint_paths(files, jobs=1) if not r.error]
        finally:
            os.chdir(here)
    return TraceReport(
        findings=merge(static, runtime, tracer.lines_run, cwd),
        steps=tracer.clock.summary(),
        step_limit=tracer.clock.limit,
        stopped=tracer.clock.stopped,
        loaders=list(tracer.events.loaders),
        linted=files,
        cwd=cwd,
    )
