"""Capturing a whole model with torch.export (non-strict) when torch.fx's symbolic tracing cannot.

Symbolic tracing fails on models whose Python code inspects tensors (Hugging Face transformers check shapes and
masks); torch.export runs the code on fake tensors instead and records the ATen operations, with every dimension of
every input marked dynamic where the code allows it, so the graph serves other batch sizes and sequence lengths.
Its outputs keep their container types (ModelOutput, dict, named tuple), restored by the graph's pytree codegen.

The passes work on module calls, so the calls export flattened are lifted back onto the model's own modules:
`aten.linear` on a Linear's weight becomes a call of that Linear, `aten.conv2d` of that Conv2d, batch norm of that
BatchNorm; `aten.addmm(bias, x, weight)` on a module storing its weight transposed (GPT-2's Conv1D) becomes a call of
a Linear sharing that weight transposed; dropout in eval mode (an identity) is dropped.
"""

from __future__ import annotations

import inspect
import marshal
import math
import operator
import types

import torch
from torch import fx, nn
from torch.fx.experimental import _config as fx_config
from torch.nn.modules.batchnorm import _BatchNorm

from .origins import Origin, record
from .passes.base import fresh_name, set_submodule

aten = torch.ops.aten
_CONVS = {aten.conv1d.default: nn.Conv1d, aten.conv2d.default: nn.Conv2d, aten.conv3d.default: nn.Conv3d}
_BATCH_NORMS = (aten._native_batch_norm_legit_no_training.default,)


def export_graph(model: nn.Module, args: tuple, kwargs: dict) -> fx.GraphModule:
    """The model's forward as one GraphModule with module calls lifted back (raises when export fails)."""
    # export wants the dynamic dimensions by parameter name, in the structure of each argument.
    bound = inspect.signature(model.forward).bind(*args, **kwargs).arguments
    dynamic = {name: _dynamic_dims(value) for name, value in bound.items()}
    # Size-oblivious: a dimension of size 1 in the example (batch 1) stays dynamic instead of being fixed to 1.
    with fx_config.patch(backed_size_oblivious=True):
        program = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic, strict=False)
    exported = program.module()
    # A plain GraphModule holding the same graph and tensors: the one export returns refuses train()/eval() and
    # carries hooks (lambdas) that cannot be pickled. The graph's codegen still restores the output containers.
    gm = fx.GraphModule(exported, exported.graph, type(model).__name__)
    # Export's tracer class needs arguments fx's unpickling does not give: unpickling re-traces with fx's own.
    gm.graph._tracer_cls = gm._tracer_cls = None
    if isinstance(getattr(gm, "_guards_fn", None), nn.Module):
        gm._guards_fn = InputGuards(gm._guards_fn.forward)
    gm.train(model.training)
    lift_module_calls(gm, model)
    return gm


class InputGuards(nn.Module):
    """The input checks export generated (sizes it assumed), as a module that survives pickling: export's own
    holds a function made with exec, which pickle cannot name, so its compiled code is what gets saved."""

    _is_impure = True  # a call without users: fx's dead-code elimination must keep it

    def __init__(self, check) -> None:
        super().__init__()
        self.check = _innermost(check)

    def forward(self, *args):
        return self.check(*args)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["check"] = marshal.dumps(self.check.__code__)
        return state

    def __setstate__(self, state):
        from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

        code = marshal.loads(state["check"])
        namespace = {**SYMPY_INTERP, "math": math, "inf": float("inf")}
        self.__dict__.update(state, check=types.FunctionType(code, namespace))


def _innermost(fn):
    """The function export generated, under the decorator dynamo wraps it in."""
    while True:
        inner = getattr(fn, "__wrapped__", None) or next(
            (c.cell_contents for c in (fn.__closure__ or ()) if isinstance(c.cell_contents, types.FunctionType)), None)
        if inner is None:
            return fn
        fn = inner


def _dynamic_dims(value):
    """Every dimension of every tensor in `value` dynamic where the code allows (Dim.AUTO); None elsewhere."""
    if isinstance(value, torch.Tensor):
        return {d: torch.export.Dim.AUTO for d in range(value.dim())}
    if type(value) in (tuple, list):
        return type(value)(_dynamic_dims(v) for v in value)
    if type(value) is dict:
        return {k: _dynamic_dims(v) for k, v in value.items()}
    return None


def lift_module_calls(gm: fx.GraphModule, model: nn.Module) -> int:
    """Turn ATen calls on a module's own weights back into calls of that module; returns how many were lifted."""
    lifted = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is aten.dropout.default and len(node.args) >= 3 and node.args[2] is False:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            continue
        replacement = _lifted(gm, node, model)
        if replacement is None:
            continue
        path, module, users = replacement
        set_submodule(gm, path, module)
        with gm.graph.inserting_before(node):
            call = gm.graph.call_module(path, (node.args[1] if node.target is aten.addmm.default else node.args[0],))
        call.meta = dict(node.meta)
        for user in users:  # batch norm: its first output, read through getitem
            user.replace_all_uses_with(call)
            gm.graph.erase_node(user)
        if not users:
            node.replace_all_uses_with(call)
        gm.graph.erase_node(node)
        lifted += 1
    if lifted:
        for node in list(gm.graph.nodes):  # the weights the lifted calls read are now read by their modules
            if node.op == "get_attr" and not node.users:
                gm.graph.erase_node(node)
        gm.graph.lint()
        gm.recompile()
    return lifted


def _lifted(gm: fx.GraphModule, node: fx.Node, model: nn.Module):
    """(module path, the module to call there, getitem users to replace) or None."""
    target = node.target
    if target is aten.linear.default:
        owner = _owner(gm, model, node.args[1], node.args[2] if len(node.args) > 2 else None)
        if owner and isinstance(owner[1], nn.Linear) and type(owner[1]).forward is nn.Linear.forward:
            return owner[0], owner[1], []
        return None
    if target in _CONVS:
        owner = _owner(gm, model, node.args[1], node.args[2] if len(node.args) > 2 else None)
        if not owner or type(owner[1]) is not _CONVS[target]:
            return None
        conv = owner[1]
        expected = (list(conv.stride), _padding(conv), list(conv.dilation), conv.groups)
        given = tuple(node.args[3:7])
        defaults = ([1] * len(conv.stride), [0] * len(conv.stride), [1] * len(conv.stride), 1)
        actual = tuple(_normal(given[i]) if i < len(given) else defaults[i] for i in range(4))
        if conv.padding_mode != "zeros" or actual != expected or node.kwargs:
            return None
        return owner[0], conv, []
    if target in _BATCH_NORMS:
        owner = _owner(gm, model, node.args[1], node.args[2])
        users = list(node.users)
        # A subclass with its own forward (batch norm then an activation) is not this call alone: leave the ATen
        # call, which the folding pass handles as a functional batch norm.
        if (not owner or not isinstance(owner[1], _BatchNorm) or owner[1].training
                or type(owner[1]).forward not in (_BatchNorm.forward, nn.SyncBatchNorm.forward)
                or not all(u.target is operator.getitem and u.args[1] == 0 for u in users)):
            return None
        bn = owner[1]
        if not (_attr(gm, node.args[3]) is bn.running_mean and _attr(gm, node.args[4]) is bn.running_var
                and node.args[6] == bn.eps):
            return None
        return owner[0], bn, users
    if target is aten.addmm.default and len(node.args) == 3 and not node.kwargs:
        bias, weight = _attr(gm, node.args[0]), _attr(gm, node.args[2])
        owner = _owner(gm, model, node.args[2], node.args[0])
        if owner is None or weight is None or bias is None or weight.dim() != 2 or bias.dim() != 1:
            return None
        linear = nn.Linear(weight.shape[0], weight.shape[1], device="meta")
        # The same storage, seen transposed: no copy of the weight.
        linear.weight = nn.Parameter(weight.t(), requires_grad=weight.requires_grad)
        linear.bias = nn.Parameter(bias, requires_grad=bias.requires_grad)
        record(linear, Origin(id(weight), id(bias), "linear", transposed=True))
        return fresh_name(gm, f"{owner[0]}_as_linear"), linear, []
    return None


def _normal(value):
    return list(value) if isinstance(value, (list, tuple)) else value


def _padding(conv) -> object:
    return conv.padding if isinstance(conv.padding, str) else list(conv.padding)


def _attr(gm: fx.GraphModule, node) -> torch.Tensor | None:
    if not isinstance(node, fx.Node) or node.op != "get_attr":
        return None
    try:
        return gm.get_parameter(node.target)
    except AttributeError:
        try:
            return gm.get_buffer(node.target)
        except AttributeError:
            return None


def _owner(gm: fx.GraphModule, model: nn.Module, weight_node, bias_node) -> tuple[str, nn.Module] | None:
    """The model's module whose `weight` (and `bias`) these get_attr nodes read, with its path."""
    weight = _attr(gm, weight_node)
    if weight is None:
        return None
    path = weight_node.target.rpartition(".")[0]
    try:
        module = model.get_submodule(path)
    except AttributeError:
        return None
    if getattr(module, "weight", None) is not weight:
        return None
    bias = getattr(module, "bias", None)
    if bias_node is None:
        return (path, module) if bias is None else None
    return (path, module) if _attr(gm, bias_node) is bias else None
