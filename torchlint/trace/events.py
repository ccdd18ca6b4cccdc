"""What the trace saw, counted by source line and by step."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from torchlint.trace.frames import Site


@dataclass
class SiteEvents:
    """One kind of event at one line of the user's code."""

    kind: str  # e.g. "item", "bool-condition", "nonzero", "forward-without-backward"
    site: Site
    stack: tuple[Site, ...] = ()  # the user's frames when it first happened, innermost first
    outside_steps: int = 0  # times it happened before the first step or after the last
    per_step: Counter = field(default_factory=Counter)  # step index -> times

    def add(self, step: Optional[int], stack: tuple[Site, ...]) -> None:
        if not self.stack:
            self.stack = stack
        if step is None:
            self.outside_steps += 1
        else:
            self.per_step[step] += 1

    @property
    def in_steps(self) -> int:
        return sum(self.per_step.values())


@dataclass
class ForwardSite:
    """Forward passes launched from one line with autograd on, and how many a backward pass reached."""

    site: Site
    stack: tuple[Site, ...]
    with_grad: int = 0
    reached: int = 0
    in_steps: int = 0
    steps: set = field(default_factory=set)


@dataclass
class LoaderRecord:
    """A DataLoader the program built, and how it was used."""

    site: Optional[Site]
    stack: tuple[Site, ...]
    num_workers: int
    pin_memory: bool
    persistent_workers: bool
    batch_size: Optional[int]
    dataset: str
    passes: int = 0  # times iterated (epochs)
    batches: int = 0
    wait_s: float = 0.0
    waits: list = field(default_factory=list)  # seconds per batch
    moved: int = 0  # batch tensors copied with .to(device) / .cuda()


@dataclass
class SampleLoop:
    """Launches on single samples of a batch from one loop, per step."""

    loop: Site  # the loop statement
    stack: tuple[Site, ...]
    per_step: Counter = field(default_factory=Counter)  # step -> launches on samples
    lines: Counter = field(default_factory=Counter)  # (line, op) -> launches


class Events:
    def __init__(self) -> None:
        self.sites: dict[tuple[Site, str], SiteEvents] = {}
        self.forwards: dict[Site, ForwardSite] = {}
        self.loaders: list[LoaderRecord] = []
        self.loops: dict[Site, SampleLoop] = {}

    def record(self, kind: str, stack: tuple[Site, ...], step: Optional[int]) -> None:
        if not stack:
            return
        key = (stack[0], kind)
        events = self.sites.get(key)
        if events is None:
            events = self.sites[key] = SiteEvents(kind, stack[0])
        events.add(step, stack)
