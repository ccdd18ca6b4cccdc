"""Fold eval-mode BatchNorm (module or F.batch_norm) into the Conv/ConvTranspose/Linear that feeds it."""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.nn.modules.batchnorm import _BatchNorm

from .base import PassContext, PassResult, call_sites, finish, fresh_name, set_submodule, submodules, tensor_shape
from ..origins import origin_of, record, with_batchnorm
from .bn_math import fold_into_conv, fold_into_linear

_STANDARD_FORWARDS = (_BatchNorm.forward, nn.SyncBatchNorm.forward)
_BN_DEFAULTS = {"weight": None, "bias": None, "training": False, "momentum": 0.1, "eps": 1e-5}
# Functional batch norms by their positional parameters: F.batch_norm, and ATen's as torch.export records it
# (a norm-act layer's forward, which export flattens, calls it directly).
_FUNCTIONAL_BATCH_NORMS = {
    F.batch_norm: ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"),
    torch.ops.aten.batch_norm.default: (
        "input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps", "cudnn_enabled"),
}


def fold_batchnorm(gm: fx.GraphModule, ctx: PassContext) -> PassResult:
    modules = submodules(gm)
    folded = 0
    for node in list(gm.graph.nodes):
        bn = _batchnorm_of(gm, node, modules)
        if bn is None:
            continue
        label = node.target if node.op == "call_module" else f"{node.name} (F.batch_norm)"
        if isinstance(bn, str):
            ctx.skipped(label, bn)
            continue
        producer = node.args[0] if node.args else None
        reason = _why_not_foldable(producer, bn, modules)
        if reason:
            ctx.skipped(label, reason)
            continue
        layer = modules[producer.target]
        fused = fold_into_linear(layer, bn) if isinstance(layer, nn.Linear) else fold_into_conv(layer, bn)
        record(fused, with_batchnorm(origin_of(layer), bn))
        if call_sites(gm, producer.target) == 1:
            set_submodule(gm, producer.target, fused)
        else:  # the layer is called elsewhere too: give this call its own folded copy
            name = fresh_name(gm, f"{producer.target}_bn")
            gm.add_submodule(name, fused)
            producer.target = name
        modules = submodules(gm)
        node.replace_all_uses_with(producer)
        gm.graph.erase_node(node)
        ctx.rewrote(producer.target, f"folded {bn.kind} `{ctx.where(label)}` into {type(layer).__name__}")
        folded += 1
    return PassResult(finish(gm), folded > 0)


def _batchnorm_of(gm, node: fx.Node, modules):
    """A view of the BatchNorm that `node` applies (kind, running stats, weight, bias, eps), a string saying why it
    cannot be folded, or None when `node` is no BatchNorm."""
    if node.op == "call_module" and isinstance(modules.get(node.target), _BatchNorm):
        bn = modules[node.target]
        kind = type(bn).__name__
        if type(bn).forward not in _STANDARD_FORWARDS:
            return f"{kind} overrides forward(); its computation may not be a BatchNorm"
        if bn.training:
            return f"{kind} is in training mode (uses batch statistics)"
        if bn.running_mean is None or bn.running_var is None:
            return f"{kind} has no running statistics (track_running_stats=False): it uses batch statistics"
        return SimpleNamespace(
            kind=kind, num_features=bn.num_features, batchnorm1d=isinstance(bn, nn.BatchNorm1d),
            running_mean=bn.running_mean, running_var=bn.running_var, weight=bn.weight, bias=bn.bias, eps=bn.eps,
        )
    if node.op == "call_function" and node.target in _FUNCTIONAL_BATCH_NORMS:
        args = dict(_BN_DEFAULTS)
        args.update(zip(_FUNCTIONAL_BATCH_NORMS[node.target], node.args))
        args.update(node.kwargs)
        if args["training"] is not False:
            return "F.batch_norm with training=True (or not a constant) uses batch statistics"
        tensors = {}
        for name in ("running_mean", "running_var", "weight", "bias"):
            value = args[name]
            if value is None and name in ("weight", "bias"):
                tensors[name] = None
            elif isinstance(value, fx.Node) and value.op == "get_attr":
                tensors[name] = _fetch(gm, value.target)
            else:
                return f"F.batch_norm's {name} is computed at run time, not a parameter or buffer"
        if not isinstance(args["eps"], float):
            return "F.batch_norm's eps is not a constant"
        return SimpleNamespace(
            kind="F.batch_norm", num_features=tensors["running_mean"].numel(), batchnorm1d=None, eps=args["eps"],
            **tensors,
        )
    return None


def _why_not_foldable(producer, bn, modules) -> str | None:
    if not isinstance(producer, fx.Node) or producer.op != "call_module":
        return "input does not come from a Conv/ConvTranspose/Linear module: nothing to fold into"
    layer = modules[producer.target]
    if not isinstance(layer, (nn.modules.conv._ConvNd, nn.Linear)):
        return f"input comes from {type(layer).__name__}, not a Conv/ConvTranspose/Linear: nothing to fold into"
    if len([user for user in producer.users if not _reads_metadata_only(user)]) != 1:
        return f"the output of `{producer.target}` is also used elsewhere; folding would change that use"
    kind = type(layer).__name__
    out_shape = tensor_shape(producer)
    if isinstance(layer, nn.Linear):
        if bn.num_features != layer.out_features:
            return f"BatchNorm has {bn.num_features} features, Linear produces {layer.out_features}"
        if bn.batchnorm1d is False:
            return "BatchNorm2d/3d normalises dim 1, not the last dim that Linear produces"
        if out_shape is None:
            return "cannot tell whether the BatchNorm normalises the Linear's features (2-D input) or dim 1 of a " \
                "3-D input; pass example_inputs"
        if len(out_shape) != 2:
            return f"BatchNorm normalises dim 1 of a {len(out_shape)}-D tensor, but Linear produces the last dim"
        return None
    if bn.num_features != layer.out_channels:
        return f"BatchNorm has {bn.num_features} features, {kind} produces {layer.out_channels} channels"
    spatial = len(layer.kernel_size)
    if out_shape is not None and len(out_shape) != spatial + 2:
        return f"unbatched {kind} input: BatchNorm would normalise a spatial dim, not the channels"
    if layer.weight.dtype != bn.running_mean.dtype:
        return "Conv and BatchNorm have different dtypes"
    return None


_METADATA_ATTRIBUTES = {"ndim", "shape", "dtype", "device", "is_cuda"}
_METADATA_METHODS = {"dim", "size", "ndimension"}


def _reads_metadata_only(user: fx.Node) -> bool:
    """`x.ndim`, `x.shape`, `x.size()`...: folding keeps the layer's output shape, dtype and device, so such uses
    (shape asserts in timm's norm layers) see the same values."""
    if user.op == "call_function" and user.target is getattr and len(user.args) == 2:
        return user.args[1] in _METADATA_ATTRIBUTES
    return user.op == "call_method" and user.target in _METADATA_METHODS


def _fetch(gm: fx.GraphModule, target: str):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value
