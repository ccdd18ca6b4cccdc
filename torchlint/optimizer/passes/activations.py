"""Recognising activation calls in an fx graph, whatever their form: nn.ReLU(), F.relu(x), torch.relu(x), x.relu()."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import fx, nn


@dataclass(frozen=True)
class Activation:
    kind: str  # "relu", "relu6", "hardtanh", "leaky_relu", "elu", "silu", ...
    input: fx.Node
    params: dict = field(default_factory=dict)  # constant arguments, e.g. {"negative_slope": 0.1}
    inplace: bool = False


# Modules by exact type: a user subclass may override forward.
_MODULES = {
    nn.ReLU: ("relu", ()),
    nn.ReLU6: ("relu6", ()),
    nn.Hardtanh: ("hardtanh", ("min_val", "max_val")),
    nn.LeakyReLU: ("leaky_relu", ("negative_slope",)),
    nn.ELU: ("elu", ("alpha",)),
    nn.CELU: ("celu", ("alpha",)),
    nn.SELU: ("selu", ()),
    nn.SiLU: ("silu", ()),
    nn.Hardswish: ("hardswish", ()),
    nn.Hardsigmoid: ("hardsigmoid", ()),
    nn.Mish: ("mish", ()),
    nn.GELU: ("gelu", ("approximate",)),
    nn.Sigmoid: ("sigmoid", ()),
    nn.Tanh: ("tanh", ()),
}

# Functions: kind, then the parameters after the input with their defaults, in positional order.
_FUNCTIONS = {
    F.relu: ("relu", (("inplace", False),)),
    torch.relu: ("relu", ()),
    torch.relu_: ("relu", ()),
    F.relu6: ("relu6", (("inplace", False),)),
    F.hardtanh: ("hardtanh", (("min_val", -1.0), ("max_val", 1.0), ("inplace", False))),
    F.leaky_relu: ("leaky_relu", (("negative_slope", 0.01), ("inplace", False))),
    F.elu: ("elu", (("alpha", 1.0), ("inplace", False))),
    F.celu: ("celu", (("alpha", 1.0), ("inplace", False))),
    F.selu: ("selu", (("inplace", False),)),
    F.silu: ("silu", (("inplace", False),)),
    F.hardswish: ("hardswish", (("inplace", False),)),
    F.hardsigmoid: ("hardsigmoid", (("inplace", False),)),
    F.mish: ("mish", (("inplace", False),)),
    F.gelu: ("gelu", (("approximate", "none"),)),
    torch.sigmoid: ("sigmoid", ()),
    torch.tanh: ("tanh", ()),
}
# The same activations as ATen operators, as torch.export records them, and their in-place forms (a norm-act
# layer's `inplace=True` activation); gelu's in-place form is not taken.
_aten = torch.ops.aten
_INPLACE_FUNCTIONS = {torch.relu_}
for _name, _defaults in {
    "relu": (),
    "hardtanh": (("min_val", -1.0), ("max_val", 1.0)),
    "leaky_relu": (("negative_slope", 0.01),),
    "silu": (),
    "hardswish": (),
    "hardsigmoid": (),
    "gelu": (("approximate", "none"),),
    "sigmoid": (),
    "tanh": (),
}.items():
    _FUNCTIONS[getattr(_aten, _name).default] = (_name, _defaults)
    if _name != "gelu":
        _in_place = getattr(_aten, _name + "_").default
        _FUNCTIONS[_in_place] = (_name, _defaults)
        _INPLACE_FUNCTIONS.add(_in_place)
_METHODS = {"relu": "relu", "relu_": "relu", "sigmoid": "sigmoid", "sigmoid_": "sigmoid", "tanh": "tanh", "tanh_": "tanh"}


def activation_of(node: fx.Node, modules: dict[str, nn.Module]) -> Activation | None:
    """The activation `node` computes, or None if it is not one (or has arguments only known at run time)."""
    if not node.args or not isinstance(node.args[0], fx.Node):
        return None
    if node.op == "call_module":
        module = modules.get(node.target)
        spec = _MODULES.get(type(module))
        if spec is None:
            return None
        kind, names = spec
        params = {name: getattr(module, name) for name in names}
        return Activation(kind, node.args[0], params, bool(getattr(module, "inplace", False)))
    if node.op == "call_function" and node.target in _FUNCTIONS:
        kind, defaults = _FUNCTIONS[node.target]
        params = {}
        for i, (name, default) in enumerate(defaults):
            value = node.args[i + 1] if i + 1 < len(node.args) else node.kwargs.get(name, default)
            if isinstance(value, fx.Node):
                return None
            params[name] = value
        inplace = bool(params.pop("inplace", False)) or node.target in _INPLACE_FUNCTIONS
        return Activation(kind, node.args[0], params, inplace)
    if node.op == "call_method" and node.target in _METHODS and len(node.args) == 1 and not node.kwargs:
        return Activation(_METHODS[node.target], node.args[0], {}, node.target.endswith("_"))
    return None


def onednn_post_op(act: Activation) -> tuple[str, list, str] | None:
    """The oneDNN post-op (name, scalars, algorithm) computing `act`, or None if oneDNN has none."""
    p = act.params
    if act.kind == "relu":
        return ("relu", [], "")
    if act.kind == "relu6":
        return ("hardtanh", [0.0, 6.0], "")
    if act.kind == "hardtanh":
        return ("hardtanh", [float(p["min_val"]), float(p["max_val"])], "")
    if act.kind == "leaky_relu":
        return ("leaky_relu", [float(p["negative_slope"])], "")
    if act.kind == "gelu":
        return ("gelu", [], p["approximate"])
    simple = {
        "silu": "swish", "hardswish": "hardswish", "hardsigmoid": "hardsigmoid", "sigmoid": "sigmoid", "tanh": "tanh",
    }
    if act.kind in simple:
        return (simple[act.kind], [], "")
    return None


# In-place forms: the function and its arguments after the input.
def inplace_call(act: Activation) -> tuple | None:
    p = act.params
    table = {
        "relu": (F.relu, ()),
        "relu6": (F.relu6, ()),
        "hardtanh": (F.hardtanh, (p.get("min_val"), p.get("max_val"))),
        "leaky_relu": (F.leaky_relu, (p.get("negative_slope"),)),
        "elu": (F.elu, (p.get("alpha"),)),
        "celu": (F.celu, (p.get("alpha"),)),
        "selu": (F.selu, ()),
        "silu": (F.silu, ()),
        "hardswish": (F.hardswish, ()),
        "hardsigmoid": (F.hardsigmoid, ()),
        "mish": (F.mish, ()),
    }
    return table.get(act.kind)


def backward_uses_only_output(act: Activation) -> bool:
    """True when autograd computes this activation's gradient from its output, so it may run in place in training.

    SiLU, Hardswish, Mish... need their input for the gradient; LeakyReLU and ELU only with non-negative slope/alpha.
    """
    if act.kind in ("relu", "relu6", "hardtanh", "selu"):
        return True
    if act.kind == "leaky_relu":
        return act.params["negative_slope"] >= 0
    if act.kind in ("elu", "celu"):
        return act.params["alpha"] >= 0
    return False
