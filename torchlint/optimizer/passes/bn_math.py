"""The arithmetic of folding an eval-mode BatchNorm into the layer before it (no graph code here).

In eval mode BatchNorm is a per-channel affine map y = x * scale + shift with
scale = weight / sqrt(running_var + eps) and shift = bias - running_mean * scale, so it can be folded into
the weight and bias of a preceding convolution or linear layer along the dimension that layer produces.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_weights, fuse_linear_bn_weights


def fold_into_conv(conv: nn.modules.conv._ConvNd, bn: nn.modules.batchnorm._BatchNorm) -> nn.Module:
    """A copy of `conv` that computes bn(conv(x)). Handles Conv1d/2d/3d and ConvTranspose1d/2d/3d, grouped too."""
    fused = _copy_without_params(conv)
    transposed = conv.transposed
    if transposed and conv.groups > 1:
        weight, bias = _fold_grouped_transposed(conv, bn)
    else:
        # torch's helper scales dim 0 (Conv) or dim 1 (ConvTranspose, weight is in x out/groups x k...),
        # which is the output-channel dim only when groups == 1 for the transposed case; handled above.
        weight, bias = fuse_conv_bn_weights(
            conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias, transpose=transposed
        )
    fused.weight, fused.bias = weight, bias
    return fused


def fold_into_linear(linear: nn.Linear, bn: nn.modules.batchnorm._BatchNorm) -> nn.Linear:
    """A copy of `linear` that computes bn(linear(x)), valid only when bn normalises the features linear produces
    (BatchNorm1d on 2-D input)."""
    fused = _copy_without_params(linear)
    bn_weight = bn.weight if bn.weight is not None else torch.ones_like(bn.running_mean)
    bn_bias = bn.bias if bn.bias is not None else torch.zeros_like(bn.running_mean)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        linear.weight, linear.bias, bn.running_mean, bn.running_var, bn.eps, bn_weight, bn_bias
    )
    return fused


def _fold_grouped_transposed(conv, bn) -> tuple[nn.Parameter, nn.Parameter]:
    scale, shift = _scale_shift(bn)
    groups, in_channels = conv.groups, conv.weight.shape[0]
    kernel = conv.weight.shape[2:]
    out_per_group = conv.weight.shape[1]
    w = conv.weight.detach().reshape(groups, in_channels // groups, out_per_group, *kernel)
    w = w * scale.reshape(groups, 1, out_per_group, *([1] * len(kernel)))
    bias = conv.bias.detach() if conv.bias is not None else torch.zeros_like(scale)
    weight = nn.Parameter(w.reshape(conv.weight.shape), conv.weight.requires_grad)
    return weight, nn.Parameter(bias * scale + shift, conv.weight.requires_grad)


def _scale_shift(bn) -> tuple[torch.Tensor, torch.Tensor]:
    mean, var = bn.running_mean.detach(), bn.running_var.detach()
    weight = bn.weight.detach() if bn.weight is not None else torch.ones_like(mean)
    bias = bn.bias.detach() if bn.bias is not None else torch.zeros_like(mean)
    scale = weight * torch.rsqrt(var + bn.eps)
    return scale, bias - mean * scale


def _copy_without_params(module: nn.Module) -> nn.Module:
    # Deep-copy the module's configuration but not its (about to be replaced) weights.
    memo = {id(p): None for p in module.parameters(recurse=False)}
    return copy.deepcopy(module, memo)
