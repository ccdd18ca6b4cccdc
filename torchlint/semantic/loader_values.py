"""Which DataLoader(...) calls an expression may hold: through assignments, containers and dicts of
loaders, `self.` attributes, function returns and the arguments this file passes for a parameter."""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from torchlint.lint.names import last_name
from torchlint.semantic.call_arguments import passed_for
from torchlint.semantic.functions import called_function, instance_call, returns_of
from torchlint.semantic.loader_calls import (
    TQDM,
    element_at,
    is_dataloader,
    strict_union,
)
from torchlint.semantic.loader_entries import entry_key


class LoaderValues:
    """Which DataLoader(...) calls of this file an expression may hold (part of `Flow`)."""

    def loaders_of(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> Optional[frozenset]:
        """The DataLoader(...) calls `expr` evaluates to, or None when that is not certain."""
        if expr is None or depth > 6:
            return None
        return self._memo.ask(expr, lambda e: self._loaders_of(e, depth))

    def _loaders_of(self, expr: cst.BaseExpression, depth: int) -> Optional[frozenset]:
        context = self.context
        if isinstance(expr, cst.Call):
            if is_dataloader(context, expr):
                return frozenset([expr])
            name = last_name(expr.func)
            if name in TQDM and (context.qualname(expr) or "").startswith(("tqdm", "rich")) and expr.args:
                return self.loaders_of(expr.args[0].value, depth + 1)
            function = self.function_called(expr)
            if function is not None:
                return self._union((r.value for r in returns_of(function)), depth)
            return None
        if isinstance(expr, cst.IfExp):
            return self._union([expr.body, expr.orelse], depth)
        if isinstance(expr, cst.Name) and expr.value == "None":
            return frozenset()  # `DataLoader(...) if split else None` holds that loader or nothing
        if isinstance(expr, cst.Name):
            bindings = self._reaching_at_top(expr, context.lookup(expr) or [])
            if not bindings:
                return None
            parts: list[Optional[frozenset]] = []
            for binding in bindings:
                if binding.kind == "assign":
                    parts.append(self.loaders_of(binding.value, depth + 1))
                elif binding.kind == "param":
                    parts.append(self._param_loaders(binding.node, depth))
                elif isinstance(binding.node, cst.Assign):
                    parts.append(self._unpacked(binding.node, expr.value, depth))
                elif isinstance(binding.node, cst.WithItem):
                    parts.append(self.loaders_of(binding.node.item, depth + 1))  # `with tqdm(loader) as bar:`
                else:
                    return None
            return strict_union(parts)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = context.enclosing(expr, cst.ClassDef)
            values = self.self_assigns.get((id(cls), expr.attr.value)) if cls is not None else None
            if not values:
                return None
            return self._union(values, depth)
        if isinstance(expr, cst.Attribute):
            # `self.data.train_loader` where `self.data = DataModule(args)`, a class of this file
            cls = self._instance_class(expr.value)
            values = self.self_assigns.get((id(cls), expr.attr.value)) if cls is not None else None
            return self._union(values, depth) if values else None
        if isinstance(expr, cst.Subscript):
            key = entry_key(context, expr)
            entries = self.dict_entry(expr.value, key) if key is not None else None  # type: ignore[attr-defined]
            if entries is not None:
                return self._union(entries, depth)  # `loaders["train"]` of `{"train": DataLoader(a), ...}`
            # `dataloaders[phase]` where `dataloaders = {x: DataLoader(...) for x in ["train", "val"]}`
            elements = self._elements(expr.value, depth)
            return None if elements is None else self._union(elements, depth)
        return None

    def _elements(self, container: cst.BaseExpression, depth: int) -> Optional[list[cst.BaseExpression]]:
        """The expressions a dict, list or tuple of loaders holds, or None when that is not certain."""
        if depth > 6:
            return None
        if isinstance(container, cst.Dict):
            if any(not isinstance(e, cst.DictElement) for e in container.elements):
                return None
            return [e.value for e in container.elements]  # type: ignore[union-attr]
        if isinstance(container, cst.DictComp):
            return [container.value]
        if isinstance(container, cst.ListComp):
            return [container.elt]
        if isinstance(container, (cst.List, cst.Tuple)):
            if any(isinstance(e, cst.StarredElement) for e in container.elements):
                return None
            return [e.value for e in container.elements]
        if isinstance(container, cst.Name):
            bindings = self.context.lookup(container)
            if not bindings:
                return None
            if len(bindings) == 1 and bindings[0].kind == "param":
                passed = passed_for(self.context, bindings[0].node, elsewhere=False, every=True)  # type: ignore[arg-type]
                return self._all_elements([v for _, v in passed], depth) if passed else None
            if any(b.kind != "assign" or b.value is None for b in bindings):
                return None
            out = self._all_elements([b.value for b in bindings], depth)  # type: ignore[misc]
            if out is None:
                return None
            targets = {id(b.node) for b in bindings}
            for use in self._uses(container.value):
                found = self.context.lookup(use)
                if not found or {id(b.node) for b in found} != targets:
                    continue
                parent = self.context.parent(use)
                if isinstance(parent, cst.Attribute) and parent.value is use:
                    appended = self._appended(parent)
                    if appended is not None:
                        out.append(appended)  # `loaders.append(iter(loader))` into a list that starts empty
                        continue
                    if parent.attr.value in ("update", "append", "extend", "insert", "setdefault", "__setitem__"):
                        return None  # filled in a way not followed
                elif isinstance(parent, cst.Subscript) and parent.value is use:
                    store = self.context.parent(parent)
                    if isinstance(store, cst.AssignTarget):
                        assign = self.context.parent(store)
                        if not isinstance(assign, cst.Assign):
                            return None
                        out.append(assign.value)  # `dataloaders["test"] = DataLoader(...)`
                    elif isinstance(store, cst.AugAssign) and store.target is parent:
                        return None
            return out
        if isinstance(container, cst.Attribute) and isinstance(container.value, cst.Name) and container.value.value == "self":
            cls = self.context.enclosing(container, cst.ClassDef)
            values = self.self_assigns.get((id(cls), container.attr.value)) if cls is not None else None
            return self._all_elements(values, depth) if values else None
        if isinstance(container, cst.Call):
            # `loaders = get_loaders(cfg)` where `def get_loaders(cfg): ...; return {x: DataLoader(...) for x in ...}`
            function = self.function_called(container)
            returned = [r.value for r in returns_of(function)] if function is not None else []
            if not returned or any(v is None for v in returned):
                return None
            return self._all_elements(returned, depth)  # type: ignore[arg-type]
        return None

    def _appended(self, method: cst.Attribute) -> Optional[cst.BaseExpression]:
        """`x` of `name.append(x)`, a statement of its own."""
        call = self.context.parent(method)
        if method.attr.value != "append" or not isinstance(call, cst.Call) or len(call.args) != 1 or call.args[0].keyword:
            return None
        return call.args[0].value if isinstance(self.context.parent(call), cst.Expr) else None

    def _reaching_at_top(self, use: cst.Name, bindings: list) -> list:
        """At the top level of a script or notebook, which runs once from top to bottom, the one binding of
        `use` made by the latest top-level statement before it (`loader = DataLoader(a)` in one cell, rebound
        by `loader = make_loaders()` in a later one); every binding elsewhere."""
        nearest = self._nearest_before(use, bindings)
        if nearest is not None:
            return [nearest]
        module = self.context.module
        if not bindings or self.context.enclosing(use, cst.FunctionDef, cst.ClassDef, cst.Lambda) is not None:
            return bindings
        at = {id(statement): i for i, statement in enumerate(module.body)}
        use_at = self._top_index(use, at)
        placed = [(self._top_index(b.node, at), b) for b in bindings]
        if use_at is None or any(i is None or not self._is_top_statement(b.node) for i, b in placed):
            return bindings
        before = [(i, b) for i, b in placed if i < use_at]  # type: ignore[operator]
        return [max(before, key=lambda p: p[0])[1]] if before else bindings

    def _nearest_before(self, use: cst.CSTNode, bindings: list) -> Optional[object]:
        """The binding made by the nearest earlier simple statement of a block around `use`, when no binding
        may come between: `it = iter(batches)` at the top of a loop body, after `it = iter(preview)` above the
        loop, is what `next(it)` in that body reads. None when that is not certain (a binding in a branch, or
        later in a loop around the use, which the next trip reads)."""
        if len(bindings) < 2:
            return None
        context = self.context
        child: cst.CSTNode = use
        for ancestor in context.ancestors(use):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return None
            if isinstance(ancestor, (cst.For, cst.While)) and any(self._contains(ancestor, b.node) for b in bindings):
                return None
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
                body = list(ancestor.body)
                at = next((i for i, statement in enumerate(body) if statement is child), None)
                for statement in reversed(body[:at] if at is not None else []):
                    inside = [b for b in bindings if self._contains(statement, b.node)]
                    if inside:
                        return inside[-1] if isinstance(statement, cst.SimpleStatementLine) and len(inside) == 1 else None
            child = ancestor
        return None

    def _contains(self, container: cst.CSTNode, node: cst.CSTNode) -> bool:
        return node is container or any(a is container for a in self.context.ancestors(node))

    def _top_index(self, node: cst.CSTNode, at: dict[int, int]) -> Optional[int]:
        for ancestor in [node, *self.context.ancestors(node)]:
            if id(ancestor) in at:
                return at[id(ancestor)]
        return None

    def _is_top_statement(self, node: cst.CSTNode) -> bool:
        """`node` is bound by a simple statement of the module body (not inside an `if`, a loop or a `with`)."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.SimpleStatementLine):
                return self.context.parent(ancestor) is self.context.module
            if isinstance(ancestor, cst.BaseCompoundStatement):
                return False
        return False

    def _instance_class(self, holder: cst.BaseExpression) -> Optional[cst.ClassDef]:
        """The class of this file whose instance `holder` (a name, or a `self.` attribute assigned once) is."""
        built: Optional[cst.BaseExpression] = None
        if isinstance(holder, cst.Name):
            built = self.context.assigned_value(holder)
        elif isinstance(holder, cst.Attribute) and isinstance(holder.value, cst.Name) and holder.value.value == "self":
            cls = self.context.enclosing(holder, cst.ClassDef)
            values = self.self_assigns.get((id(cls), holder.attr.value)) if cls is not None else None
            built = values[0] if values and len(values) == 1 else None
        if not (isinstance(built, cst.Call) and isinstance(built.func, cst.Name)):
            return None
        bindings = self.context.lookup(built.func)
        found = bindings[0].node if bindings and len(bindings) == 1 else None
        return found if isinstance(found, cst.ClassDef) else None

    def _all_elements(self, containers: list[cst.BaseExpression], depth: int) -> Optional[list[cst.BaseExpression]]:
        out: list[cst.BaseExpression] = []
        for container in containers:
            elements = self._elements(container, depth + 1)
            if elements is None:
                return None
            out.extend(elements)
        return out

    def _union(self, exprs: Iterable[Optional[cst.BaseExpression]], depth: int = 0) -> Optional[frozenset]:
        parts = [self.loaders_of(e, depth + 1) for e in exprs]
        return strict_union(parts) if parts else None

    def _unpacked(self, assign: cst.Assign, name: str, depth: int) -> Optional[frozenset]:
        """`train, val = make_loaders()` / `a, b = DataLoader(x), DataLoader(y)`: the element bound to `name`."""
        if len(assign.targets) != 1:
            return None
        target = assign.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return None
        index = None
        for i, element in enumerate(target.elements):
            if isinstance(element.value, cst.Name) and element.value.value == name:
                index = i
        if index is None or any(isinstance(e, cst.StarredElement) for e in target.elements):
            return None
        size = len(target.elements)
        values: list[Optional[cst.BaseExpression]] = []
        if isinstance(assign.value, (cst.Tuple, cst.List)):
            values = [element_at(assign.value, index, size)]
        elif isinstance(assign.value, cst.Call):
            function = self.function_called(assign.value)
            if function is None:
                return None
            returns = list(returns_of(function))
            if not returns:
                return None
            for ret in returns:
                value = ret.value
                if isinstance(value, cst.Name):
                    assigned = self.context.assigned_value(value)
                    value = assigned if isinstance(assigned, (cst.Tuple, cst.List)) else value
                if not isinstance(value, (cst.Tuple, cst.List)):
                    return None
                values.append(element_at(value, index, size))
        else:
            return None
        return self._union(values, depth)

    def function_called(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The FunctionDef a call runs, when it is a function, a `self.` method or the `__call__` of an instance
        of a class defined in this file."""
        return called_function(self.context, call) or instance_call(self.context, call)

    def call_sites(self, function: cst.FunctionDef) -> list[cst.Call]:
        if function.name.value == "__init__":
            cls = self.context.enclosing(function, cst.ClassDef)
            if isinstance(cls, cst.ClassDef):
                return [c for c in self.calls_by_name.get(cls.name.value, ()) if self._constructs(c, cls)]
        if function.name.value == "__call__":
            return self._instance_calls(function)
        return [c for c in self.calls_by_name.get(function.name.value, ()) if self.function_called(c) is function]

    def _instance_calls(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls of this file that run `__call__` on an instance: `evaluate(...)`, `Evaluator(...)(...)`."""
        found = [c for calls in self.calls_by_name.values() for c in calls if instance_call(self.context, c) is function]
        cls = self.context.enclosing(function, cst.ClassDef)
        for built in self.calls_by_name.get(cls.name.value, ()) if isinstance(cls, cst.ClassDef) else ():
            outer = self.context.parent(built)
            if isinstance(outer, cst.Call) and outer.func is built and instance_call(self.context, outer) is function:
                found.append(outer)
        return found

    def _constructs(self, call: cst.Call, cls: cst.ClassDef) -> bool:
        if not isinstance(call.func, cst.Name):
            return False
        bindings = self.context.lookup(call.func)
        return bool(bindings) and len(bindings) == 1 and bindings[0].node is cls

    def _param_loaders(self, param: cst.CSTNode, depth: int) -> Optional[frozenset]:
        """What every call of this file passes for a parameter, when each passes it."""
        passed = passed_for(self.context, param, elsewhere=False, every=True)  # type: ignore[arg-type]
        return self._union([v for _, v in passed], depth) if passed else None
