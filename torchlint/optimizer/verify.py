"""Running a model the same way twice and comparing the results.

A run is deterministic and leaves no trace: the RNG is seeded (so dropout draws the same masks), buffers such
as BatchNorm running statistics and parameter gradients are restored afterwards, and inputs are cloned so a
model that writes into its inputs cannot change the next run.

Two outputs match when, for every tensor, max|optimized - original| <= atol + rtol * max|original|: the error
is measured relative to the scale of the output, not element by element, so tiny entries do not dominate.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

SEED = 0


@dataclass
class Tolerance:
    rtol: float
    atol: float


# fp32 rewrites only reorder floating-point arithmetic: differences are rounding, ~1e-6 of the output scale.
FP32 = Tolerance(rtol=1e-4, atol=1e-5)
# bf16 keeps 8 bits of mantissa (~0.4% per op) and errors grow with depth; fp16 keeps 11 bits.
LOW_PRECISION = {torch.bfloat16: Tolerance(rtol=5e-2, atol=1e-3), torch.float16: Tolerance(rtol=1e-2, atol=1e-3)}


@dataclass
class Run:
    output: object
    backward_error: str | None = None


def as_call_arguments(example_inputs) -> tuple[tuple, dict]:
    """example_inputs may be one tensor, a tuple/list of positional arguments, or a dict of keyword arguments."""
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,), {}
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def run(model: nn.Module, args: tuple, kwargs: dict, training: bool, call=None) -> Run:
    """Run `model` (or `call`, a function standing in for it) once, deterministically and without side effects."""
    call = call or model
    args, kwargs = tree_map(_clone, (args, kwargs))
    with _restored_state(model), torch.random.fork_rng(devices=_cuda_devices(model)):
        torch.manual_seed(SEED)
        if not training:
            with torch.no_grad():
                return Run(tree_map(_detach, call(*args, **kwargs)))
        output = call(*args, **kwargs)
        return Run(tree_map(_detach, output), _backward_error(output))


def _backward_error(output) -> str | None:
    leaves, _ = tree_flatten(output)
    total = [t.float().sum() for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
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
    ref_leaves, ref_spec = tree_flatten(reference)
    new_leaves, new_spec = tree_flatten(candidate)
    if ref_spec != new_spec:
        return Comparison(False, math.inf, "the output structure differs")
    worst = 0.0
    for i, (a, b) in enumerate(zip(ref_leaves, new_leaves)):
        if not isinstance(a, torch.Tensor):
            if a != b:
                return Comparison(False, math.inf, f"output {i} differs: {a!r} != {b!r}")
            continue
        if not isinstance(b, torch.Tensor) or a.shape != b.shape:
            return Comparison(False, math.inf, f"output {i} changed shape or type")
        a64, b64 = a.detach().double().cpu(), b.detach().double().cpu()
        if not torch.equal(torch.isnan(a64), torch.isnan(b64)):
            return Comparison(False, math.inf, f"output {i} has NaNs in different places")
        finite = torch.isfinite(a64)
        if not torch.equal(a64[~finite].nan_to_num(), b64[~finite].nan_to_num()):
            return Comparison(False, math.inf, f"output {i} has infinities in different places")
        if a64.numel() == 0 or not finite.any():
            continue
        diff = (a64[finite] - b64[finite]).abs().max().item()
        scale = a64[finite].abs().max().item()
        error = diff / scale if scale > 0 else diff
        worst = max(worst, error)
        if diff > tolerance.atol + tolerance.rtol * scale:
            return Comparison(
                False, error, f"output {i}: max difference {diff:.3g} at output scale {scale:.3g} "
                f"(relative {error:.2e} > rtol {tolerance.rtol:.0e})",
            )
    return Comparison(True, worst, f"max relative error {worst:.2e}")
