"""Loaders handed over as arguments: `for x, y in source` where `source` is a parameter of the function
(or `self.source`, set from a parameter of `__init__`) and every call of the function (of the class) passes
a DataLoader for it, in this file or, for a top-level function or class nobody calls here, in the project
files that import it. Whatever the parameter is called, its loop then walks batches."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument
from torchlint.lint.context import Context
from torchlint.semantic import project
from torchlint.semantic.functions import calls_named
from torchlint.semantic.loops import is_loader_expr
from torchlint.semantic.objects import objects


def passed_loader(context: Context, expr: cst.BaseExpression) -> bool:
    """`expr` (a parameter, or `self.<attr>` bound to a parameter of `__init__`) is given a DataLoader by
    every caller, and there is one."""
    found = _parameter(context, expr)
    if found is None:
        return False
    function, name = found
    cls = context.enclosing(function, cst.ClassDef)
    params = [p for p in function.params.params]
    if cls is not None:
        params = params[1:]  # self
    names = [p.name.value for p in params]
    if name not in names or any(p.star for p in params):
        return False
    position = names.index(name)
    callee = cls.name.value if cls is not None and function.name.value == "__init__" else function.name.value
    top_level = (cls if cls is not None and callee == cls.name.value else function) in context.module.body
    local = [call for call in calls_named(context, callee) if isinstance(call.func, cst.Name) or cls is not None]
    if local:
        return all(_loader_arg(context, call, name, position) for call in local)
    if not top_level:
        return False
    sites = project.call_sites(context.source.path, callee)
    return bool(sites) and all(_loader_arg(site.summary.context, site.call, name, position) for site in sites)


def _parameter(context: Context, expr: cst.BaseExpression) -> Optional[tuple[cst.FunctionDef, str]]:
    """The function and the parameter `expr` reads: the enclosing function's own, or the `__init__`
    parameter a `self.<attr>` was set from (once)."""
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr) or []
        if len(bindings) == 1 and bindings[0].kind == "param":
            function = context.enclosing(bindings[0].node, cst.FunctionDef)
            if function is not None:
                return function, expr.value
        return None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        cls = context.enclosing(expr, cst.ClassDef)
        values = objects(context).self_assignments(cls).get(expr.attr.value, []) if cls is not None else []
        if len(values) != 1 or not isinstance(values[0], cst.Name):
            return None
        init = context.enclosing(values[0], cst.FunctionDef)
        if init is None or init.name.value != "__init__":
            return None
        return _parameter(context, values[0])
    return None


def _loader_arg(context: Context, call: cst.Call, name: str, position: int) -> bool:
    passed = argument(call, name, position)
    return passed is not None and is_loader_expr(context, passed.value)
