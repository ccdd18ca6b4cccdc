"""Functions of the file: which definition a call runs, and what the definition returns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants, semantic_children

if TYPE_CHECKING:
    from torchlint.lint.context import Context

_SCOPE_TYPES = frozenset((cst.FunctionDef, cst.ClassDef, cst.Lambda))  # exact node types: see `walk.is_a`


def called_function(context: "Context", call: cst.Call) -> Optional[cst.FunctionDef]:
    """The function of this file that `call` runs: a name bound once to a `def` (at module level or in an
    enclosing function), or `self.method(...)` of the enclosing class. None when it cannot be told."""
    func = call.func
    if isinstance(func, cst.Name):
        bindings = context.lookup(func)
        if bindings and len(bindings) == 1 and isinstance(bindings[0].node, cst.FunctionDef):
            return bindings[0].node
        return None
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        cls = context.enclosing(call, cst.ClassDef)
        if cls is not None:
            return method_named(cls, func.attr.value)  # type: ignore[arg-type]
    return None


def instance_call(context: "Context", call: cst.Call) -> Optional[cst.FunctionDef]:
    """The `__call__` of a class of this file that `call` runs on an instance: `evaluate(net, loader)` where
    `evaluate = Evaluator(...)` is bound once, or `Evaluator(...)(net, loader)`. None when it cannot be told."""
    func = call.func
    built = func if isinstance(func, cst.Call) else context.assigned_value(func) if isinstance(func, cst.Name) else None
    if not isinstance(built, cst.Call) or not isinstance(built.func, cst.Name):
        return None
    bindings = context.lookup(built.func)
    if not bindings or len(bindings) != 1 or not isinstance(bindings[0].node, cst.ClassDef):
        return None
    return method_named(bindings[0].node, "__call__")


def calls_named(context: "Context", name: str) -> list[cst.Call]:
    """The file's calls `name(...)` and `<expr>.name(...)`, in source order (the file indexed once)."""
    return context.shared(_CallIndex).calls.get(name, [])


class _CallIndex:
    """The file's calls by the last name of what they call."""

    def __init__(self, context: "Context") -> None:
        self.calls: dict[str, list[cst.Call]] = {}
        for node in descendants(context.module):
            if type(node) is cst.Call:  # exact types: see `walk.is_a`
                func = node.func  # type: ignore[attr-defined]
                kind = type(func)
                called = func.value if kind is cst.Name else func.attr.value if kind is cst.Attribute else None
                if called is not None:
                    self.calls.setdefault(called, []).append(node)  # type: ignore[arg-type]


def is_static(function: cst.FunctionDef) -> bool:
    """Decorated `@staticmethod`: no receiver comes first."""
    return any(last_name(d.decorator) == "staticmethod" for d in function.decorators)


def method_named(cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    """The method `name` defined in the class body itself."""
    body = cls.body
    if isinstance(body, cst.IndentedBlock):
        for stmt in body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
                return stmt
    return None


def returns_of(function: cst.FunctionDef) -> Iterator[cst.Return]:
    """The `return` statements of a function (not of functions nested in it)."""
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        for child in semantic_children(node):
            kind = type(child)  # exact types: see `walk.is_a`
            if kind is cst.Return:
                yield child  # type: ignore[misc]
            elif kind not in _SCOPE_TYPES:
                stack.append(child)


def is_generator(function: cst.FunctionDef) -> bool:
    """The function yields (calling it returns a generator, not its `return` value)."""
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        for child in semantic_children(node):
            kind = type(child)  # exact types: see `walk.is_a`
            if kind is cst.Yield:
                return True
            if kind not in _SCOPE_TYPES:
                stack.append(child)
    return False
