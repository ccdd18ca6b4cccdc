"""Network values: a plain name that holds a network because of where its value comes from, whatever it is
called.

An evaluation helper gets its network as a parameter (`def f(m, loader)`, called as `f(ConvNet().cuda(), dl)`
from main.py's epoch loop, or through a reporting helper of a third file); an inference script loads a whole
pickled model (`m = torch.load(path)`, or a project helper that returns what `torch.load` gave) and calls it.
`holds_network` follows the name to the values that reach it: for a parameter, every argument its callers
pass (in any file, up to two calls up), judged in the caller's file; for an assignment, a loaded object that
is called (a state dict is not callable: a called `torch.load` result is a whole model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.names import dotted
from torchlint.semantic import call_arguments, project
from torchlint.semantic.functions import called_function, returns_of
from torchlint.semantic.objects import LOSS_MODULE_NAME, MODULE, objects

if TYPE_CHECKING:
    from torchlint.lint.context import Context
    from torchlint.semantic.grad_mode import FileFacts

# Functions that give back a pickled object as it was saved: a whole model when the result is called.
_LOADS = frozenset({"torch.load", "torch.jit.load", "torch.hub.load"})
# Methods that return the object they are called on (`torch.load(p).to(device)`).
_SAME_OBJECT = frozenset({"to", "cuda", "cpu", "eval", "train", "float", "half", "double", "bfloat16"})
_MAX_HOPS = 2  # callers of callers: a helper that reports an evaluation run from main.py's loop


def holds_network(facts: "FileFacts", name: cst.Name, hops: int = 0) -> bool:
    """`name`, called like a function, holds a network by what reaches it: the arguments every caller passes
    for the parameter it names, or a whole model loaded where it is assigned."""
    bindings = facts.context.lookup(name)
    if not bindings or len(bindings) != 1:
        return False
    binding = bindings[0]
    if binding.kind == "param" and isinstance(binding.node, cst.Param) and binding.node.annotation is None:
        if hops >= _MAX_HOPS:
            return False
        from torchlint.semantic.model import semantic_model

        passed = call_arguments.passed_for(facts.context, binding.node)
        return bool(passed) and all(
            passes_network(semantic_model(there).grad, argument, hops + 1) for there, argument in passed
        )
    if binding.kind == "assign" and binding.value is not None:
        return loads_model(facts, binding.value)
    return False


def passes_network(facts: "FileFacts", argument: cst.BaseExpression, hops: int) -> bool:
    """The argument a caller passes is a network, in the caller's file: a module by its binding, an owner of
    parameters, an eval mode or a state dict, a network by its plain name, or a name that holds one itself."""
    argument = _strip_same_object(argument)
    if is_loss(facts.context, argument):
        return False  # `criterion = nn.MSELoss()`: a module, but a loss, not a network to run without grad
    if objects(facts.context).kind(argument) == MODULE:
        return True
    text = dotted(argument) if isinstance(argument, (cst.Name, cst.Attribute)) else None
    if text is None:
        return False
    if facts.is_network_receiver(text, argument):
        return True
    return isinstance(argument, cst.Name) and holds_network(facts, argument, hops)


def is_loss(context: "Context", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """`expr` holds a loss module: named like one (`criterion`), or built by a class named `...Loss`, directly,
    through the name it is assigned to, or returned by a helper of this file (`self._select_criterion()`)."""
    expr = _strip_same_object(expr)
    if isinstance(expr, (cst.Name, cst.Attribute)) and LOSS_MODULE_NAME.match(expr.value if isinstance(expr, cst.Name) else expr.attr.value):
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Name, cst.Attribute)) and (
        expr.func.value if isinstance(expr.func, cst.Name) else expr.func.attr.value
    ).endswith("Loss"):
        return True  # `nn.MSELoss()`, `FocalLoss(gamma=2)`
    if depth >= 3:
        return False
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr) or []
        values = [b.value for b in bindings if b.kind == "assign" and b.value is not None]
        return bool(values) and all(is_loss(context, value, depth + 1) for value in values)
    if not isinstance(expr, cst.Call):
        return False
    function = called_function(context, expr)
    returned = [r.value for r in returns_of(function) if r.value is not None] if function is not None else []
    return bool(returned) and all(is_loss(context, value, depth + 1) for value in returned)


def holds_loss(facts: "FileFacts", expr: cst.BaseExpression) -> bool:
    """`expr` holds a loss module (see `is_loss`), or is a parameter every caller passes one for
    (`def validate(loader, mse)` called as `validate(val_loader, nn.MSELoss())`)."""
    if is_loss(facts.context, expr):
        return True
    bindings = facts.context.lookup(expr) if isinstance(expr, cst.Name) else None
    if not bindings or len(bindings) != 1 or bindings[0].kind != "param" or not isinstance(bindings[0].node, cst.Param):
        return False
    passed = call_arguments.passed_for(facts.context, bindings[0].node)
    return bool(passed) and all(is_loss(there, argument) for there, argument in passed)


def loads_model(facts: "FileFacts", value: cst.BaseExpression, depth: int = 0) -> bool:
    """`value` gives back a pickled object: `torch.load(...)` (through `.to(device)`-style calls), or a helper
    of this file or of a project module whose returns do."""
    value = _strip_same_object(value)
    if not isinstance(value, cst.Call):
        return False
    context = facts.context
    if context.qualname(value.func) in _LOADS:
        return True
    if depth >= 2 or not isinstance(value.func, cst.Name):
        return False
    owner: Optional["Context"] = context
    function = called_function(context, value)
    if function is None:
        origin = project.imported(context, value.func, (value.func.value,))
        definition = origin[0].definition(origin[1]) if origin is not None else None
        if not isinstance(definition, cst.FunctionDef):
            return False
        function, owner = definition, origin[0].context  # type: ignore[union-attr]
    returned = [r.value for r in returns_of(function) if r.value is not None]
    return bool(returned) and all(_returns_loaded(owner, r, depth + 1) for r in returned)  # type: ignore[arg-type]


def _returns_loaded(context: "Context", value: cst.BaseExpression, depth: int) -> bool:
    """A returned expression of a loader helper is a loaded object: `torch.load(...)`, or a name assigned one."""
    value = _strip_same_object(value)
    if isinstance(value, cst.Name):
        bindings = context.lookup(value) or []
        values = [b.value for b in bindings if b.kind == "assign" and b.value is not None]
        return bool(values) and len(values) == len(bindings) and all(_returns_loaded(context, v, depth) for v in values)
    return isinstance(value, cst.Call) and context.qualname(value.func) in _LOADS


def _strip_same_object(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SAME_OBJECT:
        expr = expr.func.value
    return expr
