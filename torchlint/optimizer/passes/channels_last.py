"""Run 2-D convolutions in channels_last (NHWC) memory format, which oneDNN and cuDNN run faster than NCHW.

Conv weights are stored channels_last and each conv input is made channels_last (a no-op when it already is);
the element-wise ops, pooling and BatchNorm between convs keep the format. Values never change, only strides,
so `.view()` calls that need NCHW-contiguous input become `.reshape()` and the model's 4-D outputs are returned
NCHW.
"""

from __future__ import annotations

import collections

import torch
from torch import fx, nn

from ..modules import FusedConv2d
from ..origins import origin_of, record
from .base import PassContext, PassResult, finish, submodules, tensor_shape

_CONVS = (nn.Conv2d, nn.ConvTranspose2d)


def channels_last(gm: fx.GraphModule, ctx: PassContext) -> PassResult:
    modules = submodules(gm)
    conv_nodes = [
        n for n in gm.graph.nodes if n.op == "call_module" and isinstance(modules[n.target], _CONVS + (FusedConv2d,))
    ]
    if not conv_nodes:
        return PassResult(gm, False)
    if ctx.device_type == "cuda" and ctx.autocast_dtype is None:
        # cuDNN's NHWC kernels pay off with tensor-core dtypes; in fp32 they can be slower than NCHW.
        ctx.skipped("", "on CUDA channels_last pays with fp16/bf16 tensor cores: pass autocast to enable it")
        return PassResult(gm, False)
    for target in sorted({n.target for n in conv_nodes}):
        layer = modules[target]
        weight = layer.weight
        if ctx.training:
            # Same Parameter object, new strides: an optimizer holding it keeps working.
            weight.data = weight.data.contiguous(memory_format=torch.channels_last)
        elif isinstance(weight, nn.Parameter) and not weight.is_contiguous(memory_format=torch.channels_last):
            # A new tensor: the untouched copy of the model (returned when a group does not pay) shares the old one.
            record(layer, origin_of(layer))  # its checkpoint keys still name the original weight
            layer.weight = nn.Parameter(weight.detach().contiguous(memory_format=torch.channels_last),
                                        requires_grad=weight.requires_grad)
    converted: dict[fx.Node, fx.Node] = {}
    for node in conv_nodes:
        source = node.args[0]
        shape = tensor_shape(source)
        if not isinstance(source, fx.Node) or (shape is not None and len(shape) != 4):
            continue  # unbatched input: no channels_last for 3-D tensors
        if source not in converted:
            with gm.graph.inserting_after(source):
                converted[source] = gm.graph.call_method(
                    "contiguous", (source,), {"memory_format": torch.channels_last}
                )
            converted[source].meta = dict(source.meta)
        node.replace_input_with(source, converted[source])
    ctx.rewrote("", f"{len(conv_nodes)} convolutions run channels_last ({len(converted)} input conversions)")
    views_to_reshapes(gm, ctx)
    if not ctx.piece:  # see _outputs_contiguous
        _outputs_contiguous(gm)
    return PassResult(finish(gm), True)


def views_to_reshapes(gm: fx.GraphModule, ctx: PassContext) -> None:
    """`.view()` fails on a channels_last tensor whose shape change crosses the channel dim; `.reshape()` gives the
    same values. Rewritten only where neither the viewed tensor nor the view is modified in place afterwards,
    since a reshape may copy instead of aliasing."""
    for node in gm.graph.nodes:
        if node.op != "call_method" or node.target != "view" or not isinstance(node.args[0], fx.Node):
            continue
        if _mutated_in_place(node) or _mutated_in_place(node.args[0]):
            ctx.skipped(node.name, "`.view()` kept: its result or input is modified in place later")
            continue
        node.target = "reshape"


def _mutated_in_place(node: fx.Node) -> bool:
    for user in node.users:
        if user.op == "call_method" and str(user.target).endswith("_"):
            return True
        if user.kwargs.get("inplace") is True:
            return True
        if user.op == "call_module" and getattr(user.graph.owning_module.get_submodule(user.target), "inplace", False):
            return True
    return False


def contiguous_if_tensor(value):
    return value.contiguous() if isinstance(value, torch.Tensor) else value


def _outputs_contiguous(gm: fx.GraphModule) -> None:
    """Return 4-D outputs NCHW-contiguous, as the caller got them before. Only for the model's own outputs: a
    traced submodule hands channels_last tensors to its parent, so the next traced submodule needs no conversion
    back (the parent's code sees the same values, with other strides)."""
    output = next(n for n in gm.graph.nodes if n.op == "output")

    def restore(value, before=output):
        if isinstance(value, fx.Node) and value.op == "call_function" and value.target is collections.OrderedDict:
            value.args = fx.node.map_arg(value.args, lambda v: restore(v, value))  # see Tracer.create_arg
            return value
        if not isinstance(value, fx.Node):
            return value
        shape = tensor_shape(value)
        if shape is not None and len(shape) != 4:
            return value
        with gm.graph.inserting_before(before):
            if shape is None:  # not seen on the example inputs: decide at run time
                node = gm.graph.call_function(contiguous_if_tensor, (value,))
            else:
                node = gm.graph.call_method("contiguous", (value,))
        node.meta = dict(value.meta)
        return node

    output.args = (fx.node.map_arg(output.args[0], restore),)
