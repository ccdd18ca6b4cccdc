"""Which entry of a dict of loaders a subscript with a literal key reads: `loaders["train"]` where
`loaders = {"train": DataLoader(a), "val": DataLoader(b)}` (bound here, passed in by every caller, or returned
by a function) holds the first loader only, not every loader of the dict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.semantic.call_arguments import passed_for
from torchlint.semantic.functions import returns_of

if TYPE_CHECKING:
    from torchlint.semantic.loaders import Flow

# Methods that change a dict in ways not followed here.
_CHANGES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})


def entry_key(context: Context, subscript: cst.Subscript) -> Optional[str]:
    """The literal string key of `container["key"]`, else None."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    key = context.literal(subscript.slice[0].slice.value)
    return key if isinstance(key, str) else None


class LoaderEntries:
    """The values a dict holds under one key (part of `Flow`)."""

    def dict_entry(self: "Flow", container: cst.BaseExpression, key: str, depth: int = 0) -> Optional[list[cst.BaseExpression]]:
        """The expressions stored under `key` in the dict `container` holds, or None when that is not certain
        (a key that is not a literal, the key absent, a dict changed in ways not followed)."""
        if depth > 6:
            return None
        if isinstance(container, cst.Dict):
            return _literal_entry(self.context, container, key)
        if isinstance(container, cst.Call):
            function = self.function_called(container)
            returned = [r.value for r in returns_of(function)] if function is not None else []
            if not returned or any(v is None for v in returned):
                return None
            return _joined([self.dict_entry(v, key, depth + 1) for v in returned])  # type: ignore[arg-type]
        if not isinstance(container, cst.Name):
            return None
        bindings = self.context.lookup(container) or []
        if len(bindings) == 1 and bindings[0].kind == "param":
            values = [v for _, v in passed_for(self.context, bindings[0].node, elsewhere=False, every=True)]
        elif bindings and all(b.kind == "assign" and b.value is not None for b in bindings):
            values = [b.value for b in bindings]
        else:
            return None
        found = _joined([self.dict_entry(v, key, depth + 1) for v in values])
        return None if found is None else self._stored_entries(container, key, bindings, found)

    def _stored_entries(
        self: "Flow", name: cst.Name, key: str, bindings: list, found: list[cst.BaseExpression]
    ) -> Optional[list[cst.BaseExpression]]:
        """`found` with what `name["key"] = value` statements add; None when the dict is changed otherwise."""
        targets = {id(b.node) for b in bindings}
        for use in self._uses(name.value):
            there = self.context.lookup(use)
            if not there or {id(b.node) for b in there} != targets:
                continue  # another variable of the same name
            parent = self.context.parent(use)
            if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value in _CHANGES:
                return None
            if isinstance(parent, cst.Subscript) and parent.value is use:
                store = self.context.parent(parent)
                if isinstance(store, cst.AssignTarget) or (isinstance(store, cst.AugAssign) and store.target is parent):
                    given = entry_key(self.context, parent)
                    assign = self.context.parent(store)
                    if given is None or not isinstance(assign, cst.Assign):
                        return None
                    if given == key:
                        found = [*found, assign.value]
        return found

    def returned_key(self: "Flow", function: cst.FunctionDef, loader: cst.Call) -> Optional[str]:
        """The key under which `function` returns the loader in a dict (`return {"train": train_loader}`),
        when every return is such a dict and one key holds it."""
        keys: set[str] = set()
        for ret in returns_of(function):
            value = ret.value
            if isinstance(value, cst.Name):
                value = self.context.assigned_value(value)
            if not isinstance(value, cst.Dict):
                return None
            for element in value.elements:
                key = self.context.literal(element.key) if isinstance(element, cst.DictElement) else None
                if not isinstance(key, str):
                    return None
                if loader in (self.loaders_of(element.value) or ()):
                    keys.add(key)
        return next(iter(keys)) if len(keys) == 1 else None


def _literal_entry(context: Context, value: cst.Dict, key: str) -> Optional[list[cst.BaseExpression]]:
    out = []
    for element in value.elements:
        if not isinstance(element, cst.DictElement):
            return None
        given = context.literal(element.key)
        if not isinstance(given, str):
            return None
        if given == key:
            out.append(element.value)
    return out or None


def _joined(parts: list[Optional[list[cst.BaseExpression]]]) -> Optional[list[cst.BaseExpression]]:
    if not parts or any(p is None for p in parts):
        return None
    return [e for p in parts for e in p]  # type: ignore[union-attr]
