"""Loaders whose batches are already on an accelerator: the dataset's items are moved there when they are
read (`__getitem__`/`__iter__` of its class, in this file or another), the tensors it wraps were moved
before it was built, it was built with a CUDA device, or the `collate_fn` moves the batch.

Such batches cannot be pinned (the loader's pinning thread raises on device tensors), and copying them to
the device again is a no-op: nothing to ask of their loader or their copies.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument, keyword
from torchlint.lint.context import Context
from torchlint.lint.walk import descendants
from torchlint.semantic import project
from torchlint.semantic.datasets import dataset_given_device
from torchlint.semantic.functions import method_named
from torchlint.semantic.loader_calls import is_transfer
from torchlint.semantic.loaders import flow

# The methods that hand out a dataset's items.
_ITEM_METHODS = ("__getitem__", "__iter__", "__getitems__")


def batches_on_device(context: Context, loader: cst.Call) -> bool:
    """The loader's batches are, or may be, accelerator tensors when they come out of it."""
    if flow(context).collate_on_device(loader) or _imported_collate_moves(context, loader):
        return True
    if file_moves_items(context) or dataset_given_device(context, loader):
        return True
    dataset = argument(loader, "dataset", position=0)
    return dataset is not None and _items_on_device(context, dataset.value, 0)


def file_moves_items(context: Context) -> bool:
    """Some Dataset class of the file moves its items to an accelerator: the loaders of the file may be
    built over it in ways not followed (a parameter, a factory)."""
    data = flow(context)
    if data.getitem_moves is None:
        data.getitem_moves = any(isinstance(n, cst.ClassDef) and moves_items(context, n) for n in descendants(context.module))
    return data.getitem_moves


def moves_items(context: Context, cls: cst.ClassDef) -> bool:
    """A Dataset class whose item methods move what they hand out to an accelerator."""
    data = flow(context)
    for name in _ITEM_METHODS:
        method = method_named(cls, name)
        if method is not None and any(
            isinstance(n, cst.Call) and is_transfer(n) and data.to_accelerator(n) for n in descendants(method)
        ):
            return True
    return False


def _items_on_device(context: Context, expr: Optional[cst.BaseExpression], depth: int) -> bool:
    if expr is None or depth > 5:
        return False
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr)
        if not bindings or len(bindings) != 1:
            return False
        binding = bindings[0]
        if binding.kind == "assign":
            return _items_on_device(context, binding.value, depth + 1)
        node = binding.node
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and node.value.args:
            # `train_ds, val_ds = random_split(dataset, [n_train, n_val])`
            if context.qualname(node.value) == "torch.utils.data.random_split":
                return _items_on_device(context, node.value.args[0].value, depth + 1)
        return False
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        cls = context.enclosing(expr, cst.ClassDef)  # `self.train_set = MyDataset(...)` in a method of the class
        assigned = flow(context).self_assigns.get((id(cls), expr.attr.value), []) if cls is not None else []
        return bool(assigned) and all(_items_on_device(context, v, depth + 1) for v in assigned)
    if not isinstance(expr, cst.Call):
        return False
    name = context.qualname(expr) or ""
    if name == "torch.utils.data.Subset" and expr.args:
        return _items_on_device(context, expr.args[0].value, depth + 1)
    if name == "torch.utils.data.TensorDataset":
        return any(_tensor_on_device(context, a.value) for a in expr.args)
    cls = _dataset_class(context, expr.func)
    return cls is not None and moves_items(*cls)


def _dataset_class(context: Context, func: cst.BaseExpression) -> Optional[tuple[Context, cst.ClassDef]]:
    """The class a call builds: one of this file, or of a project file it imports (with that file)."""
    if isinstance(func, cst.Name):
        bindings = context.lookup(func)
        if bindings and len(bindings) == 1 and isinstance(bindings[0].node, cst.ClassDef):
            return context, bindings[0].node
    found = project.imported(context, func)
    node = found[0].definition(found[1]) if found is not None else None
    return (found[0].context, node) if isinstance(node, cst.ClassDef) else None  # type: ignore[index]


def _tensor_on_device(context: Context, expr: cst.BaseExpression) -> bool:
    """A tensor moved to an accelerator (`x.cuda()`, `torch.tensor(x, device=device)`), or a name bound
    to one."""
    data = flow(context)
    if isinstance(expr, cst.Name):
        # the binding that reaches the call: `x = torch.tensor(x)`, then `x = x.to(device)`
        reaching = data._reaching_at_top(expr, context.lookup(expr) or [])
        return any(b.kind == "assign" and b.value is not None and _moved(context, b.value) for b in reaching)
    return _moved(context, expr)


def _moved(context: Context, expr: cst.BaseExpression) -> bool:
    data = flow(context)
    for node in [expr, *descendants(expr)]:
        if not isinstance(node, cst.Call):
            continue
        if is_transfer(node) and data.to_accelerator(node):
            return True
        device = keyword(node, "device")
        if device is not None and data.may_be_cuda(device.value, 0):
            return True
    return False


def _imported_collate_moves(context: Context, loader: cst.Call) -> bool:
    """`collate_fn=collate` where `collate` is a function of another project file that moves the batch."""
    arg = keyword(loader, "collate_fn")
    if arg is None:
        return False
    value = arg.value
    if isinstance(value, cst.Call) and (context.qualname(value) or "") == "functools.partial" and value.args:
        value = value.args[0].value  # `collate_fn=partial(collate, device=device)`
    found = project.imported(context, value)
    node = found[0].definition(found[1]) if found is not None else None
    if not isinstance(node, cst.FunctionDef):
        return False
    there = found[0].model.loaders  # type: ignore[index]
    return any(isinstance(n, cst.Call) and is_transfer(n) and there.to_accelerator(n) for n in descendants(node))
