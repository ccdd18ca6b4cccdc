"""Fuse Conv2d (+ residual add) (+ activation) and Linear (+ activation) into single oneDNN calls with weights
packed once, the way torch.compile's CPU backend and torch.jit.freeze do.

Each fused call saves the activation's pass over memory (and the add's), and packing the weight once saves the
weight reorder oneDNN otherwise does on every call. CPU only, eval only (packed weights have no autograd).
"""

from __future__ import annotations

import operator

import torch
from torch import fx, nn

from ..modules import FusedConv2d, FusedLinear
from ..origins import origin_of, record
from .activations import activation_of, onednn_post_op
from .base import PassContext, PassResult, finish, fresh_name, submodules, tensor_shape
from .channels_last import _outputs_contiguous, views_to_reshapes

_ADDS = (operator.add, torch.add)
_DTYPES = (torch.float32, torch.bfloat16)


def fuse_onednn(gm: fx.GraphModule, ctx: PassContext) -> PassResult:
    modules = submodules(gm)
    shared = _shared_storages(gm)
    erased: set[fx.Node] = set()
    left = 0  # layers not fused because the time budget ran out
    for node in list(gm.graph.nodes):
        if node in erased or node.op != "call_module":
            continue
        layer = modules.get(node.target)
        if type(layer) is nn.Conv2d or (isinstance(layer, nn.Linear) and type(layer).forward is nn.Linear.forward):
            reason = _why_not(layer, node, shared)
            if reason:
                ctx.skipped(node.target, reason)
                continue
            if left or ctx.out_of_time():
                left += 1
                continue
            erased.update(_fuse(gm, node, layer, modules, ctx))
    if left:
        ctx.skipped("", f"time budget spent: {left} more layers left unfused (optimize(time_budget=...) gives more)")
    if not erased:
        return PassResult(gm, False)
    views_to_reshapes(gm, ctx)  # fused convs return channels_last tensors
    if not ctx.piece:  # see _outputs_contiguous
        _outputs_contiguous(gm)
    return PassResult(finish(gm), True)


def _shared_storages(gm: fx.GraphModule) -> set[int]:
    """Storages that more than one parameter or buffer of the graph's modules holds, or that the graph also reads
    directly: a weight tied to another layer's, like a language model's output layer and its token embedding
    (captured by torch.export, the embedding reads the output layer's weight)."""
    held = [t for _, t in gm.named_parameters(remove_duplicate=False)]
    held += [t for _, t in gm.named_buffers(remove_duplicate=False)]
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = _attribute(gm, node.target)
            if isinstance(value, torch.Tensor):
                held.append(value)
    seen: set[int] = set()
    shared: set[int] = set()
    for tensor in held:
        key = tensor.untyped_storage().data_ptr()
        (shared if key in seen else seen).add(key)
    return shared


def _attribute(gm: fx.GraphModule, target: str):
    owner, _, name = target.rpartition(".")
    try:
        return getattr(gm.get_submodule(owner) if owner else gm, name)
    except AttributeError:
        return None


def _why_not(layer, node, shared: set[int]) -> str | None:
    if layer.weight.dtype not in _DTYPES or layer.weight.device.type != "cpu":
        return f"weight is {layer.weight.dtype} on {layer.weight.device.type}; oneDNN fusion covers fp32/bf16 on CPU"
    if layer.weight.untyped_storage().data_ptr() in shared:
        # The other holder keeps the dense weight, so a packed copy would hold it twice (GPT-2's output layer:
        # 154 MB more); packing measured no faster than the dense weight on such a layer (50257 x 768).
        return "weight tied to another layer's: a packed copy would hold it twice"
    if isinstance(layer, nn.Conv2d):
        if layer.padding_mode != "zeros":
            return f"padding_mode={layer.padding_mode!r} (oneDNN pads with zeros only)"
        if _explicit_padding(layer) is None:
            return "padding='same' with an even kernel pads asymmetrically"
        shape = tensor_shape(node.args[0]) if node.args else None
        if shape is not None and len(shape) != 4:
            return "unbatched input"
    return None


def _explicit_padding(conv: nn.Conv2d):
    if not isinstance(conv.padding, str):
        return list(conv.padding)
    if conv.padding == "valid":
        return [0, 0]
    total = [d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size)]
    if any(t % 2 for t in total):
        return None
    return [t // 2 for t in total]


def _only_user(node: fx.Node) -> fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _fuse(gm, node, layer, modules, ctx) -> list[fx.Node]:
    """Replace `node` and the activation / add (+ relu) that follow it by one fused call; return the erased nodes."""
    pattern, other, post_op, parts = [node], None, ("none", [], ""), [type(layer).__name__]
    user = _only_user(node)
    act = activation_of(user, modules) if user is not None else None
    if act is not None and act.input is node and onednn_post_op(act) is not None:
        pattern.append(user)
        post_op = onednn_post_op(act)
        parts.append(act.kind)
    elif isinstance(layer, nn.Conv2d) and user is not None and _is_plain_add(user):
        a, b = user.args
        candidate = b if a is node else a
        if isinstance(candidate, fx.Node) and candidate is not node:
            other = candidate
            pattern.append(user)
            parts.append("add")
            after = _only_user(user)
            act = activation_of(after, modules) if after is not None else None
            if act is not None and act.input is user and act.kind == "relu":
                pattern.append(after)
                post_op = ("relu", [], "")
                parts.append("relu")
    if isinstance(layer, nn.Conv2d):
        fused = FusedConv2d(layer, post_op, padding=_explicit_padding(layer))
        fused.binary = other is not None
    else:
        fused = FusedLinear(layer, post_op)
    record(fused, origin_of(layer))
    if isinstance(fused, FusedConv2d):
        fused.example_shape = tensor_shape(node.args[0])
        fused.choose_packing(fused.example_shape)
    fused.packed_weight()  # pack now, not on the first call
    name = fresh_name(gm, f"{node.target}_fused")
    gm.add_submodule(name, fused)
    last = pattern[-1]
    with gm.graph.inserting_before(last):
        new = gm.graph.call_module(name, (node.args[0],) if other is None else (node.args[0], other))
    new.meta = dict(last.meta)
    last.replace_all_uses_with(new)
    for dead in reversed(pattern):
        gm.graph.erase_node(dead)
    ctx.rewrote(node.target, " + ".join(parts) + " -> one oneDNN call with a packed weight")
    return pattern


def _is_plain_add(node: fx.Node) -> bool:
    if len(node.args) != 2 or node.kwargs:
        return False
    if node.op == "call_function" and node.target in _ADDS:
        return True
    return node.op == "call_method" and node.target == "add"
