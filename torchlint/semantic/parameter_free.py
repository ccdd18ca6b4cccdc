"""Parameter-free modules: an `nn.Module` subclass that holds no parameters and no sub-modules.

A spectrogram transform (`register_buffer("window", torch.hann_window(n))` in `__init__`, `torch.stft` in
`forward`) is a module, but running it with autograd on records nothing when its input needs no gradient: there
is no weight to differentiate. Reporting such a call as inference with autograd on asks for a change that saves
nothing. The proof is read from the class: it derives from `nn.Module` itself (a project base class could add
parameters), constructs no layer, parameter or other class, registers nothing but buffers, and stores in
`self` only values that cannot be modules (no callable it was handed is ever called through `self`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.lint.names import dotted
from torchlint.lint.walk import descendants
from torchlint.semantic import network_methods

if TYPE_CHECKING:
    from torchlint.lint.context import Context
    from torchlint.semantic.grad_mode import FileFacts

_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
_REGISTERS = frozenset({"add_module", "register_parameter", "register_module", "setattr"})
# Calls that build plain values, not modules (the names of classes among them are builtins).
_VALUE_BUILTINS = frozenset({"int", "float", "str", "bool", "len", "round", "abs", "min", "max", "list", "tuple",
                             "dict", "range", "sum", "isinstance", "print", "super", "getattr", "hasattr"})
# Libraries whose functions give arrays and numbers (a mel filter bank, a window), never a module.
_VALUE_LIBRARIES = frozenset({"torch", "numpy", "math", "librosa", "scipy"})


def holds_no_parameters(context: "Context", cls: cst.ClassDef) -> bool:
    """`cls` (of the file `context` reads) derives from `nn.Module` alone and can hold no parameter."""
    bases = [context.qualname(b.value) if isinstance(b.value, (cst.Name, cst.Attribute)) else None for b in cls.bases]
    if not bases or any(b not in _MODULE_BASES for b in bases):
        return False
    calls = [node for node in descendants(cls.body) if isinstance(node, cst.Call)]
    methods = {s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    buffers = {context.literal(c.args[0].value) for c in calls if _held_attribute(c.func) == "register_buffer" and c.args}
    return all(_builds_no_parameter(context, call, methods | buffers) for call in calls)


def _builds_no_parameter(context: "Context", call: cst.Call, own: set) -> bool:
    """`call`, inside the class, neither builds nor registers a parameter or a module, nor calls something the
    class holds other than its methods and buffers (`own`)."""
    func = call.func
    if (dotted(func) or "").rsplit(".", 1)[-1] in _REGISTERS:
        return False
    held = _held_attribute(func)
    if held is not None:
        return held in own or held == "register_buffer"  # `self.layer(x)`, `self.net.forward(x)`: something held
    if isinstance(func, cst.Name) and (func.value in _VALUE_BUILTINS or func.value.endswith(("Error", "Exception"))):
        return True
    qualified = context.qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
    if qualified is None:
        # A method of a value made here (`window.float()`, `super().__init__()`); not a function of this file or a
        # local callable (`layer(x)` over held layers), which could give or run a module.
        return isinstance(func, cst.Attribute)
    if qualified.startswith("torch.nn.") and not qualified.startswith(("torch.nn.functional.", "torch.nn.init.")):
        return False  # a layer, a container, a `Parameter`
    if qualified.rsplit(".", 1)[-1][:1].isupper():
        return False  # a class: it could be a module
    return qualified.split(".", 1)[0] in _VALUE_LIBRARIES


def _held_attribute(func: cst.BaseExpression) -> "str | None":
    """The attribute of `self` a call goes through: `layer` for `self.layer(x)` and `self.layer.forward(x)`."""
    node = func
    while isinstance(node, (cst.Attribute, cst.Call, cst.Subscript)):
        inner = node.func if isinstance(node, cst.Call) else node.value
        if isinstance(node, cst.Attribute) and isinstance(inner, cst.Name) and inner.value == "self":
            return node.attr.value
        node = inner
    return None


def receivers_hold_no_parameters(facts: "FileFacts", receiver: cst.BaseExpression) -> bool:
    """Every class the network `receiver` is built from is found and holds no parameter, or it is a loss of
    `torch.nn` (`mse = nn.MSELoss()`), which holds none either."""
    if _torch_loss(facts.context, receiver):
        return True
    classes = network_methods.receiver_classes(facts, receiver)
    return bool(classes) and all(holds_no_parameters(owner.context, cls) for owner, cls in classes)


def _torch_loss(context: "Context", receiver: cst.BaseExpression) -> bool:
    """`receiver` is a name every binding of which builds a loss module of `torch.nn` (`nn.MSELoss()`)."""
    if not isinstance(receiver, cst.Name):
        return False
    bindings = context.lookup(receiver) or ()
    return bool(bindings) and all(
        b.kind == "assign" and isinstance(b.value, cst.Call)
        and (context.qualname(b.value.func) or "").startswith("torch.nn.")
        and (context.qualname(b.value.func) or "").endswith("Loss")
        for b in bindings
    )
