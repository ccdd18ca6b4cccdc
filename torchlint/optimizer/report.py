"""The record of what `optimize` did: every rewrite, where and why, and everything it left alone and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

# What an entry says happened.
REWROTE = "rewrote"  # a pass changed the model here
SKIPPED = "skipped"  # a pass looked here and chose not to change anything, for the reason given
REFUSED = "refused"  # a whole pass did not run (eval-only pass on a model in training mode, unsupported device...)
ROLLED_BACK = "rolled back"  # a pass failed or changed the results, so it was undone
VERIFIED = "verified"  # the model after a pass matched the original within tolerance
NOT_TRACED = "not traced"  # torch.fx could not trace this module; its traceable children were optimized instead
TRACED = "traced"  # this module was traced and optimized as one graph
NOTE = "note"  # anything else worth knowing (no example inputs, so no verification, ...)
MEASURED = "measured"  # a group of passes was timed against the model before it and kept

# How the one-line-per-pass summary counts each pass's rewrites.
UNITS = {
    "remove_dropout": "layers removed",
    "fold_batchnorm": "BatchNorm layers folded",
    "onednn_fusion": "layers fused",
    "inplace_activations": "activations in place",
}


@dataclass(frozen=True)
class Entry:
    pass_name: str
    action: str
    where: str
    detail: str


@dataclass
class Report:
    """What `torchlint.optimize` did to a model.

    `entries` lists every decision in order. `rewrites`, `skipped`, `rolled_back`, `untraced` filter it;
    `max_error` maps each verified pass to the largest relative output error measured after it;
    `speedup` is the measured speed-up over the model as given (None when not measured).
    `str(report)` gives a summary line and one line per pass; `report.format(verbose=True)` adds every
    decision, layer by layer, as a table.
    """

    entries: list[Entry] = field(default_factory=list)
    max_error: dict[str, float] = field(default_factory=dict)
    rtol: float | None = None
    atol: float | None = None
    mode: str = "eval"
    device: str = "cpu"
    transform_seconds: float = 0.0
    speedup: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # where the transform time went, by phase
    speedup_over: str = "the model as given"  # what `speedup` was measured against

    def spend(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def add(self, pass_name: str, action: str, where: str, detail: str) -> None:
        self.entries.append(Entry(pass_name, action, where or "<root>", detail))

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def filter(self, action: str | None = None, pass_name: str | None = None) -> list[Entry]:
        return [
            e
            for e in self.entries
            if (action is None or e.action == action) and (pass_name is None or e.pass_name == pass_name)
        ]

    @property
    def rewrites(self) -> list[Entry]:
        return self.filter(REWROTE)

    @property
    def skipped(self) -> list[Entry]:
        return self.filter(SKIPPED) + self.filter(REFUSED)

    @property
    def rolled_back(self) -> list[Entry]:
        return self.filter(ROLLED_BACK)

    @property
    def untraced(self) -> list[Entry]:
        return self.filter(NOT_TRACED)

    @property
    def passes_applied(self) -> list[str]:
        """Passes that changed the model and were kept, in the order they ran."""
        undone = {e.pass_name for e in self.rolled_back}
        seen: list[str] = []
        for e in self.rewrites:
            if e.pass_name not in undone and e.pass_name not in seen:
                seen.append(e.pass_name)
        return seen

    def summary(self) -> str:
        undone = {e.pass_name for e in self.rolled_back}
        kept = [e for e in self.rewrites if e.pass_name not in undone]
        parts = [
            _count(len(kept), "rewrite") + " kept",
            f"{len(self.skipped)} skipped",
            _count(len(undone), "pass", "passes") + " rolled back",
            _count(len(self.untraced), "module") + " not traced",
        ]
        if self.max_error:
            worst = max(self.max_error.values())
            parts.append(f"max relative error {worst:.2e} (rtol {self.rtol:.0e})")
        elif kept:
            parts.append("not verified")
        if self.speedup is not None:
            versus = "" if self.speedup_over == "the model as given" else f" than {self.speedup_over}"
            parts.insert(0, f"{self.speedup:.2f}x faster{versus} (measured)")
        return f"torchlint.optimize ({self.mode}, {self.device}, {self.transform_seconds:.2f} s): " + ", ".join(parts)

    def pass_lines(self) -> list[str]:
        """One line per pass that did something (its count of rewrites), was rolled back or refused (why), then
        the modules not traced, the verification, the timing and the notes."""
        lines = []
        undone = {e.pass_name: e.detail for e in self.rolled_back}
        names = list(dict.fromkeys(e.pass_name for e in self.entries if e.action in (REWROTE, ROLLED_BACK, REFUSED)))
        for name in names:
            if name in undone:
                lines.append(f"{name}: rolled back: {undone[name]}")
                continue
            rewrites = [e for e in self.rewrites if e.pass_name == name]
            refused = self.filter(REFUSED, name)
            if refused and not rewrites:
                lines.append(f"{name}: refused: {refused[0].detail}")
            elif len(rewrites) == 1 and name not in UNITS:
                lines.append(f"{name}: {rewrites[0].detail}")
            elif rewrites:
                lines.append(f"{name}: {len(rewrites)} {UNITS.get(name, 'rewrites')}")
        lines += [f"not traced: {e.where}: {e.detail}" for e in self.untraced]
        lines += [f"verified: {e.detail}" for e in self.filter(VERIFIED, "verify")]
        lines += [f"measured: {e.detail}" for e in self.filter(MEASURED)]
        lines += [f"note: {e.detail}" for e in self.filter(NOTE)]
        if self.seconds:
            lines.append("time: " + ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in self.seconds.items()))
        return lines

    def format(self, verbose: bool = False) -> str:
        lines = [self.summary()] + ["  " + line for line in self.pass_lines()]
        if verbose:
            lines += ["", self.table()]
        return "\n".join(lines)

    def table(self) -> str:
        """Every decision, in order, as a table: pass, action, where, detail."""
        header = ("pass", "action", "where", "detail")
        rows = [(e.pass_name, e.action, e.where, e.detail) for e in self.entries]
        widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(3)]
        fmt = "{:<%d}  {:<%d}  {:<%d}  {}" % tuple(widths)
        lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths), "-" * len(header[3]))]
        lines += [fmt.format(*row) for row in rows]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "summary": self.summary(),
            "mode": self.mode,
            "device": self.device,
            "rtol": self.rtol,
            "atol": self.atol,
            "transform_seconds": self.transform_seconds,
            "seconds": dict(self.seconds),
            "speedup": self.speedup,
            "speedup_over": self.speedup_over,
            "max_error": dict(self.max_error),
            "entries": [e.__dict__.copy() for e in self.entries],
        }

    def __str__(self) -> str:
        return self.format()

    __repr__ = summary


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"
