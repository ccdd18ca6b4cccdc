"""Where each tensor comes from: the accelerator, a batch, or one sample of a batch.

On a CPU-only machine nothing lives on an accelerator, so the trace tracks the tensors that would: model
parameters and buffers, model outputs, and whatever is moved with `.to(device)` / `.cuda()`, plus everything
computed from them. The report is then the same with or without a GPU. Marks are kept by tensor identity
with weak references, so they never keep a tensor alive and never touch the tensor itself (a checkpoint
saved under the trace is byte for byte the one saved without it).
"""

from __future__ import annotations

import weakref
from typing import Any, Iterable, Optional

DEVICE = 1  # lives (or would live) on the accelerator
BATCH = 2  # a batch: yielded by a DataLoader or fed to a model
SAMPLE = 4  # one sample sliced out of a batch, or computed from one


class Provenance:
    def __init__(self, tensor_type: type) -> None:
        self.tensor_type = tensor_type
        self._flags: dict[int, list] = {}  # id(tensor) -> [flags, weak reference]
        self.origin: dict[int, Any] = {}  # id(batch tensor) -> the loader record it came from

    def flags(self, value: Any) -> int:
        entry = self._flags.get(id(value))
        return entry[0] if entry is not None else 0

    def mark(self, tensor: Any, flags: int, origin: Any = None) -> None:
        key = id(tensor)
        entry = self._flags.get(key)
        if entry is None:
            self._flags[key] = [flags, weakref.ref(tensor, lambda _ref, k=key: self._forget(k))]
        else:
            entry[0] |= flags
        if origin is not None:
            self.origin[key] = origin

    def clear(self, tensor: Any, flags: int) -> None:
        entry = self._flags.get(id(tensor))
        if entry is not None:
            entry[0] &= ~flags

    def _forget(self, key: int) -> None:
        self._flags.pop(key, None)
        self.origin.pop(key, None)

    def combined(self, args: Iterable[Any], kwargs: Optional[dict]) -> int:
        """The union of the marks of every tensor among the arguments (one level into lists and tuples)."""
        flags = 0
        table = self._flags
        for value in args:
            if isinstance(value, (list, tuple)):
                for item in value:
                    entry = table.get(id(item))
                    if entry is not None:
                        flags |= entry[0]
            else:
                entry = table.get(id(value))
                if entry is not None:
                    flags |= entry[0]
        if kwargs:
            for value in kwargs.values():
                entry = table.get(id(value))
                if entry is not None:
                    flags |= entry[0]
        return flags

    def tensors(self, value: Any) -> list:
        """The tensors in a result: the value itself, or the items of a tuple or list."""
        if isinstance(value, self.tensor_type):
            return [value]
        if isinstance(value, (list, tuple)):
            return [v for v in value if isinstance(v, self.tensor_type)]
        return []

    def origin_of(self, value: Any) -> Any:
        return self.origin.get(id(value))
