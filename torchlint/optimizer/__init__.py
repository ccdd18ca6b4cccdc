"""torchlint.optimizer: make a PyTorch model faster without changing what it computes.

    fast = torchlint.optimize(model, example_inputs=torch.randn(16, 3, 224, 224))
    print(torchlint.explain(fast))

Passes (each in torchlint/optimizer/passes/, run in this order; each can be rolled back on its own):

- remove_dropout       drop Dropout / Identity (eval only)
- fold_batchnorm       fold eval-mode BatchNorm (module or F.batch_norm, subclasses too) into the preceding
                       Conv1d/2d/3d, ConvTranspose1d/2d/3d or Linear (Linear only when the BatchNorm normalises the
                       features the Linear produces; needs example_inputs to see the input rank)
- channels_last        2-D convolutions in channels_last memory format
- onednn_fusion        Conv2d (+ residual add) (+ activation) and Linear (+ activation) as single oneDNN calls with
                       weights packed once (CPU, eval only)
- inplace_activations  activations overwrite their input where nothing else uses it and autograd allows
- autocast             (only with autocast=...) run the forward under torch.autocast
- cast_weights         (only with autocast=..., eval only) store conv/linear weights in bf16/fp16 once instead of
                       letting autocast re-cast them on every call

The model is traced with torch.fx. When the whole model does not trace (data-dependent control flow...), the
largest submodules that do trace are optimized instead and the report says which did not trace and why; a model
with nothing traceable comes back unchanged (and working).

Verification: with example_inputs, the original model's outputs are recorded first. The float32 passes are
applied, then the model is run and compared with the original; then the same for the mixed-precision passes.
When a group's result differs, the group starts again from its starting point, one pass at a time, verifying after
each, and a pass that breaks equality (or raises) is rolled back and reported. Outputs match when, for each output
tensor, max|optimized - original| <= atol + rtol * max|original| (relative to the output's scale). Defaults:
rtol=1e-4, atol=1e-5 for float32 passes; rtol=5e-2, atol=1e-3 for bfloat16 autocast and rtol=1e-2, atol=1e-3 for
float16 (rtol/atol given to optimize() replace both). Runs are seeded, so dropout draws the same masks, and leave
buffers (BatchNorm running statistics) and gradients as they were. In training mode the backward pass must
also still run. Without example_inputs nothing is verified and the report says so.

The returned module is specialised to the mode (train/eval) it was optimized in (fx records the branches taken
for that mode); in eval mode it is meant for inference (packed oneDNN weights have no autograd). Build an
optimizer for training after optimize(), or use inplace=True, which keeps the caller's Parameter objects in
training mode.

Importing this package does not import torch; `optimize` and `explain` do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence, Union

if TYPE_CHECKING:  # annotations only: importing this package does not import torch
    import torch
    from torch import nn

    from .passes import Pass
    from .report import Report

__all__ = ["optimize", "explain"]


def optimize(
    model: nn.Module,
    example_inputs: Any = None,
    *,
    dtype: Union[torch.dtype, str, bool, None] = None,
    inplace: bool = False,
    passes: Sequence[Union[str, Pass, Callable]] | None = None,
    verify: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    measure: bool | None = None,
    time_limit: float = 10.0,
    autocast: Union[torch.dtype, str, bool, None] = None,
) -> nn.Module:
    """Return an optimized nn.Module computing what `model` computes; `explain(result)` says what was done.

    model: an nn.Module. In eval mode every pass may run and the result is an inference model (see the package
        docstring); in training mode only channels_last, in-place activations and autocast run.
    example_inputs: what the model is called with. A tuple is the positional arguments, a dict the keyword
        arguments, anything else (a tensor, a list, ...) the single positional argument. Enables verification,
        timing and shape-dependent rewrites (Linear + BatchNorm1d folding, weight packing for this shape).
    dtype: None (default, float32 only); "bf16"/torch.bfloat16 or "fp16"/torch.float16 to also run in mixed
        precision under torch.autocast; True to pick for the device (bf16 on CPUs with native bf16). fp16 is
        refused on CPUs without native fp16.
    inplace: False (default) works on a deep copy and never touches `model`; True saves the copy but leaves
        `model` itself in an unspecified state: use only the returned module.
    passes: names from torchlint.optimizer.passes.PASSES, Pass objects, or callables (GraphModule, PassContext)
        -> PassResult, run in the given order. Default: all float32 passes (+ mixed precision with dtype).
    verify: compare with the original after each group of passes when example_inputs are given, rolling back the
        passes that change the outputs.
    rtol, atol: the verification tolerances (see the package docstring for the defaults).
    measure: time each group of passes against the model before it on example_inputs (eval mode) and keep the
        group only if it is faster beyond noise, so the result is never slower than `model`. None (default) means
        True unless the environment variable TORCHLINT_MEASURE is "0" (for deterministic test suites).
    time_limit: seconds of timing, at most, spent by `measure` (after two warm-up calls of each variant).
    autocast: the former name of `dtype`, still accepted.
    """
    from .pipeline import Options
    from .pipeline import optimize as _optimize

    if autocast is not None and dtype is not None and autocast != dtype:
        raise ValueError("pass dtype= or its former name autocast=, not both")
    options = Options(inplace=inplace, dtype=dtype if dtype is not None else autocast, passes=passes, verify=verify,
                      rtol=rtol, atol=atol, measure=measure, time_limit=time_limit)
    return _optimize(model, example_inputs, options)


def explain(model: nn.Module) -> Report:
    """The Report of what `optimize` did to produce `model` (also at `model.torchlint_report`).

    `print(report)` shows a summary and one line per pass; `report.format(verbose=True)` every layer.
    Raises ValueError for a module that optimize() did not return.
    """
    from .pipeline import explain as _explain

    return _explain(model)
