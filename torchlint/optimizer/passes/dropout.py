"""Drop Dropout and identity ops: in eval mode they return their input unchanged, but each still costs a call."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.nn.modules.dropout import _DropoutNd

from .base import PassContext, PassResult, finish, submodules

# Functional dropouts and the position of their `training` argument (after input and p).
_FUNCTIONS = {
    F.dropout: ("training", 2, True),
    F.dropout1d: ("training", 2, True),
    F.dropout2d: ("training", 2, True),
    F.dropout3d: ("training", 2, True),
    F.alpha_dropout: ("training", 2, False),
    F.feature_alpha_dropout: ("training", 2, False),
    torch.dropout: ("train", 2, None),
    torch.alpha_dropout: ("train", 2, None),
    torch.feature_alpha_dropout: ("train", 2, None),
    torch.feature_dropout: ("train", 2, None),
}


def _is_inactive(node: fx.Node, modules: dict[str, nn.Module]) -> str | None:
    """What `node` is when it returns its input unchanged, else None."""
    if node.op == "call_module":
        module = modules[node.target]
        if type(module) is nn.Identity:
            return "nn.Identity"
        if isinstance(module, _DropoutNd) and _is_torch_class(module) and not module.training:
            return f"nn.{type(module).__name__} (eval mode)"
        return None
    if node.op == "call_function" and node.target in _FUNCTIONS:
        name, position, default = _FUNCTIONS[node.target]
        training = node.args[position] if len(node.args) > position else node.kwargs.get(name, default)
        if training is False:
            return f"{getattr(node.target, '__name__', node.target)}(training=False)"
    return None


def _is_torch_class(module: nn.Module) -> bool:
    # A user subclass of Dropout may do more than dropping; leave it alone.
    return type(module).__module__.startswith("torch.nn")


def remove_dropout(gm: fx.GraphModule, ctx: PassContext) -> PassResult:
    modules = submodules(gm)
    removed = 0
    for node in list(gm.graph.nodes):
        what = _is_inactive(node, modules)
        if what is None:
            continue
        if not node.args or not isinstance(node.args[0], fx.Node):
            continue
        node.replace_all_uses_with(node.args[0])
        gm.graph.erase_node(node)
        ctx.rewrote(node.target if node.op == "call_module" else node.name, f"removed {what}: returns its input")
        removed += 1
    return PassResult(finish(gm), removed > 0)
