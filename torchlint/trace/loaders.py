"""The DataLoaders the program builds: their settings, how often they are iterated, and the time each step
waits for its next batch (the loader's iterator's __next__, timed)."""

from __future__ import annotations

import functools
import time
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter
from torch.utils._pytree import tree_leaves

from torchlint.trace.events import LoaderRecord
from torchlint.trace.provenance import BATCH, DEVICE

if TYPE_CHECKING:
    from torchlint.trace.tracer import Tracer


class LoaderPatches:
    def __init__(self, tracer: "Tracer") -> None:
        self.tracer = tracer
        self.records: "weakref.WeakKeyDictionary[Any, LoaderRecord]" = weakref.WeakKeyDictionary()
        self.iterators: "weakref.WeakKeyDictionary[Any, LoaderRecord]" = weakref.WeakKeyDictionary()
        self.saved: list[tuple[type, str, Any]] = []

    def install(self) -> None:
        tracer, records, iterators = self.tracer, self.records, self.iterators
        original_init, original_iter = DataLoader.__init__, DataLoader.__iter__
        original_next = _BaseDataLoaderIter.__next__

        def record_of(loader: Any) -> LoaderRecord:
            """The loader's record, made on first sight: where it is built, or, for a loader built before the
            trace began, where it is first iterated."""
            record = records.get(loader)
            if record is not None:
                return record
            stack = tracer.user.stack(3)
            record = LoaderRecord(
                site=stack[0] if stack else None,
                stack=stack,
                num_workers=loader.num_workers,
                pin_memory=bool(loader.pin_memory),
                persistent_workers=bool(getattr(loader, "persistent_workers", False)),
                batch_size=loader.batch_size,
                dataset=type(loader.dataset).__name__,
            )
            records[loader] = record
            tracer.events.loaders.append(record)
            return record

        @functools.wraps(original_init)
        def __init__(loader: Any, *args: Any, **kwargs: Any) -> None:
            original_init(loader, *args, **kwargs)
            record_of(loader)

        @functools.wraps(original_iter)
        def __iter__(loader: Any) -> Any:
            busy = tracer.clock.busy  # seeding the sampler is not the step's own tensor work
            iterator = original_iter(loader)
            tracer.clock.busy = busy
            record = record_of(loader)
            record.passes += 1
            try:
                iterators[iterator] = record
            except TypeError:  # an iterator that cannot be weakly referenced: not timed
                pass
            return iterator

        @functools.wraps(original_next)
        def __next__(iterator: Any) -> Any:
            clock = tracer.clock
            if getattr(iterator, "_num_yielded", None) == 0:
                clock.pass_started()
            else:
                clock.batch_fetched()  # asking for the next batch ends the step before (may stop the trace)
            record = iterators.get(iterator)
            busy = clock.busy  # loading a batch is not the step's own tensor work
            loading, tracer.loading = tracer.loading, True
            started = time.perf_counter()
            try:
                batch = original_next(iterator)
            except StopIteration:
                clock.pass_ended()
                raise
            finally:
                tracer.loading = loading
                clock.busy = busy
                waited = time.perf_counter() - started
                if tracer.clock.current is not None:
                    tracer.clock.current.data_wait += waited
                if record is not None:
                    record.wait_s += waited
            if record is not None:
                record.batches += 1
                record.waits.append(waited)
            provenance = tracer.provenance
            for value in tree_leaves(batch):
                if isinstance(value, torch.Tensor):
                    provenance.mark(value, BATCH, origin=record)
                    if value.device.type == "cpu":  # a batch in host memory, whatever built it
                        provenance.clear(value, DEVICE)
            return batch

        self.saved = [
            (DataLoader, "__init__", original_init),
            (DataLoader, "__iter__", original_iter),
            (_BaseDataLoaderIter, "__next__", original_next),
        ]
        DataLoader.__init__ = __init__  # type: ignore[method-assign]
        DataLoader.__iter__ = __iter__  # type: ignore[method-assign]
        _BaseDataLoaderIter.__next__ = __next__  # type: ignore[method-assign]

    def remove(self) -> None:
        for owner, name, original in self.saved:
            setattr(owner, name, original)
        self.saved = []
