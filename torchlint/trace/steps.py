"""The step clock: where one training (or evaluation) step ends and the next begins.

A step is one iteration of a loop over a DataLoader (it ends when the program asks for the next batch) or,
in a program that fetches no batch between optimizer steps, one optimizer step; two boundaries with no
tensor work between them count once. The clock starts at the first batch,
forward pass or optimizer step, so building the model and the data is not timed as a step.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Optional


# Which lines of the user's code run is watched (it costs a call per Python function entered, a large part of
# the trace's cost per step) outside the loops and on the first steps of each pass over a DataLoader: the
# later steps of a pass run the same lines.
WATCHED_STEPS = 2


class StopTracing(BaseException):
    """Raised at a step boundary once the requested number of steps has run (a BaseException, so that a
    program's `except Exception:` does not swallow it)."""


@dataclass
class Step:
    seconds: float = 0.0
    data_wait: float = 0.0  # seconds spent inside the DataLoader's __next__
    host_reads: int = 0  # reads of accelerator values on the host


class StepClock:
    def __init__(self, limit: int = 0) -> None:
        self.limit = limit  # stop after this many steps; 0: never
        self.steps: list[Step] = []
        self.current: Optional[Step] = None
        self.started_at = 0.0
        self.busy = False  # tensor work since the last boundary
        self.stopped = False
        self._fetched = False  # a batch was fetched since the last optimizer step
        self.steps_in_pass = 0  # steps since the current pass over a DataLoader began
        self.watch_lines: Callable[[bool], None] = lambda on: None  # see `WATCHED_STEPS`

    @property
    def index(self) -> Optional[int]:
        """0-based number of the step under way, or None before the first one."""
        return len(self.steps) if self.current is not None else None

    def start(self) -> None:
        if self.current is None:
            self.current = Step()
            self.started_at = time.perf_counter()
            self.busy = False

    def batch_fetched(self) -> None:
        """The program asks a DataLoader for a batch: the previous step (if any) is over."""
        self._fetched = True
        closed = len(self.steps)
        self.boundary()
        if len(self.steps) > closed:
            self.steps_in_pass += 1
            if self.steps_in_pass == WATCHED_STEPS:
                self.watch_lines(False)

    def pass_ended(self) -> None:
        """The DataLoader ran out of batches: the code after the loop runs once, and its lines are watched."""
        self.watch_lines(True)

    def pass_started(self) -> None:
        """The first batch of a new pass over a DataLoader: what ran since the last step (evaluation between
        epochs, setting up the next loop) is not a step of its own; the next step starts now."""
        self._fetched = True
        self.current = Step()
        self.started_at = time.perf_counter()
        self.busy = False
        self.steps_in_pass = 0
        self.watch_lines(True)

    def optimizer_stepped(self) -> None:
        """An optimizer step ends a step only in programs that do not fetch a batch per step; otherwise the
        work after it (logging, metrics) still belongs to the step, which ends at the next fetch."""
        if not self._fetched:
            self.boundary()
        self._fetched = False

    def boundary(self) -> None:
        """End the step under way (if it did any work) and start the next; stop when the limit is reached."""
        if self.current is None:
            self.start()
            return
        if not self.busy:
            return
        now = time.perf_counter()
        self.current.seconds = now - self.started_at
        self.steps.append(self.current)
        self.current = Step()
        self.started_at = now
        self.busy = False
        if self.limit and len(self.steps) >= self.limit:
            self.stopped = True
            raise StopTracing()

    def summary(self) -> dict:
        """Median and 90th percentile step time, data-wait share and host reads per step."""
        if not self.steps:
            return {"steps": 0}
        times = sorted(s.seconds for s in self.steps)
        total = sum(times)
        p90 = times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]
        return {
            "steps": len(times),
            "median_s": statistics.median(times),
            "p90_s": p90,
            "data_wait_share": sum(s.data_wait for s in self.steps) / total if total else 0.0,
            "host_reads_per_step": statistics.median(s.host_reads for s in self.steps),
        }
