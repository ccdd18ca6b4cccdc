"""Timing two models on the same inputs in the same process, to keep a rewrite only when it pays.

The two run in alternation (A B, then B A, ...) after one warm-up call of each (a second-call effect shows in the
first round only, and the median over at least MIN_ROUNDS rounds sets it aside; on a model whose call takes
seconds, a second warm-up pair would cost as much as a round). Timing stops once the answer is clear (after
CLEAR_ROUNDS rounds, a gain or loss beyond three times the noise), or after MAX_ROUNDS rounds, or when the time
budget is spent (but never before MIN_ROUNDS rounds): a sub-millisecond model gets hundreds of rounds, a large one
with a clear gain fifteen. Each round gives one ratio candidate time / baseline time, from two runs
next to each other, so that changes in machine load cancel out. A candidate pays when the median ratio shows a
gain larger than the noise: at least MIN_GAIN, and at least twice the standard error of that median
(1.86 x median absolute deviation / sqrt(rounds), for roughly normal ratios).
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
CLEAR_ROUNDS = 15
MAX_ROUNDS = 200
WARMUP = 1

# The clock timings read; tests replace it to check the decisions without timing anything.
clock: Callable[[], float] = time.perf_counter


@dataclass
class Timing:
    baseline: float  # median seconds per call
    candidate: float
    ratio: float  # median over rounds of candidate time / baseline time
    rounds: int
    noise: float  # the standard error of `ratio`, relative to it

    @property
    def speedup(self) -> float:
        return 1 / self.ratio if self.ratio > 0 else float("inf")

    @property
    def pays(self) -> bool:
        return 1 - self.ratio > max(MIN_GAIN, 2 * self.noise)

    @property
    def clear(self) -> bool:
        """More rounds would not change the decision: a gain, or a loss, beyond three times the noise."""
        return abs(1 - self.ratio) > max(MIN_GAIN, 3 * self.noise) or self.ratio >= 1

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
        for round_ in range(1, MAX_ROUNDS + 1):
            order = (0, 1) if round_ % 2 else (1, 0)
            for i in order:
                a, k = _fresh(args), _fresh(kwargs)  # a model may write into its inputs
                begin = clock()
                models[i](*a, **k)
                samples[i].append(clock() - begin)
            if round_ >= MIN_ROUNDS and clock() - started > budget:
                break
            if round_ >= CLEAR_ROUNDS and _summary(samples).clear:
                break
    return _summary(samples)


def _summary(samples: dict[int, list[float]]) -> Timing:
    ratios = [c / b if b > 0 else float("inf") for b, c in zip(samples[0], samples[1])]
    ratio = statistics.median(ratios)
    spread = statistics.median(abs(r - ratio) for r in ratios)
    noise = 1.86 * spread / len(ratios) ** 0.5 / ratio if ratio > 0 else 0.0
    return Timing(statistics.median(samples[0]), statistics.median(samples[1]), ratio, len(ratios), noise)


def _fresh(value):
    return map_tensors(lambda t: t.clone(), value)
