"""Where each name in a function (or the module) is bound: enough for simple constant flow.

`n = 0; DataLoader(ds, num_workers=n)` resolves `n` to `0`; a name that is a parameter, bound twice,
bound in a loop header, augmented, or declared global resolves to nothing. Nested functions, classes,
lambdas and comprehensions are separate scopes and are not looked into.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst

from torchlint.lint.walk import semantic_children

ScopeNode = Union[cst.Module, cst.FunctionDef, cst.Lambda]


@dataclass(frozen=True)
class Binding:
    """One binding of a name: `value` is the assigned expression for a plain `name = value`, else None."""

    node: cst.CSTNode
    value: Optional[cst.BaseExpression]
    kind: str  # "assign", "param", "import", "loop", "other"


_NESTED_SCOPES = frozenset({cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp})


class ScopeBindings:
    """All bindings made directly in one scope, by name, in source order."""

    def __init__(self, scope: ScopeNode) -> None:
        self.by_name: dict[str, list[Binding]] = {}
        self.globals: set[str] = set()
        if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
            self._params(scope.params)
            body: cst.CSTNode = scope.body
        else:
            body = scope
        for child in semantic_children(body):
            self._walk(child)

    def get(self, name: str) -> list[Binding]:
        return self.by_name.get(name, [])

    def _add(self, name: str, binding: Binding) -> None:
        self.by_name.setdefault(name, []).append(binding)

    def _params(self, params: cst.Parameters) -> None:
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                every.append(extra)
        for param in every:
            self._add(param.name.value, Binding(param, None, "param"))

    def _targets(self, target: cst.BaseExpression, node: cst.CSTNode, value: Optional[cst.BaseExpression], kind: str) -> None:
        if isinstance(target, cst.Name):
            self._add(target.value, Binding(node, value, kind))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._targets(element.value, node, None, "other" if kind == "assign" else kind)
        elif isinstance(target, cst.StarredElement):
            self._targets(target.value, node, None, "other")

    def _walk(self, root: cst.CSTNode) -> None:
        # Iterative, and dispatching on exact node types: this runs over every function of every file.
        stack = [root]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind in _BINDERS:
                self._bind(node, kind)
            if kind is cst.FunctionDef or kind is cst.ClassDef:
                self._add(node.name.value, Binding(node, None, "other"))
                stack.extend(reversed(node.decorators))
                continue  # its body is its own scope
            if kind in _NESTED_SCOPES:
                continue
            stack.extend(reversed(semantic_children(node)))

    def _bind(self, node: cst.CSTNode, kind: type) -> None:
        if kind is cst.Assign:
            value = node.value if len(node.targets) == 1 else None
            for target in node.targets:
                self._targets(target.target, node, value, "assign")
        elif kind is cst.AnnAssign:
            if node.value is not None:
                self._targets(node.target, node, node.value, "assign")
        elif kind is cst.AugAssign or kind is cst.Del:
            self._targets(node.target, node, None, "other")
        elif kind is cst.For or kind is cst.CompFor:
            self._targets(node.target, node, None, "loop")
        elif kind is cst.WithItem:
            if node.asname is not None:
                self._targets(node.asname.name, node, None, "other")
        elif kind is cst.ExceptHandler or kind is cst.ExceptStarHandler:
            if node.name is not None:
                self._targets(node.name.name, node, None, "other")
        elif kind is cst.NamedExpr:
            self._targets(node.target, node, node.value, "other")
        elif kind is cst.Import or kind is cst.ImportFrom:
            if not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    local = alias.asname.name if alias.asname else alias.name
                    while isinstance(local, cst.Attribute):
                        local = local.value
                    if isinstance(local, cst.Name):
                        self._add(local.value, Binding(node, None, "import"))
        elif kind is cst.Global or kind is cst.Nonlocal:
            for item in node.names:
                self.globals.add(item.name.value)


_BINDERS = frozenset(
    {
        cst.Assign,
        cst.AnnAssign,
        cst.AugAssign,
        cst.Del,
        cst.For,
        cst.CompFor,
        cst.WithItem,
        cst.ExceptHandler,
        cst.ExceptStarHandler,
        cst.NamedExpr,
        cst.Import,
        cst.ImportFrom,
        cst.Global,
        cst.Nonlocal,
    }
)


