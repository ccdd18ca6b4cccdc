"""Store conv/linear weights in the autocast dtype once, in eval mode.

CPU autocast casts every fp32 weight to bf16 on every call; with the weights already in bf16 that cast is a
no-op (measured 2.0x vs 0.8x for an MLP at batch 1). Verified like every pass: bf16 weights cost accuracy.
"""

from __future__ import annotations

from torch import nn

from ..modules import FusedConv2d, FusedLinear
from ..origins import origin_of, record
from .base import PassContext, PassResult

_LAYERS = (nn.modules.conv._ConvNd, nn.Linear, FusedConv2d, FusedLinear)


def cast_weights(model: nn.Module, ctx: PassContext) -> PassResult:
    dtype = ctx.autocast_dtype
    count = 0
    for name, module in model.named_modules():
        # Not nn.MultiheadAttention's in_proj weights: with them in bf16 under autocast, attention measured 6x
        # slower (23 ms vs 3.8 ms, batch 16 x 64 tokens x 256 features, one thread).
        names = ("weight", "bias") if isinstance(module, _LAYERS) else ()
        changed = False
        if names and getattr(module, "weight", None) is not None:
            record(module, origin_of(module))  # before the weights are replaced: the originals are theirs
        for param_name in names:
            param = getattr(module, param_name, None)
            if isinstance(param, nn.Parameter) and param.is_floating_point() and param.dtype != dtype:
                # A new Parameter (not param.data = ...): the pre-pass snapshot keeps the fp32 original.
                setattr(module, param_name, nn.Parameter(param.detach().to(dtype), requires_grad=False))
                changed = True
        if changed and isinstance(module, FusedConv2d):
            module.choose_packing(getattr(module, "example_shape", None))  # the best layout differs in bf16
        count += changed
    if count:
        ctx.rewrote("", f"{count} conv/linear layers store their weights in {dtype} "
                        "(cast once instead of on every call)")
    return PassResult(model, count > 0)
