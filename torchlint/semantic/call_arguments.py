"""Call arguments: what the callers of a function pass for one of its parameters.

A network, a loader or a dataset often reaches the code that uses it through a parameter (`def extract(loader,
model): ...` called as `extract(loader, VQVAE().cuda())`; what a function returns is `functions.returns_of`).
`passed_for` is the one reading of that: which calls run the function, and which argument of each call fills
the parameter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

import libcst as cst

from torchlint.semantic.functions import is_static

if TYPE_CHECKING:
    from torchlint.lint.context import Context
    from torchlint.semantic.grad_mode import FileFacts

_NOT_PASSED = "not passed"  # `self` / `cls` (the object a method is called on), `*args`, `**kwargs`


def passed_for(
    context: "Context", param: cst.Param, *, elsewhere: bool = True, every: bool = False
) -> list[tuple["Context", cst.BaseExpression]]:
    """The expressions the calls of the function owning `param` pass for it, each with the file of its call.
    An argument fills the parameter by keyword, or by position up to the first `*args`; a method's receiver
    (`self`, `cls`) is no caller's to pass. A call that leaves the parameter out (to its default), or may pass
    it inside `*args` / `**kwargs`, says nothing about it.

    elsewhere: the calls found by the function's name, in this file and in the project files that import it
        (also through a package `__init__.py` re-exporting it); without it, only the calls of this file that
        certainly run the function (through what their names are bound to), for values read in this file.
    every: nothing unless the function is seen called and every call passes the parameter."""
    function = context.enclosing(param, cst.FunctionDef, cst.Lambda)
    if not isinstance(param, cst.Param) or not isinstance(function, cst.FunctionDef):
        return []
    position = _position(context, function, param)
    if position == _NOT_PASSED:
        return []
    sites = _sites_by_name(context, function) if elsewhere else _sites_resolved(context, function)
    found = []
    for there, call in sites:
        arg = _filling(call, param.name.value, position)  # type: ignore[arg-type]
        if arg is not None:
            found.append((there, arg.value))
        elif every:
            return []
    return found


def _position(context: "Context", function: cst.FunctionDef, param: cst.Param) -> Union[int, str, None]:
    """Where a call's positional arguments fill `param`: its index after the receiver of a method; None for a
    keyword-only parameter; `_NOT_PASSED` for `self` and for `*args`, `**kwargs`, which no one argument fills."""
    positional = [*function.params.posonly_params, *function.params.params]
    if param not in positional:
        return None if param in function.params.kwonly_params else _NOT_PASSED
    index = positional.index(param)
    if isinstance(context.enclosing(function, cst.FunctionDef, cst.ClassDef), cst.ClassDef) and not is_static(function):
        index -= 1  # `obj.method(a)`: `a` fills the parameter after `self`
    return index if index >= 0 else _NOT_PASSED


def _filling(call: cst.Call, name: str, position: Optional[int]) -> Optional[cst.Arg]:
    """The argument of `call` that fills the parameter `name` (at `position` among the positional ones)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    if position is None:
        return None
    given = 0
    for arg in call.args:
        if arg.star:
            return None  # `f(*args)`: which parameters it fills is not written
        if arg.keyword is None:
            if given == position:
                return arg
            given += 1
    return None


def _sites_resolved(context: "Context", function: cst.FunctionDef) -> list[tuple["Context", cst.Call]]:
    """The calls of this file that run `function`: by a name bound to it, `self.method(...)`, an instance's
    `__call__`, or the construction that runs `__init__`."""
    from torchlint.semantic.loaders import flow

    return [(context, call) for call in flow(context).call_sites(function)]


def _sites_by_name(context: "Context", function: cst.FunctionDef) -> list[tuple["Context", cst.Call]]:
    """The calls of `function` by its name (`f(...)`; a method's `x.name(...)`) in this file and in the files
    that import it."""
    from torchlint.semantic.model import semantic_model

    facts = semantic_model(context).grad
    scope = facts.by_node.get(function)
    if scope is None or isinstance(scope.node, cst.Module):
        return []
    if scope.cls is not None and function.name.value == "__init__":
        return _constructions(facts, scope.cls)  # `Trainer(model, loader)` runs `__init__`
    return [(there.context, call.node) for there, _, call in facts.call_sites(scope)]


def _constructions(facts: "FileFacts", cls: cst.ClassDef) -> list[tuple["Context", cst.Call]]:
    """The calls that build an object of `cls`: by its name in this file, and in the project files that import
    it (a top-level class)."""
    from torchlint.semantic import project

    name = cls.name.value
    found = [
        (facts.context, c.node)
        for _, c in facts.callers(name)
        if isinstance(c.node.func, cst.Name) and c.node.func.value == name
    ]
    if cls in facts.context.module.body:
        for site in project.call_sites(facts.context.source.path, name):
            found.append((site.summary.context, site.call))
    return found
