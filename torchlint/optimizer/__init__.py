"""torchlint.optimizer: make a PyTorch model faster without changing what it computes.

    fast = torchlint.optimize(model.eval(), example_inputs=torch.randn(16, 3, 224, 224))
    print(torchlint.explain(fast))        # one line per pass; .format(verbose=True) for every layer

Steps: capture (copy the model, run it once on example_inputs for reference outputs and shapes, trace it with
torch.fx, or capture it with torch.export when fx cannot trace it whole), passes (in two groups: float32, then mixed precision), verify (after each group; a group that changes
the outputs is replayed pass by pass and the passes that break equality are rolled back), measure (each group is
timed against the model before it and kept only if it is faster beyond noise), report.

Passes (each in torchlint/optimizer/passes/, run in this order; each returns a torch.fx PassResult):

- remove_dropout       drop Dropout / Identity (eval only)
- fold_batchnorm       fold eval-mode BatchNorm (module, F.batch_norm or ATen's batch_norm in an exported graph;
                       subclasses too, and norm-act layers with a forward of their own, traced through) into the
                       preceding Conv1d/2d/3d, ConvTranspose1d/2d/3d or Linear (Linear only when the BatchNorm
                       normalises the features the Linear produces; needs example_inputs to see the input rank)
- channels_last        2-D convolutions in channels_last memory format
- onednn_fusion        Conv2d (+ residual add) (+ activation) and Linear (+ activation) as single oneDNN calls with
                       weights packed once, for any input shape (CPU, eval only)
- inplace_activations  activations overwrite their input where nothing else uses it and autograd allows
- autocast             (only with dtype=...) run the forward under torch.autocast
- cast_weights         (only with dtype=..., eval only) store conv/linear weights in bf16/fp16 once instead of
                       letting autocast re-cast them on every call (not MultiheadAttention's: measured 6x slower)

Capture: when torch.fx cannot trace the whole model and example_inputs are given (eval mode), torch.export
(non-strict) captures it, every input dimension dynamic where the code allows (a batch of one included), and the
ATen calls on a Linear's, Conv's or BatchNorm's own weights (and addmm on a transposed weight, GPT-2's Conv1D) are
lifted back to module calls so the same passes run; the outputs keep their containers (ModelOutput, dict, named
tuple). A call that export's input guards reject runs the original model's code. When neither captures the whole
model (data-dependent control flow...), the largest submodules that trace are optimized instead and the report says which did not trace and why; a model with nothing traceable comes
back unchanged (and working). example_inputs: a tuple is the positional arguments, a dict the keyword arguments,
anything else (a tensor, a list...) the one positional argument.

Verification: outputs are compared by structure and value: containers by type (an OrderedDict must stay one),
recursively; named tuples, dataclasses and ModelOutput-like objects field by field; non-tensors by equality;
tensors match when max|optimized - original| <= atol + rtol * max|original| (relative to the output's scale).
Defaults: rtol=1e-4, atol=1e-5 for float32 passes; rtol=5e-2, atol=1e-3 for bfloat16 and rtol=1e-2, atol=1e-3 for
float16 (rtol/atol given to optimize() replace both). Runs are seeded, so dropout draws the same masks, and leave
buffers (BatchNorm running statistics) and gradients as they were. In training mode the backward pass must also
still run. Without example_inputs nothing is verified or timed and the report says so; a model whose outputs
cannot be compared (an __eq__ that raises) comes back unchanged, with the reason.

Measurement (measure=True, the default; TORCHLINT_MEASURE=0 turns the default off): in eval mode with
example_inputs, each group's result and the model before it (with dtype=..., only the final result, against the
model as given under torch.autocast, what the user would otherwise run) run in alternation under no_grad (one
warm-up call each, then rounds until the answer is clear after 15, at most 200, within time_limit seconds, at least 3); each
round gives the ratio of two neighbouring runs, so load changes cancel, and the group is kept only when the median
ratio shows a gain above 2% and above twice its standard error. So the result is never slower than the model given,
on the example inputs. With dtype=..., the result is the model as given under torch.autocast when the rewrites do
not beat it, or when the time budget runs out before the mixed-precision group; its outputs come back in the dtype
autocast gives them (a linear layer's in bfloat16), as from eager code under torch.autocast. The report gives the
measured speed-up and the transform time, and where the time went.

What an optimized model is:

- Optimized in eval mode: an inference model. Its class is a subclass of the model's own class that refuses
  .train() and parameters that require grad (they are frozen; re-enabling them raises at the next forward) with a
  message saying how to get a trainable model (optimize in train mode, or train the original and re-optimize).
  Gradients with respect to inputs are right (fused layers run plain torch ops when an input requires grad).
  state_dict() gives the original model's keys and values (folded weights computed back: equal up to rounding);
  load_state_dict takes the original's keys and recomputes the folded and packed layers, as optimize() would
  after loading. .to()/.double()/.half()/.cuda() work (fused layers run plain torch ops outside float32/bfloat16
  on CPU). deepcopy, pickle and torch.save keep it working; torch.jit.trace and torch.compile work but give up
  the packed layers (measured slower than the optimized model alone: use it as it is, or compile the original);
  torch.jit.script raises and points to torch.jit.trace. Memory: one copy of the weights (packed layers keep only
  the packed weight; the originals they came from are computed back when needed; a weight tied to another
  layer's, like a language model's output layer, stays unpacked): resnet50 holds 98 MB as given and optimized in
  fp32. With bf16, the float32 originals of the weights cast to bf16 are not kept either: state_dict() gives the
  bf16 values in float32.
- Optimized in train mode: only channels_last, in-place activations and autocast run, all differentiable; the
  model trains and follows .train()/.eval(), because modules whose graph would depend on the mode (code reading
  self.training, like stochastic depth) are not traced, while Dropout and BatchNorm stay modules that read their
  mode at run time. Its state_dict keys are the original's and load_state_dict works.

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
    time_budget: float | None = 60.0,
    autocast: Union[torch.dtype, str, bool, None] = None,
) -> nn.Module:
    """Return an optimized nn.Module computing what `model` computes; `explain(result)` says what was done.

    model: an nn.Module. In eval mode every pass may run and the result is an inference model (see the package
        docstring); in training mode only channels_last, in-place activations and autocast run.
    example_inputs: what the model is called with. A tuple is the positional arguments, a dict the keyword
        arguments, anything else (a tensor, a list, ...) the single positional argument. Enables verification,
        timing and shape-dependent rewrites (Linear + BatchNorm1d folding needs the input rank).
    dtype: None (default, float32 only); "bf16"/torch.bfloat16 or "fp16"/torch.float16 to also run in mixed
        precision under torch.autocast (outputs in the dtype autocast gives them, as from eager autocast); True to pick for the device (bf16 on CPUs with native bf16). fp16 is
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
    time_limit: seconds of timing, at most, spent by `measure` (after one warm-up call of each variant).
    time_budget: seconds optimize() may take in all (None: no bound). Once spent, no further pass is tried (the
        passes kept so far stay, verified), oneDNN fusion stops between layers, and the report says what was not
        tried; timing starts only when its minimum (one warm-up call and three rounds of each variant, estimated
        from the original model's call on the example inputs) fits in the budget left, else the group is not kept,
        and it stops at the budget. Capture (torch.export) and a verification run are not interrupted. With
        dtype=..., a budget spent before the mixed-precision group gives the model as given under torch.autocast.
        The report's `seconds` (and its `time:` line) say where the time went: capture, each group of passes,
        verification, timing.
    autocast: the former name of `dtype`, still accepted.
    """
    from .pipeline import Options
    from .pipeline import optimize as _optimize

    if autocast is not None and dtype is not None and autocast != dtype:
        raise ValueError("pass dtype= or its former name autocast=, not both")
    options = Options(inplace=inplace, dtype=dtype if dtype is not None else autocast, passes=passes, verify=verify,
                      rtol=rtol, atol=atol, measure=measure, time_limit=time_limit, time_budget=time_budget)
    return _optimize(model, example_inputs, options)


def explain(model: nn.Module) -> Report:
    """The Report of what `optimize` did to produce `model` (also at `model.torchlint_report`).

    `print(report)` shows a summary and one line per pass; `report.format(verbose=True)` every layer.
    Raises ValueError for a module that optimize() did not return.
    """
    from .pipeline import explain as _explain

    return _explain(model)
