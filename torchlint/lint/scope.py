"""Where each name in a function (or the module) is bound: enough for simple constant flow.

`n = 0; DataLoader(ds, num_workers=n)` resolves `n` to `0`; a name that is a parameter, bound twice,
bound in a loop header, augmented, or declared global resolves to nothing. Nested functions, classes,
lambdas and comprehensions are separate scopes and are not looked into.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Union

import libcst as cst

ScopeNode = Union[cst.Module, cst.FunctionDef, cst.Lambda]


@dataclass(frozen=True)
class Binding:
    """One binding of a name: `value` is the assigned expression for a plain `name = value`, else None."""

    node: cst.CSTNode
    value: Optional[cst.BaseExpression]
    kind: str  # "assign", "param", "import", "loop", "other"


_NESTED_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


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
        for child in _children(body):
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

    def _walk(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            value = node.value if len(node.targets) == 1 else None
            for target in node.targets:
                self._targets(target.target, node, value, "assign")
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self._targets(node.target, node, node.value, "assign")
        elif isinstance(node, cst.AugAssign):
            self._targets(node.target, node, None, "other")
        elif isinstance(node, (cst.For, cst.CompFor)):
            self._targets(node.target, node, None, "loop")
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            self._targets(node.asname.name, node, None, "other")
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            self._targets(node.name.name, node, None, "other")
        elif isinstance(node, cst.NamedExpr):
            self._targets(node.target, node, node.value, "other")
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            names = node.names
            if not isinstance(names, cst.ImportStar):
                for alias in names:
                    local = alias.asname.name if alias.asname else alias.name
                    while isinstance(local, cst.Attribute):
                        local = local.value
                    if isinstance(local, cst.Name):
                        self._add(local.value, Binding(node, None, "import"))
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            for item in node.names:
                self.globals.add(item.name.value)
        elif isinstance(node, cst.Del):
            self._targets(node.target, node, None, "other")
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._add(node.name.value, Binding(node, None, "other"))
            for decorator in node.decorators:
                self._walk(decorator)
            return  # its body is its own scope
        if isinstance(node, _NESTED_SCOPES):
            return
        for child in _children(node):
            self._walk(child)


def _children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    from torchlint.lint.walk import semantic_children

    return semantic_children(node)
