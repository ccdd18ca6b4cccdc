"""Linting (and fixing) many files: per-file work, the result cache, and a process pool."""

from __future__ import annotations

import difflib
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

from torchlint.config import Settings
from torchlint.lint import shards
from torchlint.lint.cache import Cache
from torchlint.lint.discovery import Discovered
from torchlint.lint.finding import FileResult, syntax_error_finding
from torchlint.lint.fix import applicable, fix_file
from torchlint.lint.rule import Rule, all_rules
from torchlint.lint.source import SourceError, SourceFile, read_source, write_fixed
from torchlint.lint.time_limit import TimeLimitExceeded, time_limit


@dataclass(frozen=True)
class Job:
    """What to do with every file of a run (picklable, sent to workers once per file)."""

    settings: Settings
    fix: bool = False  # apply fixes (safe ones; unsafe too with unsafe_fixes)
    unsafe_fixes: bool = False
    diff: bool = False  # compute fixes but do not write them
    use_cache: bool = True


def _lint_source(source: SourceFile, rules: Sequence[type[Rule]], seconds: float) -> FileResult:
    # libcst and the rules load only when a file is linted
    from torchlint.lint.engine import InvalidSyntax, lint_text

    try:
        with time_limit(seconds):
            result = lint_text(source, rules)
        # a notebook's cells that do not parse were linted as blank lines: each still gets its line
        broken = [syntax_error_finding(*c.syntax_error) for c in source.cells if c.syntax_error]
        if broken:
            result.findings = sorted([*result.findings, *broken], key=lambda f: f.sort_key)
        return result
    except TimeLimitExceeded:
        message = f"analysis took longer than {seconds:g} s and was stopped (raise file-time-limit to wait longer)"
        return FileResult(path=source.path, error=message, cacheable=False)
    except InvalidSyntax as exc:
        return FileResult(path=source.path, findings=[syntax_error_finding(exc.line, exc.column, exc.reason)])
    except SourceError as exc:
        return FileResult(path=source.path, error=str(exc))
    except RecursionError:
        return FileResult(path=source.path, error="too deeply nested to analyse")


def process_source(source: SourceFile, job: Job, write_to: Optional[str] = None) -> FileResult:
    """Lint one decoded source; with fixing on, fix it and (unless --diff) write it to `write_to`."""
    rules = job.settings.rules_for(source.path)
    seconds = job.settings.file_time_limit
    cells = [(c.index, c.first_line) for c in source.cells]
    if (not job.fix and not job.diff) or source.unfixable:
        result = _lint_source(source, rules, seconds)
        result.path = source.path
        result.cells = cells
        if (job.fix or job.diff) and source.unfixable and any(applicable(f, job.unsafe_fixes) for f in result.findings):
            result.notes.append(source.unfixable)
        return result
    fixed_source, result = fix_file(source, lambda s: _lint_source(s, rules, seconds), job.unsafe_fixes)
    result.path = source.path
    result.cells = [(c.index, c.first_line) for c in fixed_source.cells]
    if fixed_source.text != source.text or fixed_source.to_bytes() != source.to_bytes():
        result.original_text = source.text if not source.is_notebook else _cells_text(source)
        result.fixed_text = fixed_source.text if not fixed_source.is_notebook else _cells_text(fixed_source)
        result.new_text = fixed_source.to_bytes()
        if not job.diff and write_to is not None:
            try:
                write_fixed(write_to, result.new_text, source.read_digest)
            except (OSError, SourceError) as exc:
                # Nothing was fixed: report what the file on disk still has.
                reason = str(exc) if isinstance(exc, SourceError) else f"cannot write the fixed file: {exc.strerror or exc}"
                result = _lint_source(source, rules, seconds)
                result.path = source.path
                result.cells = cells
                result.error = reason
    return result


def _cells_text(source: SourceFile) -> str:
    return "".join(f"# cell {c.index}\n{c.original}{'' if c.original.endswith(chr(10)) else chr(10)}" for c in source.cells)


def _cached(item: Discovered, job: Job, cache: Optional[Cache]) -> tuple[Optional[FileResult], Optional[str]]:
    """(the cached result, if it can be used as it is; the cache key), reading the file once."""
    if cache is None or not job.use_cache:
        return None, None
    try:
        source = read_source(item.path, item.display)
    except SourceError:
        return None, None  # reported when the file is processed
    key = cache.key(item.display, source.text.encode("utf-8", "surrogatepass"))
    cached = cache.get(key)
    if cached is None or ((job.fix or job.diff) and any(applicable(f, job.unsafe_fixes) for f in cached.findings)):
        return None, key
    cached.path = item.display
    return cached, key


def process_file(item: Discovered, job: Job, cache: Optional[Cache]) -> FileResult:
    try:
        source = read_source(item.path, item.display)
    except SourceError as exc:
        return FileResult(path=item.display, error=str(exc))
    key = None
    if cache is not None and job.use_cache:
        key = cache.key(item.display, source.text.encode("utf-8", "surrogatepass"))
    result = process_source(source, job, write_to=item.path)
    # A fixing run's notes (a fix dropped, a file not fixed) are about that run: not for a later check.
    if key is not None and result.cacheable and result.new_text is None and not ((job.fix or job.diff) and result.notes):
        from torchlint.lint.torch_requirement import declaration_files
        from torchlint.semantic.project import dependencies  # the project files its findings may rest on

        path = os.path.abspath(item.path)
        # The torch version the project declares decides whether some fixes are safe.
        cache.put(key, result, [*dependencies(path, source.text), *declaration_files(path)])  # type: ignore[union-attr]
    return result


# Allocations between two young-generation collections while linting (Python's default is 700). A parse
# allocates millions of nodes that form no cycles, and the engine frees each file's tree itself; collecting
# every 700 allocations rescans them to free nothing, which cost about a fifth of a run.
_LINT_GC_THRESHOLD = (100_000, 50, 50)


def collect_less() -> None:
    """Collect garbage seldom in this process (the command line's, whose whole life is one run; workers
    inherit it). Not undone: going back to the default thresholds at the end of a run only starts a full
    collection of everything the run still holds, right before the process exits."""
    gc.set_threshold(*_LINT_GC_THRESHOLD)


# Worker state, set once per worker process by the pool initializer.
_WORKER: dict[str, object] = {}
_WATCH_SECONDS = 0.5


def _exit_with_parent(parent: int) -> None:
    """Runs in a worker: end it when the main process is gone (killed, say, by a caller's timeout), so
    that no orphan keeps the caller's output pipes open."""
    while True:
        time.sleep(_WATCH_SECONDS)
        if os.getppid() != parent:
            os._exit(1)


def _init_worker(job: Job, cache_root: Optional[str], parent: int) -> None:
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process handles Ctrl-C and ends the pool
    all_rules()  # registered before the fork already; this covers platforms that spawn
    collect_less()  # inherited with a fork; this covers platforms that spawn
    _WORKER["job"] = job
    _WORKER["cache"] = Cache(cache_root, job.settings.fingerprint()) if cache_root else None


def _work(items: Sequence[Discovered]) -> list[FileResult]:
    return [process_file(item, _WORKER["job"], _WORKER["cache"]) for item in items]  # type: ignore[arg-type]


def run(
    items: Sequence[Discovered],
    job: Job,
    jobs: int,
    cache_root: Optional[str],
    progress: Optional[Callable[[int, int], None]] = None,
) -> Iterator[FileResult]:
    """Results for `items`, in order. Cached results are read here; the rest are linted, in a process pool
    when that pays (several files and jobs > 1). A run over an unchanged tree starts no worker and loads no rule."""
    project = sys.modules.get("torchlint.semantic.project")  # loaded only once this process linted something
    if project is not None:
        project.new_run()
    trees = sys.modules.get("torchlint.lint.trees")
    if trees is not None:
        trees.forget()
    cache = Cache(cache_root, job.settings.fingerprint()) if cache_root and job.use_cache else None
    total = len(items)
    done = 0
    results: list[Optional[FileResult]] = []
    for item in items:
        hit, _ = _cached(item, job, cache)
        results.append(hit)
    misses = [item for item, hit in zip(items, results) if hit is None]
    linted = iter(_lint_all(misses, job, jobs, cache_root, cache))
    for hit in results:
        done += 1
        yield hit if hit is not None else next(linted)
        if progress:
            progress(done, total)
    if cache is not None:
        cache.finish_run()


def _lint_all(
    items: Sequence[Discovered], job: Job, jobs: int, cache_root: Optional[str], cache: Optional[Cache]
) -> Iterator[FileResult]:
    if jobs <= 1 or len(items) < 4:
        for item in items:
            yield process_file(item, job, cache)
        return
    all_rules()  # import the rules once, before the workers fork
    workers = min(jobs, len(items))
    yield from _pooled(items, shards.split([item.path for item in items], workers), job, cache_root)


def _pool(job: Job, workers: int, cache_root: Optional[str]) -> ProcessPoolExecutor:
    method = "fork" if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context(method),
        initializer=_init_worker,
        initargs=(job, cache_root if job.use_cache else None, os.getpid()),
    )


def _pooled(
    items: Sequence[Discovered], work: shards.Shards, job: Job, cache_root: Optional[str]
) -> Iterator[FileResult]:
    """Results in order. Each shard has one task in flight at a time, and its next one is sent when that task
    is done, so that the worker just freed (the only idle one) takes it: a worker stays on its shard's files.

    A worker that dies (the native parser can crash on input no check foresaw) costs only its own file: the
    files still unlinted go to a new pool, one per task; when a pool breaks before any of them is done, the
    first is linted alone, so the file that kills its worker is named."""
    ready: dict[int, FileResult] = {}
    next_index = 0
    while True:
        failed: list[int] = []
        progressed = False
        pool = _pool(job, len(work), cache_root)
        in_flight: dict[Future, tuple[list[int], int]] = {}
        try:
            for shard in range(len(work)):
                _send(pool, in_flight, failed, items, work.take(shard), shard)
            while in_flight:
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in done:
                    chunk, shard = in_flight.pop(future)
                    try:
                        ready.update(zip(chunk, future.result()))
                        progressed = True
                    except BrokenProcessPool:
                        failed.extend(chunk)
                        continue
                    _send(pool, in_flight, failed, items, work.take(shard) if not failed else None, shard)
                while next_index in ready:
                    yield ready.pop(next_index)
                    next_index += 1
        finally:
            pool.shutdown(wait=not failed, cancel_futures=True)
        if not failed:
            return
        failed = sorted(failed + work.drain())
        if not progressed:  # no file done: find the culprit
            first = failed.pop(0)
            ready[first] = _alone(items[first], job, cache_root)
        work = shards.one_per_task(failed, len(work))
        while next_index in ready:
            yield ready.pop(next_index)
            next_index += 1
        if not failed:
            return


def _send(
    pool: ProcessPoolExecutor,
    in_flight: dict[Future, tuple[list[int], int]],
    failed: list[int],
    items: Sequence[Discovered],
    chunk: Optional[list[int]],
    shard: int,
) -> None:
    """Send one shard's chunk to the pool; a chunk the pool refuses because a worker has just died is failed
    (linted again by the next pool)."""
    if chunk is None:
        return
    try:
        in_flight[pool.submit(_work, [items[i] for i in chunk])] = (chunk, shard)
    except BrokenProcessPool:
        failed.extend(chunk)


def _alone(item: Discovered, job: Job, cache_root: Optional[str]) -> FileResult:
    with _pool(job, 1, cache_root) as pool:
        try:
            return pool.submit(_work, [item]).result()[0]
        except BrokenProcessPool:
            return FileResult(path=item.display, error="the linter crashed on this file (its worker process died)")


def unified_diff(result: FileResult) -> str:
    if result.original_text is None or result.fixed_text is None:
        return ""
    return "".join(
        difflib.unified_diff(
            result.original_text.splitlines(keepends=True),
            result.fixed_text.splitlines(keepends=True),
            fromfile=f"a/{result.path}",
            tofile=f"b/{result.path}",
        )
    )


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        return max(1, os.cpu_count() or 1)
