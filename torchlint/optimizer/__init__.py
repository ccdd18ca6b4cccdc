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

from typing import Any

__all__ = ["optimize", "explain"]


def optimize(
    model: Any,
    example_inputs: Any = None,
    *,
    inplace: bool = False,
    autocast: Any = None,
    passes: Any = None,
    verify: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
) -> Any:
    """Return an optimized nn.Module computing what `model` computes; `explain(result)` says what was done.

    model: an nn.Module, in eval mode for inference (all passes) or training mode (channels_last, in-place
        activations, autocast; eval-only passes are refused with a report line).
    example_inputs: a tensor, a tuple of positional arguments, or a dict of keyword arguments. Enables
        verification and shape-dependent rewrites (Linear + BatchNorm1d folding, weight packing for this shape).
    inplace: False (default) works on a deep copy and never touches `model`; True saves the copy but leaves
        `model` itself in an unspecified state: use only the returned module.
    autocast: None/False (default, float32 only), "bf16", "fp16", or True to pick (bf16 on CPUs with native
        bf16, bf16 or fp16 on CUDA). fp16 is refused on CPUs without native fp16.
    passes: names from torchlint.optimizer.passes.PASSES, Pass objects, or callables (GraphModule, PassContext)
        -> GraphModule, run in the given order. Default: all float32 passes (+ mixed precision with autocast).
    verify: compare with the original after each pass when example_inputs are given, rolling back failures.
    rtol, atol: the verification tolerances (see the module docstring for the defaults).
    """
    from .pipeline import optimize as _optimize

    return _optimize(
        model, example_inputs, inplace=inplace, autocast=autocast, passes=passes, verify_=verify, rtol=rtol,
        atol=atol,
    )


def explain(model: Any) -> Any:
    """The Report of what `optimize` did to produce `model` (also at `model.torchlint_report`).

    Raises ValueError for a module that optimize() did not return.
    """
    from .pipeline import explain as _explain

    return _explain(model)
