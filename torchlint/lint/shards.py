"""Which worker lints which files: each worker keeps to one stretch of the run's files.

A file's lint parses and summarises the project modules it imports, and those summaries are kept per process.
Files next to each other in the run's order (the same folder, the same package) mostly import the same modules,
so a worker that lints a contiguous stretch of them builds each summary once, where handing out files round
the pool had every worker build nearly every summary. The stretches are cut to hold about the same number of
bytes of source; a worker that finishes its own takes chunks from the end of the stretch with the most left,
so that the other worker keeps its place at the front.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Optional, Sequence

# Files per task: small enough that the last tasks of a run balance the workers, large enough that sending
# them costs nothing next to their lint.
CHUNK_FILES = 4


class Shards:
    """Chunks of file indexes, one queue per worker; `take(shard)` gives that worker its next chunk."""

    def __init__(self, queues: Sequence[Sequence[list[int]]], weights: Sequence[int]) -> None:
        """`weights[i]`: how much work file `i` is (its size), to steal from the shard with the most left."""
        self._queues = [deque(q) for q in queues]
        self._weights = weights

    def take(self, shard: int) -> Optional[list[int]]:
        """The next chunk of `shard`'s own stretch, else the last chunk of the stretch with the most left."""
        own = self._queues[shard]
        if own:
            return own.popleft()
        busiest = max(self._queues, key=self._left)
        return busiest.pop() if busiest else None

    def drain(self) -> list[int]:
        """Every index not yet taken (the queues are left empty)."""
        left = [i for queue in self._queues for chunk in queue for i in chunk]
        for queue in self._queues:
            queue.clear()
        return left

    def __len__(self) -> int:
        return len(self._queues)

    def _left(self, queue: "deque[list[int]]") -> int:
        return sum(self._weights[i] for chunk in queue for i in chunk)


def split(paths: Sequence[str], workers: int) -> Shards:
    """`workers` contiguous stretches of `paths` (in their order) of about equal size in bytes, in chunks."""
    weights = [_size(p) for p in paths]
    total = sum(weights)
    queues: list[list[list[int]]] = []
    start = 0
    for shard in range(workers):
        end = start
        if shard == workers - 1:
            end = len(paths)
        else:
            goal = total * (shard + 1) / workers
            done = sum(weights[:start])
            while end < len(paths) and (end == start or done + weights[end] / 2 <= goal):
                done += weights[end]
                end += 1
        queues.append([list(range(i, min(i + CHUNK_FILES, end))) for i in range(start, end, CHUNK_FILES)])
        start = end
    return Shards(queues, weights)


def one_per_task(indexes: Sequence[int], workers: int) -> Shards:
    """`indexes` dealt round `workers` shards one file per chunk (after a worker died: see runner)."""
    weights = [1] * (max(indexes, default=0) + 1)
    return Shards([[[i] for i in indexes[shard::workers]] for shard in range(workers)], weights)


def _size(path: str) -> int:
    try:
        return max(1, os.stat(path).st_size)
    except OSError:
        return 1  # reported when the file is read
