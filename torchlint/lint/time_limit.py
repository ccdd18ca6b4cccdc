"""A bound on the time one file's analysis may take, so that one pathological file (analysis that grows
faster than the file) is reported and skipped instead of stalling the whole run."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

# Seconds; far above any real file (a large module lints in well under a second) and short enough that a
# pre-commit hook still finishes.
DEFAULT_SECONDS = 60.0


class TimeLimitExceeded(Exception):
    pass


def _expire(signum: int, frame: object) -> None:
    raise TimeLimitExceeded


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TimeLimitExceeded in the body once `seconds` of wall time have passed. Without a real-time
    timer (not POSIX, or not the main thread) or with `seconds` <= 0 the body runs unbounded."""
    if (
        seconds <= 0
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
