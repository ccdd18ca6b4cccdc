"""CUDA constructors: calls that build a tensor from Python data directly on the accelerator.

`torch.cuda.LongTensor(ids)` builds on the GPU, and so does `LongTensor(ids)` where the file picks the
constructor once by whether CUDA is there (`LongTensor = torch.cuda.LongTensor if USE_CUDA else
torch.LongTensor`, an idiom of older tutorials), or `one_hot(t, n)` where a function of the file builds a
tensor from its input and moves it (`v = torch.from_numpy(a); v = v.cuda()`): each call is a host-to-device
copy of its data.
"""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.walk import descendants
from torchlint.semantic.placement import is_device_argument

# torch calls that build a tensor from Python or NumPy data.
FROM_DATA = frozenset(
    "torch.tensor torch.as_tensor torch.from_numpy torch.Tensor torch.FloatTensor torch.LongTensor "
    "torch.IntTensor torch.DoubleTensor torch.BoolTensor".split()
)


def _cuda_tensor_type(context: Context, expr: cst.BaseExpression) -> bool:
    qual = context.qualname(expr) or ""
    return qual.startswith("torch.cuda.") and qual.endswith("Tensor")


def _picked_by_device(context: Context, value: cst.BaseExpression) -> bool:
    """`torch.cuda.XTensor if cond else torch.XTensor` (either way round), or `torch.cuda.XTensor` itself."""
    if isinstance(value, cst.IfExp):
        return _cuda_tensor_type(context, value.body) or _cuda_tensor_type(context, value.orelse)
    return _cuda_tensor_type(context, value)


def builds_on_accelerator(context: Context, call: cst.Call) -> bool:
    """`call` builds a tensor on the accelerator (when the program has one) from its arguments."""
    if _cuda_tensor_type(context, call.func):
        return True
    if not isinstance(call.func, cst.Name):
        return False
    name = call.func.value
    values = [
        line.body[0].value
        for line in context.module.body
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(line.body[0], cst.Assign)
        and len(line.body[0].targets) == 1 and isinstance(line.body[0].targets[0].target, cst.Name)
        and line.body[0].targets[0].target.value == name
    ]
    return bool(values) and all(_picked_by_device(context, v) for v in values)


def builds_on_device(context: Context, call: cst.Call) -> bool:
    """`call` builds a tensor on the accelerator from its data: a CUDA constructor (`builds_on_accelerator`), or
    a function of this file that uses one, or builds a tensor from data and moves it to the device."""
    if builds_on_accelerator(context, call):
        return True
    if not isinstance(call.func, cst.Name):
        return False
    for statement in context.module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == call.func.value:
            calls = [n for n in descendants(statement.body) if isinstance(n, cst.Call)]
            if any(builds_on_accelerator(context, n) for n in calls):
                return True  # `LongTensor(ids)` picked as `torch.cuda.LongTensor` when CUDA is there
            built = any((context.qualname(n) or "") in FROM_DATA for n in calls)
            return built and any(moves_to_device(context, n) for n in calls)
    return False


def moves_to_device(context: Context, call: cst.Call) -> bool:
    """`.cuda()` or `.to(device)`."""
    if not isinstance(call.func, cst.Attribute):
        return False
    method = call.func.attr.value
    return method == "cuda" or (method == "to" and any(is_device_argument(context, a.value) for a in call.args))
