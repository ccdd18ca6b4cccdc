"""Loaders whose batches are already on an accelerator: the dataset's class (in this file or another) puts
tensors there (its items moved as they are read, or the data it indexes moved when it is built), the tensors
a `TensorDataset` wraps were moved before it was built, or the `collate_fn` moves the batch. Where the
dataset's code cannot be read, one built with a CUDA device, or a file whose dataset class moves its items,
may give such batches too.

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
from torchlint.semantic.datasets import dataset_bound_to, dataset_given_device
from torchlint.semantic.functions import method_named
from torchlint.semantic.loader_calls import is_transfer
from torchlint.semantic.loaders import flow


def batches_on_device(context: Context, loader: cst.Call) -> bool:
    """The loader's batches are, or may be, accelerator tensors when they come out of it."""
    if flow(context).collate_on_device(loader) or _imported_collate_moves(context, loader):
        return True
    dataset = argument(loader, "dataset", position=0)
    known = _items_on_device(context, dataset.value, 0) if dataset is not None else None
    if known is not None:
        return known  # the dataset's own code says
    # a dataset not followed: one built with a CUDA device, or a file whose dataset class moves its items
    return file_moves_items(context) or dataset_given_device(context, loader)


def file_moves_items(context: Context) -> bool:
    """Some Dataset class of the file moves its items to an accelerator: the loaders of the file may be
    built over it in ways not followed (a parameter, a factory)."""
    data = flow(context)
    if data.getitem_moves is None:
        data.getitem_moves = any(
            isinstance(n, cst.ClassDef) and method_named(n, "__getitem__") is not None and moves_to_device(context, n)
            for n in descendants(context.module)
        )
    return data.getitem_moves


def moves_to_device(context: Context, cls: cst.ClassDef) -> bool:
    """A class whose code puts tensors on an accelerator: items moved as they are read, or the data it
    indexes moved (or built there) when it is constructed."""
    return any(isinstance(n, cst.Call) and _places_on_device(context, n) for n in descendants(cls))


def _items_on_device(context: Context, expr: Optional[cst.BaseExpression], depth: int) -> Optional[bool]:
    """Whether the dataset's items are on an accelerator, when its code can be read (None when not)."""
    if expr is None or depth > 5:
        return None
    if isinstance(expr, cst.Name):
        return _items_on_device(context, dataset_bound_to(context, expr), depth + 1)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        cls = context.enclosing(expr, cst.ClassDef)  # `self.train_set = MyDataset(...)` in a method of the class
        assigned = flow(context).self_assigns.get((id(cls), expr.attr.value), []) if cls is not None else []
        verdicts = {_items_on_device(context, v, depth + 1) for v in assigned}
        return verdicts.pop() if len(verdicts) == 1 else (True if True in verdicts else None)
    if not isinstance(expr, cst.Call):
        return None
    name = context.qualname(expr) or ""
    if name == "torch.utils.data.Subset" and expr.args:
        return _items_on_device(context, expr.args[0].value, depth + 1)
    if name == "torch.utils.data.TensorDataset":
        return any(_tensor_on_device(context, a.value) for a in expr.args)
    cls = _dataset_class(context, expr.func)
    if cls is None:
        return None
    if moves_to_device(*cls):
        return True
    # a class that hands out items of its own and never touches a device gives host tensors; one whose
    # items come from a base class may get them on the device there
    own_items = any(method_named(cls[1], m) is not None for m in ("__getitem__", "__iter__"))
    return False if own_items else None


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
    return any(isinstance(n, cst.Call) and _places_on_device(context, n) for n in [expr, *descendants(expr)])


def _places_on_device(context: Context, call: cst.Call) -> bool:
    """`x.cuda()`, `x.to(device)`, `torch.zeros(n, device=device)`, `torch.load(path, map_location=device)`
    with a device that may be CUDA."""
    data = flow(context)
    if is_transfer(call) and data.to_accelerator(call):
        return True
    return any(
        (device := keyword(call, name)) is not None and data.may_be_cuda(device.value, 0)
        for name in ("device", "map_location")
    )


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
