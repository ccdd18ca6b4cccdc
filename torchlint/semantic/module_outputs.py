"""Modules of this file whose forward returns several tensors, not one batch (or one tensor, one batch).

A feature extractor for a style or perceptual loss returns the outputs of several layers (a tuple, a list
or a namedtuple of feature maps of different sizes): iterating its output runs over layers, not over the
samples of a batch. `several_outputs(context, call, scope_assigns)` tells, for a call of a module whose class
is defined in this file, whether every `return` of its `forward` gives such a collection.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.semantic.functions import method_named, returns_of
from torchlint.semantic.objects import objects

_COLLECTIONS = (cst.Tuple, cst.List, cst.ListComp, cst.Dict, cst.DictComp)

# torch.nn modules whose output is not one tensor (a tuple with a state, attention weights) or that hold modules.
_NOT_ONE_TENSOR = re.compile(r"RNN|LSTM|GRU|MultiheadAttention|Transformer|ModuleList|ModuleDict|ParameterList|Identity|Unflatten")
_RECORD_FACTORIES = frozenset({"namedtuple", "NamedTuple", "make_dataclass"})


def several_outputs(
    context: Context, call: cst.Call, assigned: Callable[[str], list[cst.BaseExpression]]
) -> bool:
    """`call` runs a module of this file whose forward returns a tuple, a list, a dict or a namedtuple.
    `assigned(name)` gives the values a plain name is bound to where the call is made."""
    cls = _module_class(context, call, assigned)
    forward = method_named(cls, "forward") if cls is not None else None
    if forward is None:
        return False
    returns = [r.value for r in returns_of(forward)]
    return bool(returns) and all(r is not None and _collection(context, forward, r) for r in returns)


def one_output(context: Context, call: cst.Call, assigned: Callable[[str], list[cst.BaseExpression]]) -> bool:
    """`call` runs a module of this file whose forward returns one tensor computed by a call or arithmetic
    (`return self.conv(x).flatten(1)`): its output iterated walks the samples of the batch."""
    cls = _module_class(context, call, assigned)
    forward = method_named(cls, "forward") if cls is not None else None
    if forward is None:
        return False
    returns = [r.value for r in returns_of(forward)]
    return bool(returns) and all(
        isinstance(r, (cst.Call, cst.BinaryOperation)) and not _collection(context, forward, r)
        and not (isinstance(r, cst.Call) and (context.qualname(r) or "") == "torch.stack")  # levels stacked
        for r in returns
    )


def _module_class(
    context: Context, call: cst.Call, assigned: Callable[[str], list[cst.BaseExpression]]
) -> Optional[cst.ClassDef]:
    """The class of this file the called object was built from (`self.encoder = VGG19()`, `net = Net()`)."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    values = _bound_values(context, call, func, assigned)
    classes = {_class_built(context, v) for v in values}
    if len(classes) != 1:
        return None
    return classes.pop()


def _class_built(context: Context, value: cst.BaseExpression) -> Optional[cst.ClassDef]:
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("to", "cuda", "eval"):
        value = value.func.value  # `VGG19().cuda()`
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
        return None
    bindings = context.lookup(value.func)
    if bindings and len(bindings) == 1 and isinstance(bindings[0].node, cst.ClassDef):
        return bindings[0].node
    return None


def _collection(context: Context, forward: cst.FunctionDef, value: cst.BaseExpression) -> bool:
    if isinstance(value, _COLLECTIONS):
        return not isinstance(value, cst.Tuple) or len(value.elements) > 1
    if isinstance(value, cst.Name):
        bound = _bound_in(forward, value.value)
        return bool(bound) and all(isinstance(v, (cst.List, cst.ListComp, cst.Dict)) for v in bound)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
        # `return outputs(*feats)` after `outputs = namedtuple("Outputs", [...])`
        bound = _bound_in(forward, value.func.value) or _bound_in(context.module, value.func.value)
        return any(isinstance(v, cst.Call) and last_name(v.func) in _RECORD_FACTORIES for v in bound)
    return False


def _bound_in(scope: cst.CSTNode, name: str) -> list[cst.BaseExpression]:
    """Values assigned to `name` by plain assignments directly in `scope`'s body (not in nested scopes)."""
    body = scope.body.body if isinstance(scope, cst.FunctionDef) and isinstance(scope.body, cst.IndentedBlock) else (
        scope.body if isinstance(scope, cst.Module) else ()
    )
    found: list[cst.BaseExpression] = []
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets
            ):
                found.append(small.value)
    return found


def layer_output(
    context: Context, call: cst.Call, assigned: Callable[[str], list[cst.BaseExpression]]
) -> bool:
    """`call` runs a layer of `torch.nn` that returns one tensor for one tensor (`nn.Linear`, `nn.Conv2d`, an
    `nn.Sequential` of such layers), built where the callee is bound (`self.encoder = nn.Sequential(...)`)."""
    values = _bound_values(context, call, call.func, assigned)
    return bool(values) and all(_one_tensor_layer(context, v, 0) for v in values)


def _one_tensor_layer(context: Context, value: cst.BaseExpression, depth: int) -> bool:
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("to", "cuda", "eval", "train"):
        value = value.func.value  # `nn.Linear(4, 2).to(device)`
    if depth > 3 or not isinstance(value, cst.Call):
        return False
    qualname = context.qualname(value) or ""
    if not qualname.startswith("torch.nn.") or qualname.startswith("torch.nn.functional.") or _NOT_ONE_TENSOR.search(qualname):
        return False
    if qualname.endswith(".Sequential"):
        layers = [a.value for a in value.args if a.keyword is None and not a.star]
        return bool(layers) and len(layers) == len(value.args) and all(_one_tensor_layer(context, l, depth + 1) for l in layers)
    return qualname.rsplit(".", 1)[-1][:1].isupper()


def _bound_values(
    context: Context, call: cst.Call, func: cst.BaseExpression, assigned: Callable[[str], list[cst.BaseExpression]]
) -> list[cst.BaseExpression]:
    """What the called object `func` was assigned: `self.name = ...` in its class, or `name = ...`."""
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        cls = context.enclosing(call, cst.ClassDef)
        return objects(context).self_assignments(cls).get(func.attr.value, []) if cls is not None else []
    return assigned(func.value) if isinstance(func, cst.Name) else []
