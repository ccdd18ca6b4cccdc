"""Call arguments: what flows into a function's parameter.

A network often reaches the code that runs it through a parameter (`def extract(loader, model): ...` called
as `extract(loader, VQVAE().cuda())`; what a helper returns is `functions.returns_of`). `passed_for` finds the expressions the callers of a function pass for one
of its parameters (callers in this file and in the project files that import it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.semantic.functions import is_static

if TYPE_CHECKING:
    from torchlint.semantic.grad_mode import FileFacts


def passed_for(facts: "FileFacts", param: cst.Param) -> list[tuple["FileFacts", cst.BaseExpression]]:
    """The argument expressions, each with the grad facts of the caller's file, that the calls of the function
    owning `param` pass for it (by keyword or by position; a method's `self` is not passed)."""
    function = facts.context.enclosing(param, cst.FunctionDef)
    scope = facts.by_node.get(function) if function is not None else None
    if scope is None or isinstance(scope.node, cst.Module):
        return []
    positional = list(function.params.posonly_params) + list(function.params.params)  # type: ignore[union-attr]
    if param not in positional and param not in function.params.kwonly_params:  # type: ignore[union-attr]
        return []
    index = positional.index(param) if param in positional else None
    if index is not None and scope.cls is not None:
        index -= 1  # `obj.method(a)`: `a` is the second parameter
        if index < 0 and not is_static(function):  # type: ignore[arg-type]
            return []  # `self`: the receiver, which no caller passes
    name = param.name.value
    found = []
    if scope.cls is not None and function.name.value == "__init__":  # type: ignore[union-attr]
        sites = _constructions(facts, scope.cls)  # `Trainer(model, loader)` runs `__init__`
    else:
        sites = [(f, c.node) for f, _, c in facts.call_sites(scope)]
    for site_facts, node in sites:
        for position, arg in enumerate(node.args):
            if arg.star:
                break
            if (arg.keyword is not None and arg.keyword.value == name) or (arg.keyword is None and position == index):
                found.append((site_facts, arg.value))
                break
    return found


def _constructions(facts: "FileFacts", cls: cst.ClassDef) -> list[tuple["FileFacts", cst.Call]]:
    """The calls that build an object of `cls`: by its name in this file, and in the project files that import
    it (a top-level class)."""
    from torchlint.semantic import project

    name = cls.name.value
    found = [
        (facts, c.node)
        for _, c in facts.callers(name)
        if isinstance(c.node.func, cst.Name) and c.node.func.value == name
    ]
    if cls in facts.context.module.body:
        for site in project.call_sites(facts.context.source.path, name):
            found.append((site.summary.model.grad, site.call))
    return found
