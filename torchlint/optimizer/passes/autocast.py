"""Mixed precision: run the forward under torch.autocast (bf16 on CPU, bf16 or fp16 on CUDA).

Ops autocast keeps in fp32 (softmax, layer_norm, losses...) still get fp32 inputs. Outputs come back as autocast
leaves them (bf16 from a linear layer, float32 from softmax), as from the model under eager torch.autocast, which
the result is timed against. The cast_weights pass, which runs after this one in eval mode, removes autocast's per-call weight casts.
"""

from __future__ import annotations

from torch import nn

from ..modules import AutocastForward
from .base import PassContext, PassResult


def autocast(model: nn.Module, ctx: PassContext) -> PassResult:
    wrapped = AutocastForward(model, ctx.device_type, ctx.autocast_dtype)
    wrapped.training = model.training
    ctx.rewrote("", f"forward runs under torch.autocast({ctx.device_type!r}, dtype={ctx.autocast_dtype}); "
                    "outputs in the dtype autocast gives them")
    return PassResult(wrapped, True)
