"""CUDA constructors: calls that build a tensor from Python data directly on the accelerator.

`torch.cuda.LongTensor(ids)` builds on the GPU, and so does `LongTensor(ids)` where the file picks the
constructor once by whether CUDA is there (`LongTensor = torch.cuda.LongTensor if USE_CUDA else
torch.LongTensor`, an idiom of older tutorials): each call is a host-to-device copy of its data.
"""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import Context


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
