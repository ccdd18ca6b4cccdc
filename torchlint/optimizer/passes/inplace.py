"""Run activations in place where nothing else can see the overwritten input: saves one tensor allocation each.

An activation may overwrite its input only when that input
- is used by nothing else (no other node, not a graph output),
- is a fresh tensor made by a known op (never a graph input, parameter, buffer, or a view of one),
- in training, is not saved by autograd: its producer's backward must not need its own output, and the
  activation's backward must work from its output (ReLU, ReLU6, Hardtanh, LeakyReLU/ELU with slope/alpha >= 0).
"""

from __future__ import annotations

import operator

import torch
from torch import fx

from ..modules import FusedConv2d, FusedLinear
from .activations import activation_of, backward_uses_only_output, inplace_call
from .base import FRESH_OUTPUT_MODULES, PassContext, PassResult, finish, submodules

# Functions/methods that return a new tensor and whose backward does not use their output.
_FRESH_FUNCTIONS = {
    operator.add, operator.sub, operator.mul, operator.truediv, torch.add, torch.sub, torch.mul,
    torch.cat, torch.matmul, torch.bmm, torch.nn.functional.linear, torch.nn.functional.conv1d,
    torch.nn.functional.conv2d, torch.nn.functional.conv3d, torch.nn.functional.batch_norm,
    torch.nn.functional.layer_norm, torch.nn.functional.group_norm,
}
_FRESH_METHODS = {"add", "sub", "mul", "matmul", "bmm"}


def inplace_activations(gm: fx.GraphModule, ctx: PassContext) -> PassResult:
    modules = submodules(gm)
    rewritten = 0
    for node in list(gm.graph.nodes):
        act = activation_of(node, modules)
        if act is None or act.inplace or inplace_call(act) is None:
            continue
        reason = _why_not(act, modules, ctx.training)
        if reason:
            ctx.skipped(node.name, f"{act.kind} kept out of place: {reason}")
            continue
        function, extra = inplace_call(act)
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(function, (act.input, *extra), {"inplace": True})
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        ctx.rewrote(new.name, f"{act.kind} runs in place on the output of `{act.input.name}`")
        rewritten += 1
    return PassResult(finish(gm), rewritten > 0)


def _why_not(act, modules, training: bool) -> str | None:
    source = act.input
    if len(source.users) != 1:
        return f"its input `{source.name}` is also used elsewhere"
    if not _fresh(source, modules, training):
        return f"its input `{source.name}` may be a graph input, parameter, buffer, a view, or saved by autograd"
    if training and not backward_uses_only_output(act):
        return "autograd needs its input to compute the gradient"
    return None


def _fresh(node: fx.Node, modules, training: bool) -> bool:
    if node.op == "call_module":
        module = modules[node.target]
        if isinstance(module, (FusedConv2d, FusedLinear)):
            return not training
        # None of these needs its own output for its backward, so they are safe in training too.
        return isinstance(module, FRESH_OUTPUT_MODULES)
    if node.op == "call_function":
        return node.target in _FRESH_FUNCTIONS
    if node.op == "call_method":
        return node.target in _FRESH_METHODS
    return False
