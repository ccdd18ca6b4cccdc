"""Timing two models on the same inputs in the same process, to keep a rewrite only when it pays.

The two run in alternation (A B, then B A, ...) after a warm-up, so that load on the machine hits both alike, until
`rounds` rounds are done or the time budget is spent (never fewer than MIN_ROUNDS). A candidate pays when its
median is lower than the baseline's by more than the noise: at least MIN_GAIN, and at least the baseline's own
spread (median absolute deviation / median).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from .structures import map_tensors

MIN_GAIN = 0.02
MIN_ROUNDS = 3
ROUNDS = 15
WARMUP = 2

# The clock timings read; tests replace it to check the decisions without timing anything.
clock: Callable[[], float] = time.perf_counter


@dataclass
class Timing:
    baseline: float  # median seconds per call
    candidate: float
    rounds: int
    noise: float  # the baseline's relative spread

    @property
    def speedup(self) -> float:
        return self.baseline / self.candidate if self.candidate > 0 else float("inf")

    @property
    def pays(self) -> bool:
        gain = 1 - self.candidate / self.baseline if self.baseline > 0 else 0.0
        return gain > max(MIN_GAIN, self.noise)

    def describe(self) -> str:
        return (f"{self.candidate * 1e3:.3g} ms vs {self.baseline * 1e3:.3g} ms, {self.speedup:.2f}x "
                f"(median of {self.rounds} interleaved runs, noise {self.noise:.0%})")


def compare_speed(baseline, candidate, args: tuple, kwargs: dict, budget: float) -> Timing:
    """Median time per call of `baseline` and `candidate` on (args, kwargs), under no_grad, within `budget`
    seconds (after the warm-up)."""
    samples: dict[int, list[float]] = {0: [], 1: []}
    models = (baseline, candidate)
    with torch.no_grad():
        for _ in range(WARMUP):
            for model in models:
                model(*_fresh(args), **_fresh(kwargs))
        started = clock()
        for round_ in range(ROUNDS):
            order = (0, 1) if round_ % 2 == 0 else (1, 0)
            for i in order:
                a, k = _fresh(args), _fresh(kwargs)  # a model may write into its inputs
                begin = clock()
                models[i](*a, **k)
                samples[i].append(clock() - begin)
            if round_ + 1 >= MIN_ROUNDS and clock() - started > budget:
                break
    base = statistics.median(samples[0])
    spread = statistics.median(abs(s - base) for s in samples[0]) / base if base > 0 else 0.0
    return Timing(base, statistics.median(samples[1]), len(samples[0]), spread)


def _fresh(value):
    return map_tensors(lambda t: t.clone(), value)
