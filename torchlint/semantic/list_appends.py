"""What a program appends to its lists: `name.append(v)` in the function (or module) where `name` is used,
read once per scope and shared by the analyses that ask what a list may hold."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.lint.walk import descendants

if TYPE_CHECKING:
    from torchlint.lint.context import Context


class _Appends:
    def __init__(self, context: "Context") -> None:
        self.by_scope: dict[cst.CSTNode, dict[str, list[cst.BaseExpression]]] = {}


def appended(context: "Context", name: cst.Name) -> list[cst.BaseExpression]:
    """What `name.append(v)` adds to the list `name` in the function (or module) that uses it."""
    scope = context.enclosing_function(name) or context.module
    scopes = context.shared(_Appends).by_scope
    found = scopes.get(scope)
    if found is None:
        found = {}
        for node in descendants(scope):
            if (
                isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "append"
                and isinstance(node.func.value, cst.Name) and len(node.args) == 1
            ):
                found.setdefault(node.func.value.value, []).append(node.args[0].value)
        scopes[scope] = found
    return found.get(name.value, [])
