#!/usr/bin/env python3
"""What `torchlint trace` costs, and how many of the syncs it sees the static rules had found.

    python benchmarks/trace_overhead.py             # writes benchmarks/results/trace-overhead.md
    python benchmarks/trace_overhead.py --reps 5    # fewer repetitions (for development)

Each fixture script (fixtures/trace/) runs in this one process, untraced and traced, interleaved
(repetition 1 of both, then repetition 2, ...) so that a change in machine load hits both alike; the time is
the wall time of the whole script (model and data set-up included), median over the repetitions. The traced
run is the runtime part only (`lint=False`); the static pass the report merges in (linting the files that
ran) is timed on its own, once per script, as it runs once per trace whatever the program's length.
The first three fixture models are tiny (a few hundred parameters, batches of 8), so the framework's Python
overhead per operation is the whole cost of a step: the worst case for a tracer that adds work per operation.
The fourth, convnet.py, trains a small convolutional network on 32x32 images in batches of 32, steps whose
operations do real work.

The sync share comes from one traced run with the linter: of the lines where the program read an
accelerator value on the host on (more than half of) its steps, how many a static rule had reported.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import platform
import runpy
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "trace"
SCRIPTS = ("train_syncs.py", "evaluate.py", "clean.py", "convnet.py")
DEFAULT_OUTPUT = ROOT / "benchmarks" / "results" / "trace-overhead.md"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=15, help="interleaved repetitions per script (default 15)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1: steadier)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    return parser.parse_args(argv)


def run_script(path: Path, tracer=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) for one run of the script."""
    sink = io.StringIO()
    sys.argv = [str(path)]
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(sink):
        if tracer is None:
            runpy.run_path(str(path), run_name="__main__")
        else:
            with tracer:
                runpy.run_path(str(path), run_name="__main__")
    return time.perf_counter() - wall, time.process_time() - cpu


class StepsOnly:
    """Times the steps of an untraced run: the step clock alone (DataLoader and optimizer boundaries), with no
    torch function mode, no module hooks and no line tracing, so every boundary counts."""

    def __init__(self, steps: int = 0) -> None:
        from torchlint.trace.loaders import LoaderPatches
        from torchlint.trace.tracer import Tracer
        from torchlint.trace.steps import StepClock

        class AlwaysBusy(StepClock):
            busy = property(lambda self: True, lambda self, value: None)

        self.tracer = Tracer(roots=[str(FIXTURES)], lint=False)
        self.tracer.clock = AlwaysBusy()
        self.loaders = LoaderPatches(self.tracer)

    def __enter__(self):
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self.loaders.install()
        self.handle = register_optimizer_step_post_hook(lambda *args: self.tracer.clock.optimizer_stepped())
        return self

    def __exit__(self, *exc) -> None:
        self.handle.remove()
        self.loaders.remove()

    @property
    def step_median(self) -> float:
        return statistics.median(s.seconds for s in self.tracer.clock.steps)


def sync_share(report) -> dict:
    from torchlint.trace.findings import SYNC_CODES

    runtime = [t for t in report.findings if t.runtime is not None and t.runtime.family == "host-read"]
    found = [t for t in runtime if t.status == "confirmed"]
    static = [t for t in report.findings if t.finding.code in SYNC_CODES and t.status != "miss"]
    return {
        "sites": len(runtime),
        "found": len(found),
        "events": sum(t.runtime.count for t in runtime),
        "events_found": sum(t.runtime.count for t in found),
        "missed": sorted(f"{t.finding.code} line {t.finding.line}" for t in runtime if t.status == "miss"),
        "static_unconfirmed": sorted(f"{t.finding.code} line {t.finding.line} ({t.status})" for t in static
                                     if t.status != "confirmed"),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    import torchlint
    from torchlint.trace.report import build_report

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    keys = ("plain", "traced", "plain_cpu", "traced_cpu", "plain_step", "traced_step")
    times: dict[str, dict[str, list[float]]] = {s: {k: [] for k in keys} for s in SCRIPTS}
    for script in SCRIPTS:  # one untimed run of each, so that imports and first-call costs are paid
        run_script(FIXTURES / script)
        run_script(FIXTURES / script, torchlint.trace(roots=[str(FIXTURES)], lint=False))
    for _ in range(args.reps):
        for script in SCRIPTS:
            record = times[script]
            wall, cpu = run_script(FIXTURES / script)
            record["plain"].append(wall)
            record["plain_cpu"].append(cpu)
            tracer = torchlint.trace(roots=[str(FIXTURES)], lint=False)
            wall, cpu = run_script(FIXTURES / script, tracer)
            record["traced"].append(wall)
            record["traced_cpu"].append(cpu)
            record["traced_step"].append(tracer.report.steps["median_s"])
            steps_only = StepsOnly()
            run_script(FIXTURES / script, steps_only)
            record["plain_step"].append(steps_only.step_median)
    shares, lint_seconds = {}, {}
    for script in SCRIPTS:
        tracer = torchlint.trace(roots=[str(FIXTURES)], lint=False)
        run_script(FIXTURES / script, tracer)
        started = time.perf_counter()
        report = build_report(tracer, lint=True)
        lint_seconds[script] = time.perf_counter() - started
        shares[script] = sync_share(report)
    load_after = os.getloadavg()[0]

    rows = []
    for script in SCRIPTS:
        m = {k: statistics.median(v) for k, v in times[script].items()}
        share = shares[script]
        found = f"{share['found']}/{share['sites']}" if share["sites"] else "no syncs"
        rows.append(
            f"| {script} | {m['plain_step'] * 1000:.2f} | {m['traced_step'] * 1000:.2f} | "
            f"**{m['traced_step'] / m['plain_step']:.2f}x** | {m['plain'] * 1000:.1f} | {m['traced'] * 1000:.1f} | "
            f"{m['traced'] / m['plain']:.2f}x | {m['traced_cpu'] / m['plain_cpu']:.2f}x | "
            f"{lint_seconds[script]:.2f} | {found} | {share['events_found']}/{share['events']} |"
        )
    sites = sum(s["sites"] for s in shares.values())
    found = sum(s["found"] for s in shares.values())
    notes = []
    for script in SCRIPTS:
        share = shares[script]
        if share["missed"]:
            notes.append(f"- {script}: syncs no enabled rule reported: {', '.join(share['missed'])}.")
        if share["static_unconfirmed"]:
            notes.append(f"- {script}: sync findings the run did not confirm: {', '.join(share['static_unconfirmed'])}.")
    text = "\n".join([
        "# torchlint trace: overhead and sync coverage",
        "",
        f"Measured by `benchmarks/trace_overhead.py --reps {args.reps} --threads {args.threads}` on "
        f"{platform.machine()} with {os.cpu_count()} cores, Python {platform.python_version()}, torch "
        f"{torch.__version__}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; load average "
        f"{load_before:.2f} at the start and {load_after:.2f} at the end (other jobs share the machine).",
        "",
        "Medians of the interleaved repetitions. Step: the median step time, untraced (the step clock alone) "
        "and traced; this is the cost a long run pays. Script: wall time of the whole script (set-up included; "
        "traced = runtime part only, which also pays one-off costs: the first look at each source file) and the "
        "same ratio in CPU time of the process (less sensitive to other jobs). Lint + merge: the static pass "
        "over the files that ran, once per trace. Syncs found: lines that read an accelerator value on the host "
        "on most steps, and how many of them a static rule reported (events: the reads themselves).",
        "",
        "| Script | Step untraced (ms) | Step traced (ms) | Step ratio | Script untraced (ms) | Script traced (ms) "
        "| Script ratio | Script CPU ratio | Lint + merge (s) | Sync lines found by rules | Sync events found |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Across the scripts the static rules found {found} of the {sites} lines that synchronise on every step "
        f"({found / sites:.0%})." if sites else "No script synchronised on its steps.",
        *([""] + notes if notes else []),
        "",
    ])
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
