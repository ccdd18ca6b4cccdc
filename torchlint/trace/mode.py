"""The torch function mode: sees every torch call the program makes, marks where results come from and
records host reads of accelerator values, data-dependent shapes and launches on single samples."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional

import torch
from torch.compiler import is_compiling
from torch.overrides import TorchFunctionMode

from torchlint.trace.provenance import BATCH, DEVICE, SAMPLE

if TYPE_CHECKING:
    from torchlint.trace.tracer import Tracer

# Tensor methods that hand a value to Python: the host must wait for the accelerator and copy.
HOST_READS = {
    "item": "item",
    "tolist": "tolist",
    "numpy": "numpy",
    "cpu": "cpu",
    "__float__": "float",
    "__int__": "int",
    "__index__": "int",
    "__bool__": "bool",
    "__format__": "format",
    "__repr__": "format",
    "__str__": "format",
}
# Operations whose output size depends on the values: the host reads the count to allocate the result.
DATA_DEPENDENT = {"nonzero": "nonzero", "argwhere": "nonzero", "masked_select": "masked_select", "unique": "unique",
                  "unique_consecutive": "unique"}
_ACCELERATORS = ("cuda", "xpu", "mps", "hpu", "mtia", "privateuseone")


def _bool_index(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool and i.dim() > 0 for i in items)


def _one_sample(index: Any) -> bool:
    """Does this index pick one sample along the first dimension (`x[i]`, `x[i:i+1]`, `x[i, :]`)?"""
    if isinstance(index, tuple):
        if not index:
            return False
        index = index[0]
    if isinstance(index, bool):
        return False
    if isinstance(index, int):
        return True
    if isinstance(index, torch.Tensor):
        return index.dim() == 0 and not index.is_floating_point() and index.dtype != torch.bool
    if isinstance(index, slice) and isinstance(index.start, int) and isinstance(index.stop, int):
        return index.step in (None, 1) and index.stop - index.start == 1
    return False


_PASS, _ATTRIBUTE = "pass", "attribute"
# Calls that return metadata, never a tensor value: no mark to carry, nothing to count.
_METADATA = {"dim", "size", "numel", "stride", "is_contiguous", "__len__", "element_size", "is_floating_point",
             "is_complex", "data_ptr", "get_device", "register_hook", "__hash__", "__set__", "storage_offset"}


def _kind(func: Any) -> str:
    """How the mode treats a function: passed through, an attribute read, or watched (then: its name)."""
    name = getattr(func, "__name__", "")
    if name in _METADATA or (name[:1] == "_" and name[:2] != "__"):  # grad-mode switches, profiler marks
        return _PASS
    if name == "__get__":
        return _ATTRIBUTE
    return name


class TraceMode(TorchFunctionMode):
    def __init__(self, tracer: "Tracer") -> None:
        super().__init__()
        self.tracer = tracer
        self._kinds: dict[Any, str] = {}  # function -> _PASS, _ATTRIBUTE or its name
        self.provenance = tracer.provenance
        self.accelerator = torch.cuda.is_available()

    def _device_kind(self, value: Any, flags_of_tensor: int = 0) -> Optional[str]:
        """"accelerator", "cpu" or None (not a device) for a `.to()` argument."""
        if isinstance(value, torch.Tensor):
            return "accelerator" if flags_of_tensor & DEVICE or value.device.type != "cpu" else "cpu"
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return "accelerator"
        if isinstance(value, (str, torch.device)):
            try:
                kind = torch.device(value).type
            except (RuntimeError, TypeError):
                return None
            return "accelerator" if kind in _ACCELERATORS else "cpu"
        return None

    def _move_target(self, name: str, args: tuple, kwargs: dict) -> Optional[str]:
        if name in ("cuda", "xpu", "mps"):
            return "accelerator"
        if name != "to":
            return None
        if "device" in kwargs and kwargs["device"] is not None:
            return self._device_kind(kwargs["device"])
        for value in args[1:]:
            kind = self._device_kind(value, self.provenance.flags(value))
            if kind is not None:
                return kind
        return None

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        kwargs = kwargs or {}
        tracer = self.tracer
        kind = self._kinds.get(func)
        if kind is None:
            kind = self._kinds[func] = _kind(func)
        if kind is _PASS or tracer.loading or is_compiling():
            # Bookkeeping and metadata, a DataLoader building a batch (its time is the data wait, as is), or
            # torch.compile tracing a graph (which then runs without Python: nothing to watch).
            return func(*args, **kwargs)
        provenance = self.provenance
        flags = provenance.combined(args, kwargs)
        if kind is _ATTRIBUTE:  # `.grad`, `.data`, `.T`: the same tensor's marks, nothing else to watch
            result = func(*args, **kwargs)
            if flags and isinstance(result, torch.Tensor):
                provenance.mark(result, flags)
            return result
        tracer.clock.busy = True
        name = kind  # a watched function: its name
        moved = self._move_target(name, args, kwargs) if name in ("to", "cuda", "xpu", "mps") else None
        out_flags = flags
        if moved == "accelerator" or (moved == "cpu" and not flags & DEVICE and not self.accelerator):
            # `.to(device)`: with no accelerator here, `device` is the CPU, and the copy stands for the move.
            out_flags |= DEVICE
            if args:
                tracer.moved(args[0])
        elif flags & DEVICE:
            read = HOST_READS.get(name) or DATA_DEPENDENT.get(name)
            if moved == "cpu":
                read = "cpu"
            elif name == "where" and len(args) == 1 and not kwargs:
                read = "nonzero"
            elif name == "__getitem__" and len(args) > 1 and _bool_index(args[1]):
                read = "mask"
            if read is not None:
                tracer.host_read(read)
                if read in ("cpu", "numpy"):
                    out_flags &= ~DEVICE
        elif kwargs.get("device") is not None and tracer.user.path(sys._getframe(1).f_code.co_filename):
            # The user's code builds a tensor on `device` (libraries name the CPU for their own reasons).
            target = self._device_kind(kwargs["device"])
            if target == "accelerator" or (target == "cpu" and not self.accelerator):
                out_flags |= DEVICE
        loop = None
        if flags & SAMPLE:
            loop = tracer.sample_launch(name, args, kwargs)
        elif flags & BATCH and (
            (name == "__getitem__" and len(args) > 1 and _one_sample(args[1]))
            or (name == "unbind" and not args[1:] and not kwargs.get("dim"))
        ):
            loop = tracer.sample_loop()  # slicing one sample out of a batch, inside a loop
            if loop is not None:
                out_flags |= SAMPLE
        result = func(*args, **kwargs)
        if (
            (out_flags ^ flags) & DEVICE
            and args
            and result is args[0]
            and not result.requires_grad
            and tracer.user.path(sys._getframe(1).f_code.co_filename)
        ):
            # `.to(device)` or `.cpu()` that is a no-op on this machine returns the tensor itself; marking that
            # would change what the tensor the user still holds is. On a GPU the copy is a new tensor: so is
            # the trace's, sharing the same memory (`detach()`: same values, no copy, no autograd to lose).
            result = result.detach()
        if out_flags:
            for tensor in provenance.tensors(result):
                provenance.mark(tensor, out_flags, origin=loop)
        return result
