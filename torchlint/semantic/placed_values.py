"""Placed values: a tensor the code itself shows on an accelerator, by a placement its value comes from.

`values` calls a tensor "may be on the device" whenever nothing says otherwise (a torch op on an unknown
input, a module's output), which is right for a read that runs on every training step. A read of every
element of a tensor, in any loop, needs more: the walked tensor must come from a placement in its own
function (`.to(device)`, `.cuda()`, a factory given a device), followed through tensor ops, indexing and a
module run on a placed input. A parameter proves nothing (its callers decide: `decoder(pred.cpu())`), nor
does a model's output on an input that is never moved (a CPU deployment), nor a legacy
`torch.FloatTensor(...)`, which is built on the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import libcst as cst

from torchlint.lint.calls import keyword, positional
from torchlint.lint.names import bound_value, last_name
from torchlint.lint.scope import Binding
from torchlint.semantic.placement import is_cpu_literal, is_device_argument

if TYPE_CHECKING:
    from torchlint.lint.context import Context
    from torchlint.semantic.values import ValueKinds

_MAX_DEPTH = 12
# What leaves the device (or was never on it).
_TO_HOST = frozenset({"cpu", "numpy", "tolist", "item"})
# Attributes that are the same storage as the tensor they are read from.
_SAME_TENSOR = frozenset({"data", "T", "mT", "real", "imag"})
_FACTORY_DEVICE = "device"


def shown_on_device(context: "Context", values: "ValueKinds", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """`expr` holds a tensor that a placement in its own function puts on an accelerator."""
    if depth > _MAX_DEPTH:
        return False

    def again(inner: cst.BaseExpression) -> bool:
        return shown_on_device(context, values, inner, depth + 1)

    if isinstance(expr, cst.Name):
        return _name_placed(context, values, expr, depth)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _SAME_TENSOR and again(expr.value)
    if isinstance(expr, cst.Subscript):
        return again(expr.value)
    if isinstance(expr, (cst.BinaryOperation, cst.BooleanOperation)):
        return again(expr.left) or again(expr.right)
    if isinstance(expr, cst.Comparison):
        return again(expr.left) or any(again(c.comparator) for c in expr.comparisons)
    if isinstance(expr, cst.UnaryOperation):
        return again(expr.expression)
    if isinstance(expr, cst.Call):
        return _call_placed(context, expr, again)
    return False


def _call_placed(context: "Context", call: cst.Call, again: Callable[[cst.BaseExpression], bool]) -> bool:
    func = call.func
    qual = context.qualname(func)
    if qual is not None and qual.startswith("torch."):
        if qual.startswith("torch.cuda.") and qual.endswith("Tensor"):
            return True
        if qual.endswith("Tensor") or qual in ("torch.tensor", "torch.as_tensor", "torch.from_numpy"):
            device = keyword(call, _FACTORY_DEVICE)
            return device is not None and _accelerator(context, device.value)
        device = keyword(call, _FACTORY_DEVICE)
        if device is not None:
            return _accelerator(context, device.value)
        return any(again(arg.value) for arg in positional(call))
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if method in _TO_HOST:
            return False
        if method == "cuda":
            return True
        if method == "to":
            targets = [a.value for a in call.args if a.keyword is None or a.keyword.value == _FACTORY_DEVICE]
            if any(is_device_argument(context, t) for t in targets):
                return any(_accelerator(context, t) for t in targets)
        return again(func.value) or any(again(arg.value) for arg in positional(call))
    if last_name(func) is None:
        return False
    return any(again(arg.value) for arg in positional(call))  # a module or a function run on a placed input


def _accelerator(context: "Context", device: cst.BaseExpression) -> bool:
    return is_device_argument(context, device) and not is_cpu_literal(context, device)


def _name_placed(context: "Context", values: "ValueKinds", name: cst.Name, depth: int) -> bool:
    bindings = context.lookup(name)
    if not bindings:
        return False
    chosen = values.reaching_binding(name, bindings)
    chosen_ones = [chosen] if chosen is not None else bindings
    return all(_binding_placed(context, values, b, name.value, depth) for b in chosen_ones)


def _binding_placed(context: "Context", values: "ValueKinds", binding: Binding, name: str, depth: int) -> bool:
    kind, node, value = binding.kind, binding.node, binding.value
    if kind == "assign" and value is not None:
        return shown_on_device(context, values, value, depth + 1)
    if kind == "other" and isinstance(node, cst.Assign) and len(node.targets) == 1:
        target, value = node.targets[0].target, node.value
        if isinstance(target, (cst.Tuple, cst.List)) and not isinstance(value, (cst.Tuple, cst.List)):
            return shown_on_device(context, values, value, depth + 1)  # `scores, labels = out.max(-1)`: parts of it
        element = bound_value(target, value, name)
        return element is not None and shown_on_device(context, values, element, depth + 1)
    return False  # a parameter, a loop target, an import, an augmented assignment
