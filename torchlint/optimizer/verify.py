"""Running a model the same way twice and comparing the results.

A run is deterministic and leaves no trace: the RNG is seeded (so dropout draws the same masks), buffers such
as BatchNorm running statistics and parameter gradients are restored afterwards, and inputs are cloned so a
model that writes into its inputs cannot change the next run.

Two outputs match when they have the same structure (the same container types, keys, lengths and fields, the
same non-tensor values) and, for every tensor, max|optimized - original| <= atol + rtol * max|original|: the
error is measured relative to the scale of the output, not element by element, so tiny entries do not dominate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn

from .structures import is_dataclass_instance, is_namedtuple, map_tensors, tensors

SEED = 0


@dataclass
class Tolerance:
    rtol: float
    atol: float
    # Mixed precision: a float32 output may come back in this dtype, as it does from the model under torch.autocast.
    low_dtype: torch.dtype | None = None


# fp32 rewrites only reorder floating-point arithmetic: differences are rounding, ~1e-6 of the output scale.
FP32 = Tolerance(rtol=1e-4, atol=1e-5)
# bf16 keeps 8 bits of mantissa (~0.4% per op) and errors grow with depth; fp16 keeps 11 bits.
LOW_PRECISION = {torch.bfloat16: Tolerance(rtol=5e-2, atol=1e-3, low_dtype=torch.bfloat16),
                 torch.float16: Tolerance(rtol=1e-2, atol=1e-3, low_dtype=torch.float16)}


@dataclass
class Run:
    output: object
    backward_error: str | None = None


def as_call_arguments(example_inputs) -> tuple[tuple, dict]:
    """The rule for example_inputs: a tuple holds positional arguments, a dict keyword arguments, and anything
    else (a tensor, a list, ...) is the single positional argument."""
    if type(example_inputs) is tuple:
        return example_inputs, {}
    if type(example_inputs) is dict:
        return (), dict(example_inputs)
    return (example_inputs,), {}


def run(model: nn.Module, args: tuple, kwargs: dict, training: bool, call=None) -> Run:
    """Run `model` (or `call`, a function standing in for it) once, deterministically and without side effects."""
    call = call or model
    args, kwargs = map_tensors(_clone, (args, kwargs))
    with _restored_state(model), torch.random.fork_rng(devices=_cuda_devices(model)):
        torch.manual_seed(SEED)
        if not training:
            with torch.no_grad():
                return Run(map_tensors(_detach, call(*args, **kwargs)))
        output = call(*args, **kwargs)
        return Run(map_tensors(_detach, output), _backward_error(output))


def _backward_error(output) -> str | None:
    total = [t.float().sum() for t in tensors(output) if t.requires_grad]
    if not total:
        return None
    try:
        torch.stack(total).sum().backward()
    except RuntimeError as error:
        return str(error).splitlines()[0]
    return None


@contextlib.contextmanager
def _restored_state(model: nn.Module):
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    grads = [(p, None if p.grad is None else p.grad.clone()) for p in model.parameters()]
    try:
        yield
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
        for param, saved in grads:
            param.grad = saved


def _cuda_devices(model: nn.Module) -> list:
    return sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})


def _clone(value):
    return value.clone() if isinstance(value, torch.Tensor) else value


def _detach(value):
    return value.detach() if isinstance(value, torch.Tensor) else value


@dataclass
class Comparison:
    ok: bool
    error: float  # max |optimized - original| / max |original| over all output tensors
    detail: str


def compare(reference, candidate, tolerance: Tolerance) -> Comparison:
    """Compare two outputs by structure and value: containers by type and recursively (named tuples, dataclasses
    and ModelOutput-like objects field by field), tensors within tolerance, other values by equality."""
    worst = [0.0]
    try:
        problem = _compare(reference, candidate, "output", tolerance, worst)
    except Exception as error:  # noqa: BLE001 - a value whose comparison raises cannot be shown equal
        problem = f"the outputs cannot be compared: {type(error).__name__}: {error}"
    if problem:
        return Comparison(False, math.inf if worst[0] == 0 else worst[0], problem)
    return Comparison(True, worst[0], f"max relative error {worst[0]:.2e}")


def _compare(a, b, where: str, tolerance: Tolerance, worst: list) -> str | None:
    if type(a) is not type(b):
        return f"{where} is a {type(b).__name__}, not a {type(a).__name__} like the original's"
    if isinstance(a, torch.Tensor):
        return _compare_tensors(a, b, where, tolerance, worst)
    if is_dataclass_instance(a) or is_namedtuple(a):
        names = [f.name for f in dataclasses.fields(a)] if is_dataclass_instance(a) else list(a._fields)
        for name in names:
            problem = _compare(getattr(a, name), getattr(b, name), f"{where}.{name}", tolerance, worst)
            if problem:
                return problem
        if not isinstance(a, dict):
            return None
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return f"{where} has keys {list(b.keys())}, the original's has {list(a.keys())}"
        for key in a:
            problem = _compare(a[key], b[key], f"{where}[{key!r}]", tolerance, worst)
            if problem:
                return problem
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where} has {len(b)} items, the original's has {len(a)}"
        for i, (x, y) in enumerate(zip(a, b)):
            problem = _compare(x, y, f"{where}[{i}]", tolerance, worst)
            if problem:
                return problem
        return None
    if isinstance(a, float):
        scale = abs(a)
        if not (a == b or abs(a - b) <= tolerance.atol + tolerance.rtol * scale):
            return f"{where} differs: {b!r} != {a!r}"
        return None
    if type(a).__eq__ is object.__eq__ and hasattr(a, "__dict__"):
        # No equality of its own: compare what it holds.
        return _compare(vars(a), vars(b), where, tolerance, worst)
    if not bool(a == b):
        return f"{where} differs: {b!r} != {a!r}"
    return None


def _compare_tensors(a: torch.Tensor, b: torch.Tensor, where: str, tolerance: Tolerance, worst: list) -> str | None:
    if a.shape != b.shape:
        return f"{where} has shape {tuple(b.shape)}, the original's {tuple(a.shape)}"
    if a.dtype != b.dtype and not (a.dtype == torch.float32 and b.dtype == tolerance.low_dtype):
        return f"{where} is {b.dtype}, the original's is {a.dtype}"
    if a is b:  # the reference against itself (is it comparable at all?)
        return None
    # float32 arithmetic for float32 and narrower (its rounding is far below any tolerance), float64 otherwise: on
    # GPT-2's 8x128x50257 logits, float64 copies and masks took seconds per comparison.
    work = torch.float32 if a.is_floating_point() and a.dtype != torch.float64 else torch.float64
    ref, out = a.detach().cpu().to(work), b.detach().cpu().to(work)
    if ref.numel():
        # One pass for the common case: the largest difference is finite only when both are finite everywhere
        # (an inf or a NaN on either side makes it inf or NaN), which saves two isfinite passes over the outputs.
        diff = (ref - out).abs().max().item()
        if math.isfinite(diff):
            return _within(diff, ref.abs().max().item(), where, tolerance, worst)
    if not torch.equal(torch.isnan(ref), torch.isnan(out)):
        return f"{where} has NaNs in different places"
    finite = torch.isfinite(ref)
    if not torch.equal(ref[~finite].nan_to_num(), out[~finite].nan_to_num()):
        return f"{where} has infinities in different places"
    if ref.numel() == 0 or not finite.any():
        return None
    diff = (ref[finite] - out[finite]).abs().max().item()
    scale = ref[finite].abs().max().item()
    return _within(diff, scale, where, tolerance, worst)


def _within(diff: float, scale: float, where: str, tolerance: Tolerance, worst: list) -> str | None:
    error = diff / scale if scale > 0 else diff
    worst[0] = max(worst[0], error)
    if diff > tolerance.atol + tolerance.rtol * scale:
        return (f"{where}: max difference {diff:.3g} at output scale {scale:.3g} "
                f"(relative {error:.2e} > rtol {tolerance.rtol:.0e})")
    return None
