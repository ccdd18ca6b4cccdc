"""The trace report as text (people), JSON (scripts) and SARIF (code scanning), built on `check`'s formats."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING

from torchlint.lint.finding import FileResult
from torchlint.output.report import Report

if TYPE_CHECKING:
    from torchlint.trace.report import TraceReport


def _check_report(report: "TraceReport") -> Report:
    """One FileResult per finding, in the report's order, so `check`'s renderers keep that order."""
    return Report([FileResult(path=t.path, findings=[t.finding]) for t in report.findings])


def _runtime_fields(traced) -> dict:
    runtime = traced.runtime
    fields = {"status": traced.status, "count": None, "per_step": None, "steps_seen": None, "detail": None}
    if runtime is not None:
        fields.update(count=runtime.count, per_step=round(runtime.per_step, 3), steps_seen=runtime.steps_seen,
                      detail=runtime.detail)
    return fields


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def text(report: "TraceReport") -> str:
    lines = []
    for t in report.findings:
        f = t.finding
        tail = f" ({t.runtime.detail})" if t.runtime is not None else ""
        lines.append(f"{t.path}:{f.line}:{f.column}: {f.code} [{t.status}] {f.message}{tail}")
    if lines:
        lines.append("")
    steps = report.steps
    if steps.get("steps"):
        stop = f", stopped after --steps {report.step_limit}" if report.stopped else ""
        lines += [
            f"Steps: {steps['steps']} traced{stop}",
            f"  step time   median {_ms(steps['median_s'])}, p90 {_ms(steps['p90_s'])}",
            f"  data wait   {steps['data_wait_share']:.0%} of step time",
            f"  host reads  {steps['host_reads_per_step']:g} per step (median)",
        ]
    else:
        lines.append("Steps: none seen (no optimizer step and no batch from a DataLoader)")
    if report.loaders:
        lines.append("DataLoaders:")
        for loader in report.loaders:
            wait = _ms(loader.wait_s / loader.batches) if loader.batches else "-"
            lines.append(
                f"  {report.loader_site(loader)}: {loader.dataset}, batch_size={loader.batch_size}, "
                f"num_workers={loader.num_workers}, pin_memory={loader.pin_memory}, "
                f"persistent_workers={loader.persistent_workers}; {_plural(loader.passes, 'pass', 'passes')}, {loader.batches} "
                f"batches, {wait} wait per batch"
            )
    counts = Counter(t.status for t in report.findings)
    summary = ", ".join(f"{counts[s]} {s if s != 'miss' else 'missed by the rules'}"
                        for s in ("confirmed", "not seen", "not reached", "not observed", "miss") if counts[s])
    lines.append(f"Trace: {summary or 'nothing found'}.")
    return "".join(line + "\n" for line in lines)


def _loader_json(report: "TraceReport") -> list[dict]:
    return [
        {
            "location": report.loader_site(loader),
            "dataset": loader.dataset,
            "batch_size": loader.batch_size,
            "num_workers": loader.num_workers,
            "pin_memory": loader.pin_memory,
            "persistent_workers": loader.persistent_workers,
            "passes": loader.passes,
            "batches": loader.batches,
            "wait_s": round(loader.wait_s, 6),
        }
        for loader in report.loaders
    ]


def json_text(report: "TraceReport") -> str:
    from torchlint.output.json_format import render

    findings = json.loads(render(_check_report(report)))
    for entry, traced in zip(findings, report.findings):
        entry.update(_runtime_fields(traced))
    document = {
        "findings": findings,
        "steps": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in report.steps.items()},
        "stopped_after_steps": report.step_limit if report.stopped else None,
        "dataloaders": _loader_json(report),
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def sarif(report: "TraceReport") -> str:
    from torchlint.output.sarif import render

    document = json.loads(render(_check_report(report)))
    run = document["runs"][0]
    for entry, traced in zip(run["results"], report.findings):
        entry["properties"] = _runtime_fields(traced)
        if traced.status not in ("confirmed", "miss"):
            entry["level"] = "note"
    run["properties"] = {"steps": report.steps, "dataloaders": _loader_json(report)}
    return json.dumps(document, indent=2) + "\n"
