"""From what the trace saw to runtime findings, in the linter's rule codes and words."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from torchlint.trace.events import Events
from torchlint.trace.frames import Site
from torchlint.trace.steps import StepClock

# Event kind -> (rule code, what ran, in the report's words)
HOST_READ_KINDS = {
    "item": ("TL201", "`.item()`"),
    "tolist": ("TL201", "`.tolist()`"),
    "numpy": ("TL201", "`.numpy()`"),
    "cpu": ("TL201", "a copy to the host (`.cpu()` / `.to('cpu')`)"),
    "float": ("TL202", "`float(t)`"),
    "int": ("TL202", "`int(t)`"),
    "bool": ("TL202", "`bool(t)`"),
    "condition": ("TL204", "a tensor used as a condition"),
    "format": ("TL203", "printing or formatting a tensor"),
    "nonzero": ("TL206", "`nonzero()` / `torch.where(cond)`"),
    "mask": ("TL206", "boolean-mask indexing"),
    "masked_select": ("TL206", "`masked_select`"),
    "unique": ("TL206", "`unique`"),
}
# Static rule codes each kind of runtime finding confirms (a host read confirms any synchronisation rule:
# they differ in how the code spells the read, not in what it costs).
SYNC_CODES = frozenset({"TL201", "TL202", "TL203", "TL204", "TL206", "TL207"})
CONFIRMS = {
    "host-read": SYNC_CODES,
    "forward": frozenset({"TL301", "TL305"}),
    "per-sample": frozenset({"TL401"}),
    "TL101": frozenset({"TL101"}),
    "TL102": frozenset({"TL102"}),
    "TL104": frozenset({"TL104"}),
}
OBSERVED_CODES = frozenset().union(*CONFIRMS.values())

PER_SAMPLE_MIN = 4  # launches of one op from one line on single samples, per step, that make a per-sample loop
LOADER_WAIT_SHARE = 0.2  # share of the step time spent waiting for batches...
LOADER_WAIT_PER_BATCH_S = 0.002  # ...at this much per batch at least (below it, worker processes cost more)


@dataclass
class RuntimeFinding:
    code: str
    family: str  # a key of CONFIRMS
    site: Site
    stack: tuple[Site, ...]
    detail: str  # what ran, how often
    count: int = 0  # times it happened during the traced steps
    steps_seen: int = 0  # steps in which it happened
    per_step: float = 0.0  # count / traced steps
    extra: dict = field(default_factory=dict)


def _rule_message(code: str) -> str:
    from torchlint.lint.rule import all_rules

    rule = all_rules().get(code)
    return rule.message if rule is not None else ""


def message(finding: RuntimeFinding) -> str:
    return _rule_message(finding.code)


def every_step(steps_seen: int, steps: int) -> bool:
    """Happened on (more than half of) the steps, rather than every N steps or once."""
    return steps > 0 and (steps_seen * 2 > steps if steps > 1 else steps_seen == 1)


def runtime_findings(events: Events, clock: StepClock) -> list[RuntimeFinding]:
    steps = len(clock.steps)
    found: list[RuntimeFinding] = []
    for (site, kind), seen in events.sites.items():
        counts = {s: n for s, n in seen.per_step.items() if s < steps}
        if not every_step(len(counts), steps):
            continue
        code, what = HOST_READ_KINDS[kind]
        count = sum(counts.values())
        found.append(
            RuntimeFinding(code, "host-read", site, seen.stack, f"{what} ran {count} times in {steps} steps",
                           count, len(counts), count / steps, {"kind": kind})
        )
    for site, forward in events.forwards.items():
        if forward.reached or forward.with_grad < 2:
            continue
        found.append(
            RuntimeFinding("TL301", "forward", site, forward.stack,
                           f"{forward.with_grad} forward passes built an autograd graph that no backward pass used",
                           forward.with_grad, len(forward.steps), forward.in_steps / steps if steps else 0.0)
        )
    for loop, record in events.loops.items():
        counts = {s: n for s, n in record.per_step.items() if s < steps}
        if not counts:
            continue
        (line, op), most = max(record.lines.items(), key=lambda kv: (kv[1], kv[0]))
        if most / len(counts) < PER_SAMPLE_MIN:
            continue
        total = sum(counts.values())
        found.append(
            RuntimeFinding("TL401", "per-sample", loop, record.stack,
                           f"{total} launches on single samples in {len(counts)} steps; `{op}` at line {line} "
                           f"{most / len(counts):.0f} times per step",
                           total, len(counts), total / steps, {"op": op, "line": line})
        )
    traced = sum(s.seconds for s in clock.steps)
    for loader in events.loaders:
        if loader.site is None:
            continue
        facts = (f"num_workers={loader.num_workers}, pin_memory={loader.pin_memory}, "
                 f"persistent_workers={loader.persistent_workers}")
        # The median wait, so that one slow first batch (imports, worker start) does not decide.
        per_batch = statistics.median(loader.waits) if loader.waits else 0.0
        share = min(1.0, per_batch * len(loader.waits) / traced) if traced else 0.0
        if loader.num_workers == 0 and share >= LOADER_WAIT_SHARE and per_batch >= LOADER_WAIT_PER_BATCH_S:
            found.append(RuntimeFinding("TL101", "TL101", loader.site, loader.stack,
                                        f"{facts}: steps spent {share:.0%} of their time waiting for batches "
                                        f"({per_batch * 1000:.1f} ms per batch)", loader.batches, 0, 0.0,
                                        {"data_wait_share": share}))
        if not loader.pin_memory and loader.num_workers > 0 and loader.moved:  # without workers, pinning runs in series (see TL101)
            found.append(RuntimeFinding("TL102", "TL102", loader.site, loader.stack,
                                        f"{facts}: {loader.moved} batch tensors copied to the device from "
                                        "unpinned memory", loader.moved, 0, 0.0))
        if loader.num_workers > 0 and not loader.persistent_workers and loader.passes > 1:
            found.append(RuntimeFinding("TL104", "TL104", loader.site, loader.stack,
                                        f"{facts}: worker processes started {loader.passes} times "
                                        f"({loader.passes} passes over the loader)", loader.passes, 0, 0.0))
    return sorted(found, key=lambda f: (f.site, f.code))
