"""A DataLoader's settings when they are not literals at the call: `num_workers` that is surely positive
(`os.cpu_count()`, an argparse default), and options that arrive through `**kwargs` dicts built in the file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.calls import argument, has_star_args, keyword, positional
from torchlint.lint.context import UNKNOWN, Context
from torchlint.semantic import project
from torchlint.semantic.loader_calls import MISSING, is_builtin

if TYPE_CHECKING:
    from torchlint.semantic.loaders import Flow


_CPU_COUNT = frozenset({"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count"})


def positive_workers(context: Context, flow: "Flow", expr: cst.BaseExpression) -> Optional[str]:
    """How `num_workers=expr` is surely > 0: "literal", "cpu", or "default" (an argparse default > 0), else None."""
    value = context.literal(expr)
    if value is not UNKNOWN:
        return "literal" if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
    if isinstance(expr, cst.Name):
        assigned = context.assigned_value(expr)
        return positive_workers(context, flow, assigned) if assigned is not None else None
    if isinstance(expr, cst.Call):
        name = context.qualname(expr)
        if name in _CPU_COUNT and not expr.args:
            return "cpu"
        if is_builtin(context, expr.func, "len") and len(expr.args) == 1:
            inner = expr.args[0].value
            if isinstance(inner, cst.Call) and context.qualname(inner) == "os.sched_getaffinity":
                return "cpu"
        if is_builtin(context, expr.func, "int") and len(expr.args) == 1 and not expr.args[0].keyword:
            return positive_workers(context, flow, expr.args[0].value)
        if is_builtin(context, expr.func, "min") and len(expr.args) >= 2 and not has_star_args(expr):
            kinds = [positive_workers(context, flow, a.value) for a in expr.args]
            return "cpu" if all(kinds) else None
        return None
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        # `os.cpu_count() or 1`
        kinds = [positive_workers(context, flow, expr.left), positive_workers(context, flow, expr.right)]
        return "cpu" if all(kinds) else None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        default = flow.argparse_default(expr.attr.value)
        if isinstance(default, int) and not isinstance(default, bool) and default > 0:
            return "default"
    return None


class LoaderSettings:
    """A loader's settings: argparse defaults and the `**kwargs` dicts its options arrive through (part of `Flow`)."""

    def _add_argument(self, call: cst.Call) -> None:
        dest = keyword(call, "dest")
        names = []
        if dest is not None and isinstance(dest.value, cst.SimpleString):
            names.append(dest.value.evaluated_value)
        else:
            for arg in positional(call):
                if isinstance(arg.value, cst.SimpleString):
                    text = arg.value.evaluated_value
                    if isinstance(text, str) and text.startswith("--"):
                        names.append(text[2:].replace("-", "_"))
                        break
        for name in names:
            self._argparse.setdefault(name, []).append(call)

    def argparse_default(self, dest: str) -> object:
        calls = self._argparse.get(dest, [])
        if len(calls) != 1:
            return UNKNOWN
        default = keyword(calls[0], "default")
        return self.context.literal(default.value) if default is not None else UNKNOWN

    def switch_default(self, dest: str) -> object:
        """The value a command-line option of this file has when the command line leaves it out: its
        `default=`, else False for `action="store_true"` (True for `store_false`); `UNKNOWN` when not known."""
        calls = self._argparse.get(dest, [])
        if len(calls) != 1:
            return UNKNOWN
        default = keyword(calls[0], "default")
        if default is not None:
            return self.context.literal(default.value)
        action = keyword(calls[0], "action")
        switch = self.context.literal(action.value) if action is not None else None
        return {"store_true": False, "store_false": True}.get(switch, UNKNOWN)  # type: ignore[arg-type]

    def setting_options(self, call: cst.Call, name: str, position: Optional[int]) -> Optional[frozenset]:
        """Every value a DataLoader setting may take (`MISSING` for the default), or None when undecidable.

        Follows `**kw` where `kw` is a dict literal (or `dict(...)`, or a conditional choice of them) in the
        same file, changed only by `kw.update(<dict>)`, `kw.update(key=...)` and `kw["key"] = ...`.
        """
        arg = argument(call, name, position)
        if arg is not None:
            return self.value_options(arg.value)
        if has_star_args(call) or (position is not None and len(positional(call)) > position):
            return None
        present: set = set()
        always_missing = True
        for given in call.args:
            if given.star != "**":
                continue
            facts = self.dict_facts(given.value)
            if facts is None:
                return None
            options = facts.get(name, frozenset([MISSING]))
            present |= options - {MISSING}
            always_missing = always_missing and MISSING in options
        return frozenset(present | ({MISSING} if always_missing else set()))

    def dict_facts(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[dict[str, frozenset]]:
        """key -> the values it may hold (`MISSING` where it may be absent); keys not listed are absent."""
        if depth > 4:
            return None
        context = self.context
        if isinstance(expr, cst.Dict):
            facts: dict[str, frozenset] = {}
            for element in expr.elements:
                if isinstance(element, cst.StarredDictElement):
                    inner = self.dict_facts(element.value, depth + 1)
                    if inner is None:
                        return None
                    facts = _merge_update(facts, inner)
                    continue
                key = context.literal(element.key)
                if not isinstance(key, str):
                    return None
                facts[key] = self.value_options(element.value)
            return facts
        if isinstance(expr, cst.Call) and is_builtin(context, expr.func, "dict"):
            facts = {}
            for given in expr.args:
                if given.keyword is not None and not given.star:
                    facts[given.keyword.value] = self.value_options(given.value)
                elif given.keyword is None and not given.star and given is expr.args[0]:
                    inner = self.dict_facts(given.value, depth + 1)
                    if inner is None:
                        return None
                    facts.update(inner)
                else:
                    return None
            return facts
        if isinstance(expr, cst.IfExp):
            body, orelse = self.dict_facts(expr.body, depth + 1), self.dict_facts(expr.orelse, depth + 1)
            return None if body is None or orelse is None else _either(body, orelse)
        if isinstance(expr, cst.Name):
            return self._name_facts(expr, depth)
        return None

    def _name_facts(self, name: cst.Name, depth: int) -> Optional[dict[str, frozenset]]:
        context = self.context
        bindings = context.lookup(name)
        if not bindings:
            return None
        facts: Optional[dict[str, frozenset]] = None
        if len(bindings) == 1 and bindings[0].kind == "param":
            facts = self._forwarded_kwargs(bindings[0].node, depth)
        elif all(b.kind == "assign" and b.value is not None for b in bindings):
            for binding in bindings:
                one = self.dict_facts(binding.value, depth + 1)  # type: ignore[arg-type]
                if one is None:
                    return None
                facts = one if facts is None else _either(facts, one)
        if facts is None:
            return None
        targets = {id(b.node) for b in bindings}
        for use in self._uses(name.value):
            found = context.lookup(use)
            if not found or {id(b.node) for b in found} != targets:
                continue  # another variable of the same name
            change = self._dict_change(use, depth)
            if change is None:
                return None
            facts = _merge_maybe(facts, change)
        return facts

    def _forwarded_kwargs(self, param: cst.CSTNode, depth: int) -> Optional[dict[str, frozenset]]:
        """The facts of a function's `**kwargs` parameter: what every call of it passes by keyword (this file's
        calls or, where it has none, those of the files importing it): `make_loaders(args, **kwargs)` with
        `kwargs = {"num_workers": 4, "pin_memory": True}`, forwarded to `DataLoader(..., **kwargs)`."""
        function = self.context.enclosing(param, cst.FunctionDef)
        if not isinstance(function, cst.FunctionDef) or function.params.star_kwarg is not param or depth > 2:
            return None
        named = {p.name.value for p in (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params)}
        sites = [(self, call) for call in self.call_sites(function)]
        if not sites and function in self.context.module.body:
            sites = [(site.summary.model.loaders, site.call) for site in project.call_sites(self.context.source.path, function.name.value)]
        facts: Optional[dict[str, frozenset]] = None
        for there, call in sites:
            one: dict[str, frozenset] = {}
            for given in call.args:
                if given.star == "**":
                    inner = there.dict_facts(given.value, depth + 1)
                    if inner is None:
                        return None
                    one = _merge_update(one, inner)
                elif given.keyword is not None and given.keyword.value not in named:
                    one[given.keyword.value] = frozenset([there.context.literal(given.value)])
            for key in named:
                one.pop(key, None)  # bound to a named parameter, not to `**kwargs`
            facts = one if facts is None else _either(facts, one)
        return facts

    def _dict_change(self, use: cst.Name, depth: int) -> Optional[dict[str, frozenset]]:
        """What one use of a dict variable may add to it: {} for a read, None for anything not understood."""
        context = self.context
        parent = context.parent(use)
        if (isinstance(parent, cst.AssignTarget) and parent.target is use) or (isinstance(parent, cst.Param) and parent.name is use):
            return {}  # the binding itself
        if isinstance(parent, cst.Arg) and parent.value is use:
            holder = context.parent(parent)
            if parent.star == "**":
                return {}
            if (
                not parent.star
                and isinstance(holder, cst.Call)
                and isinstance(holder.func, cst.Attribute)
                and holder.func.attr.value == "update"
            ):
                return {}  # `other.update(kw)` reads it
            return None
        if isinstance(parent, cst.StarredDictElement):
            return {}
        if isinstance(parent, cst.Attribute) and parent.value is use:
            call = context.parent(parent)
            method = parent.attr.value
            if not isinstance(call, cst.Call) or call.func is not parent:
                return None
            if method in ("get", "keys", "items", "values", "copy"):
                return {}
            if method != "update" or has_star_args(call):
                return None
            change: dict[str, frozenset] = {}
            for given in call.args:
                if given.keyword is not None and not given.star:
                    change[given.keyword.value] = frozenset([context.literal(given.value)])
                elif given.keyword is None and not given.star and len(positional(call)) == 1:
                    inner = self.dict_facts(given.value, depth + 1)
                    if inner is None:
                        return None
                    change = _merge_update(change, inner)
                else:
                    return None
            return change
        if isinstance(parent, cst.Subscript) and parent.value is use:
            outer = context.parent(parent)
            stores = isinstance(outer, cst.AssignTarget) or (isinstance(outer, cst.AugAssign) and outer.target is parent)
            if not stores and not isinstance(outer, cst.Del):
                return {}  # `kw["batch_size"]` read
            elements = parent.slice
            if len(elements) != 1 or not isinstance(elements[0].slice, cst.Index):
                return None
            key = context.literal(elements[0].slice.value)
            if not isinstance(key, str) or not isinstance(outer, cst.AssignTarget):
                return None
            assign = context.parent(outer)
            if not isinstance(assign, cst.Assign):
                return None
            return {key: frozenset([context.literal(assign.value)])}
        if isinstance(parent, cst.ComparisonTarget) and isinstance(parent.operator, (cst.In, cst.NotIn)):
            return {}
        return None


def _either(a: dict[str, frozenset], b: dict[str, frozenset]) -> dict[str, frozenset]:
    """The facts of a dict that is one of two dicts."""
    missing = frozenset([MISSING])
    return {key: a.get(key, missing) | b.get(key, missing) for key in {**a, **b}}


def _merge_update(base: dict[str, frozenset], change: dict[str, frozenset]) -> dict[str, frozenset]:
    """The facts after `base.update(change)` surely runs."""
    out = dict(base)
    for key, values in change.items():
        kept = out.get(key, frozenset([MISSING])) if MISSING in values else frozenset()
        out[key] = (values - {MISSING}) | kept
    return out


def _merge_maybe(base: dict[str, frozenset], change: dict[str, frozenset]) -> dict[str, frozenset]:
    """The facts after `base.update(change)` may or may not have run (a branch, or an order not followed)."""
    out = dict(base)
    for key, values in change.items():
        out[key] = out.get(key, frozenset([MISSING])) | values
    return out
