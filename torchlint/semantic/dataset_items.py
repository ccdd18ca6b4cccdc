"""Code that runs once per sample, in a Dataset's per-item methods (`__getitem__` and the helpers it calls),
usually in a loader worker: the few annotations of one sample, not a pass over the data."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.walk import descendants
from torchlint.semantic.objects import DATASET, objects


def in_per_item_method(context: Context, node: cst.CSTNode) -> bool:
    """`node` is in a method of a Dataset class other than `__init__` and not called from it (`__init__`
    runs over the whole dataset once; the other methods run per item)."""
    function = context.enclosing_function(node)
    cls = context.enclosing(node, cst.ClassDef)
    if function is None or cls is None or function.name.value == "__init__":
        return False
    if objects(context).class_kind(cls) != DATASET:
        return False
    init = next((f for f in cls.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"), None)
    called_from_init = init is not None and any(
        isinstance(n, cst.Attribute) and n.attr.value == function.name.value for n in descendants(init)
    )
    return not called_from_init
