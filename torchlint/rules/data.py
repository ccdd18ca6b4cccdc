"""Data loading: DataLoader settings and habits that leave the accelerator waiting for the next batch.

The rules need to know what a loader reads and where its batches go, so they decide when the walk leaves
the module (every node's parent is known by then) and share one per-file analysis, `_Flow`: which `for`
loops iterate which `DataLoader(...)` calls (through names, `self.` attributes, helper functions that
return a loader, and parameters of functions and constructors in the same file), which names in those
loops hold the batches, and which of them are copied to the accelerator.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Optional

import libcst as cst

from torchlint.lint.calls import argument, has_star_args, has_star_kwargs, keyword, positional, with_keyword
from torchlint.lint.context import UNKNOWN, Context
from torchlint.lint.hotloop import gated, hot_loop, is_hot
from torchlint.lint.files import is_test_file, uses_accelerator
from torchlint.lint.names import last_name
from torchlint.lint.rule import Fix, FixSafety, Replace, Rule
from torchlint.lint.walk import descendants

DATALOADER = "torch.utils.data.DataLoader"
# Drop-in replacements with the same constructor and defaults.
_LOADERS = frozenset(
    {
        DATALOADER,
        "torchdata.stateful_dataloader.StatefulDataLoader",
        "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader",
    }
)
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
_NUM_WORKERS_AT = 5
_COLLATE_AT = 6
_PIN_MEMORY_AT = 7

_FUNCTION_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_LOOPS = (cst.For, cst.While)


# -- small helpers -------------------------------------------------------------------------------


def is_dataloader(context: Context, node: cst.CSTNode) -> bool:
    """`node` is a call of torch's `DataLoader` (through any import spelling)."""
    return isinstance(node, cst.Call) and context.qualname(node) in _LOADERS


def _is_builtin(context: Context, func: cst.BaseExpression, name: str) -> bool:
    return isinstance(func, cst.Name) and func.value == name and context.lookup(func) is None


def _target_names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


def _inside(context: Context, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    return any(a is container for a in context.ancestors(node))


def _enclosing_loops(context: Context, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The `for`/`while` statements around `node` within its own function, innermost first."""
    loops = []
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, _FUNCTION_SCOPES):
            break
        if isinstance(ancestor, _LOOPS):
            loops.append(ancestor)
    return loops


def _main_guarded(context: Context, node: cst.CSTNode) -> bool:
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, cst.If) and _is_main_test(ancestor.test):
            return True
    return False


def _is_main_test(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return bool(names and strings)


def _has_main_guard(module: cst.Module) -> bool:
    return any(isinstance(stmt, cst.If) and _is_main_test(stmt.test) for stmt in module.body)


# -- what a DataLoader(...) call says ------------------------------------------------------------


def _setting(context: Context, call: cst.Call, name: str, position: Optional[int]) -> object:
    """The literal value of a DataLoader argument: its default marker MISSING, a value, or UNKNOWN."""
    arg = argument(call, name, position)
    if arg is None:
        if has_star_kwargs(call) or has_star_args(call):
            return UNKNOWN
        if position is not None and len(positional(call)) > position:
            return UNKNOWN
        return _MISSING
    return context.literal(arg.value)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING = _Missing()

_CPU_COUNT = frozenset({"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count"})


def _positive_workers(context: Context, flow: "_Flow", expr: cst.BaseExpression) -> Optional[str]:
    """How `num_workers=expr` is surely > 0: "literal", "cpu", or "default" (an argparse default > 0), else None."""
    value = context.literal(expr)
    if value is not UNKNOWN:
        return "literal" if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
    if isinstance(expr, cst.Name):
        assigned = context.assigned_value(expr)
        return _positive_workers(context, flow, assigned) if assigned is not None else None
    if isinstance(expr, cst.Call):
        name = context.qualname(expr)
        if name in _CPU_COUNT and not expr.args:
            return "cpu"
        if _is_builtin(context, expr.func, "len") and len(expr.args) == 1:
            inner = expr.args[0].value
            if isinstance(inner, cst.Call) and context.qualname(inner) == "os.sched_getaffinity":
                return "cpu"
        if _is_builtin(context, expr.func, "int") and len(expr.args) == 1 and not expr.args[0].keyword:
            return _positive_workers(context, flow, expr.args[0].value)
        if _is_builtin(context, expr.func, "min") and len(expr.args) >= 2 and not has_star_args(expr):
            kinds = [_positive_workers(context, flow, a.value) for a in expr.args]
            return "cpu" if all(kinds) else None
        return None
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        # `os.cpu_count() or 1`
        kinds = [_positive_workers(context, flow, expr.left), _positive_workers(context, flow, expr.right)]
        return "cpu" if all(kinds) else None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        default = flow.argparse_default(expr.attr.value)
        if isinstance(default, int) and not isinstance(default, bool) and default > 0:
            return "default"
    return None


# -- where batches go ----------------------------------------------------------------------------

_TENSOR_VIEWS = frozenset({"items", "values"})
_SAME_TENSOR = frozenset({"float", "long", "half", "double", "int", "bool", "contiguous", "bfloat16"})
_DEVICE_WORDS = ("device", "cuda", "gpu", "rank")
_TQDM = frozenset({"tqdm", "track"})
_MOVE_HELPERS = ("to_device", "to_cuda", "to_gpu", "move_to")
# Calls on a tensor that return (a view of) the same storage: `buf.resize_(x.size()).copy_(x)`.
_BUFFER_VIEWS = frozenset({"resize_", "resize_as_", "view", "view_as", "narrow", "reshape", "squeeze", "unsqueeze"})


def _root(expr: cst.BaseExpression, *, conversions: bool) -> Optional[str]:
    """The name an expression is a view of: `batch`, `batch[0]`, `batch["x"]`, `batch.x` -> "batch".

    With `conversions`, also through `.float()`-style calls (they return the same tensor when the dtype
    already matches) and `.items()`/`.values()`.
    """
    while True:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
            continue
        if (
            conversions
            and isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in (_SAME_TENSOR | _TENSOR_VIEWS)
        ):
            expr = expr.func.value
            continue
        if isinstance(expr, cst.Call) and last_name(expr.func) == "Variable" and expr.args:
            expr = expr.args[0].value  # `Variable(images).cuda()` in older scripts
            continue
        return None


def _is_transfer(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda")


class _Flow:
    """Per-file facts about DataLoaders and the loops that consume them (built once, shared by the rules)."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.loaders: list[cst.Call] = []
        self.fors: list[cst.For] = []
        self.calls_by_name: dict[str, list[cst.Call]] = {}
        self.self_assigns: dict[tuple[int, str], list[cst.BaseExpression]] = {}
        self._argparse: dict[str, list[cst.Call]] = {}
        self._memo: dict[int, Optional[frozenset]] = {}
        self._active: set[int] = set()
        self._loops_memo: dict[int, list[tuple[cst.For, cst.BaseExpression]]] = {}
        self._transfers_memo: dict[int, list[cst.Call]] = {}
        self.getitem_moves: Optional[bool] = None
        self._names: Optional[dict[str, list[cst.Name]]] = None
        for node in descendants(context.module):
            if isinstance(node, cst.Call):
                name = last_name(node.func)
                if name is None:
                    continue
                if is_dataloader(context, node):
                    self.loaders.append(node)
                elif name == "add_argument":
                    self._add_argument(node)
                self.calls_by_name.setdefault(name, []).append(node)
            elif isinstance(node, cst.For):
                self.fors.append(node)
            elif isinstance(node, cst.Assign) and len(node.targets) == 1:
                target = node.targets[0].target
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
                    cls = context.enclosing(node, cst.ClassDef)
                    if cls is not None:
                        self.self_assigns.setdefault((id(cls), target.attr.value), []).append(node.value)

    # -- argparse defaults: `parser.add_argument("--workers", default=4)` -> args.workers is 4 by default
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

    # -- which DataLoader(...) calls an expression can be ------------------------------------------
    def loaders_of(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> Optional[frozenset]:
        """The DataLoader(...) calls `expr` evaluates to, or None when that is not certain."""
        if expr is None or depth > 6:
            return None
        key = id(expr)
        if key in self._memo:
            return self._memo[key]
        if key in self._active:
            return None
        self._active.add(key)
        try:
            found = self._loaders_of(expr, depth)
        finally:
            self._active.discard(key)
        self._memo[key] = found
        return found

    def _loaders_of(self, expr: cst.BaseExpression, depth: int) -> Optional[frozenset]:
        context = self.context
        if isinstance(expr, cst.Call):
            if is_dataloader(context, expr):
                return frozenset([expr])
            name = last_name(expr.func)
            if name in _TQDM and (context.qualname(expr) or "").startswith(("tqdm", "rich")) and expr.args:
                return self.loaders_of(expr.args[0].value, depth + 1)
            function = self.function_called(expr)
            if function is not None:
                return self._union(r.value for r in _returns(function))
            return None
        if isinstance(expr, cst.IfExp):
            return self._union([expr.body, expr.orelse], depth)
        if isinstance(expr, cst.Name):
            bindings = context.lookup(expr)
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
            return _strict_union(parts)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = context.enclosing(expr, cst.ClassDef)
            values = self.self_assigns.get((id(cls), expr.attr.value)) if cls is not None else None
            if not values:
                return None
            return self._union(values, depth)
        if isinstance(expr, cst.Subscript):
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
                values = self._param_args(bindings[0].node)
                return None if values is None else self._all_elements(values, depth)
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
        return None

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
        return _strict_union(parts) if parts else None

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
            values = [_element(assign.value, index, size)]
        elif isinstance(assign.value, cst.Call):
            function = self.function_called(assign.value)
            if function is None:
                return None
            returns = list(_returns(function))
            if not returns:
                return None
            for ret in returns:
                value = ret.value
                if isinstance(value, cst.Name):
                    assigned = self.context.assigned_value(value)
                    value = assigned if isinstance(assigned, (cst.Tuple, cst.List)) else value
                if not isinstance(value, (cst.Tuple, cst.List)):
                    return None
                values.append(_element(value, index, size))
        else:
            return None
        return self._union(values, depth)

    def function_called(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The FunctionDef a call runs, when it is a function or a `self.` method defined in this file."""
        func = call.func
        if isinstance(func, cst.Name):
            bindings = self.context.lookup(func)
            if bindings and len(bindings) == 1 and isinstance(bindings[0].node, cst.FunctionDef):
                return bindings[0].node
            return None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = self.context.enclosing(call, cst.ClassDef)
            if cls is not None:
                return _method(cls, func.attr.value)
        return None

    def call_sites(self, function: cst.FunctionDef) -> list[cst.Call]:
        if function.name.value == "__init__":
            cls = self.context.enclosing(function, cst.ClassDef)
            if isinstance(cls, cst.ClassDef):
                return [c for c in self.calls_by_name.get(cls.name.value, ()) if self._constructs(c, cls)]
        return [c for c in self.calls_by_name.get(function.name.value, ()) if self.function_called(c) is function]

    def _constructs(self, call: cst.Call, cls: cst.ClassDef) -> bool:
        if not isinstance(call.func, cst.Name):
            return False
        bindings = self.context.lookup(call.func)
        return bool(bindings) and len(bindings) == 1 and bindings[0].node is cls

    def _param_loaders(self, param: cst.CSTNode, depth: int) -> Optional[frozenset]:
        values = self._param_args(param)
        return None if values is None else self._union(values, depth)

    def _param_args(self, param: cst.CSTNode) -> Optional[list[cst.BaseExpression]]:
        """The arguments every call site of this file passes for a parameter, or None."""
        if not isinstance(param, cst.Param):
            return None
        function = self.context.enclosing(param, cst.FunctionDef)
        if not isinstance(function, cst.FunctionDef):
            return None
        ordered = [*function.params.posonly_params, *function.params.params]
        is_method = self.context.enclosing(function, cst.ClassDef) is not None and not _is_static(function)
        if param in ordered:
            position: Optional[int] = ordered.index(param) - (1 if is_method else 0)
        elif param in function.params.kwonly_params:
            position = None
        else:
            return None
        sites = self.call_sites(function)
        if not sites:
            return None
        values = []
        for site in sites:
            arg = argument(site, param.name.value, position if position is not None and position >= 0 else None)
            if arg is None:
                return None
            values.append(arg.value)
        return values

    # -- DataLoader settings that arrive through `**kwargs` -----------------------------------------
    def setting_options(self, call: cst.Call, name: str, position: Optional[int]) -> Optional[frozenset]:
        """Every value a DataLoader setting may take (`_MISSING` for the default), or None when undecidable.

        Follows `**kw` where `kw` is a dict literal (or `dict(...)`, or a conditional choice of them) in the
        same file, changed only by `kw.update(<dict>)`, `kw.update(key=...)` and `kw["key"] = ...`.
        """
        arg = argument(call, name, position)
        if arg is not None:
            return frozenset([self.context.literal(arg.value)])
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
            options = facts.get(name, frozenset([_MISSING]))
            present |= options - {_MISSING}
            always_missing = always_missing and _MISSING in options
        return frozenset(present | ({_MISSING} if always_missing else set()))

    def dict_facts(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[dict[str, frozenset]]:
        """key -> the values it may hold (`_MISSING` where it may be absent); keys not listed are absent."""
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
                facts[key] = frozenset([context.literal(element.value)])
            return facts
        if isinstance(expr, cst.Call) and _is_builtin(context, expr.func, "dict"):
            facts = {}
            for given in expr.args:
                if given.keyword is not None and not given.star:
                    facts[given.keyword.value] = frozenset([context.literal(given.value)])
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
        if not bindings or any(b.kind != "assign" or b.value is None for b in bindings):
            return None
        facts: Optional[dict[str, frozenset]] = None
        for binding in bindings:
            one = self.dict_facts(binding.value, depth + 1)  # type: ignore[arg-type]
            if one is None:
                return None
            facts = one if facts is None else _either(facts, one)
        assert facts is not None
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

    def _dict_change(self, use: cst.Name, depth: int) -> Optional[dict[str, frozenset]]:
        """What one use of a dict variable may add to it: {} for a read, None for anything not understood."""
        context = self.context
        parent = context.parent(use)
        if isinstance(parent, cst.AssignTarget) and parent.target is use:
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

    def _uses(self, name: str) -> list[cst.Name]:
        if self._names is None:
            self._names = {}
            for node in descendants(self.context.module):
                if isinstance(node, cst.Name):
                    self._names.setdefault(node.value, []).append(node)
        return self._names.get(name, [])

    # -- loops over loaders and what they do with the batches -------------------------------------
    def loops_over(self, loader: cst.Call) -> list[tuple[cst.For, cst.BaseExpression]]:
        """(for-loop, the part of its target that holds the batch) for each loop iterating `loader`."""
        if not self._loops_memo:
            self._loops_memo[-1] = []
            for loop in self.fors:
                for source, target in _match_iteration(self.context, loop.iter, loop.target):
                    for found in self.loaders_of(source) or ():
                        self._loops_memo.setdefault(id(found), []).append((loop, target))
        return self._loops_memo.get(id(loader), [])

    def transfers(self, loop: cst.For, target: cst.BaseExpression) -> list[cst.Call]:
        """`.to(device)` / `.cuda()` calls in the loop body on the batch (or parts of it)."""
        key = id(target)
        if key not in self._transfers_memo:
            self._transfers_memo[key] = self._find_transfers(loop, target)
        return self._transfers_memo[key]

    def _find_transfers(self, loop: cst.For, target: cst.BaseExpression) -> list[cst.Call]:
        batch = set(_target_names(target))
        if not batch:
            return []
        body = list(descendants(loop.body))
        # Names that hold (views of) the batch: `x, y = batch`, `x = batch["x"]`, `for k, v in batch.items()`.
        for _ in range(3):
            before = len(batch)
            for node in body:
                if isinstance(node, cst.Assign) and _root(node.value, conversions=False) in batch:
                    for t in node.targets:
                        batch.update(_target_names(t.target))
                elif isinstance(node, cst.Assign) and isinstance(node.value, (cst.Tuple, cst.List)):
                    for t in node.targets:
                        if isinstance(t.target, (cst.Tuple, cst.List)) and len(t.target.elements) == len(node.value.elements):
                            for left, right in zip(t.target.elements, node.value.elements):
                                if _root(right.value, conversions=False) in batch:
                                    batch.update(_target_names(left.value))
                elif isinstance(node, cst.CompFor) and _root(node.iter, conversions=True) in batch:
                    batch.update(_target_names(node.target))
            if len(batch) == before:
                break
        found = []
        for node in body:
            if not isinstance(node, cst.Call):
                continue
            if _is_transfer(node):
                if _root(node.func.value, conversions=True) in batch and self.to_accelerator(node):  # type: ignore[attr-defined]
                    found.append(node)
            elif self._helper_transfer(node, batch) or self._cast_transfer(node, batch) or self._copy_transfer(node, batch):
                found.append(node)
        return found

    def _cast_transfer(self, call: cst.Call, batch: set[str]) -> bool:
        """`batch["A"].type(Tensor)` where `Tensor` is, or may be, `torch.cuda.FloatTensor`."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "type"):
            return False
        if _root(func.value, conversions=True) not in batch:
            return False
        given = positional(call)
        arg = given[0] if given else keyword(call, "dtype")
        return arg is not None and self._cuda_tensor_type(arg.value, 0)

    def _cuda_tensor_type(self, expr: cst.BaseExpression, depth: int) -> bool:
        if depth > 4:
            return False
        value = self.context.literal(expr)
        if isinstance(value, str):
            return value.startswith("torch.cuda.") and value.endswith("Tensor")
        if isinstance(expr, cst.IfExp):
            return self._cuda_tensor_type(expr.body, depth + 1) or self._cuda_tensor_type(expr.orelse, depth + 1)
        name = self.context.qualname(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if name is not None:
            return name.startswith("torch.cuda.") and name.endswith("Tensor")
        if isinstance(expr, cst.Name):
            bindings = self.context.lookup(expr)
            if bindings and all(b.kind == "assign" and b.value is not None for b in bindings):
                return any(self._cuda_tensor_type(b.value, depth + 1) for b in bindings)  # type: ignore[arg-type]
        return False

    def _copy_transfer(self, call: cst.Call, batch: set[str]) -> bool:
        """`buffer.copy_(batch)` (or `buffer.data.resize_(...).copy_(batch)`) where `buffer` was moved to the GPU."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "copy_"):
            return False
        given = positional(call)
        if not given or _root(given[0].value, conversions=True) not in batch:
            return False
        receiver = func.value
        while True:
            if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
                receiver = receiver.value
            elif (
                isinstance(receiver, cst.Call)
                and isinstance(receiver.func, cst.Attribute)
                and receiver.func.attr.value in _BUFFER_VIEWS
            ):
                receiver = receiver.func.value
            else:
                break
        return isinstance(receiver, cst.Name) and receiver.value not in batch and self._cuda_buffer(receiver, 0)

    def _cuda_buffer(self, name: cst.Name, depth: int) -> bool:
        """Some binding of `name` is a tensor moved to (or made on) a device that may be CUDA."""
        if depth > 3:
            return False
        for binding in self.context.lookup(name) or ():
            value = binding.value
            if value is None and isinstance(binding.node, cst.Assign) and len(binding.node.targets) == 1:
                # `input, label = input.cuda(), label.cuda()`
                target, values = binding.node.targets[0].target, binding.node.value
                if isinstance(target, cst.Tuple) and isinstance(values, cst.Tuple):
                    for left, right in zip(target.elements, values.elements):
                        if isinstance(left.value, cst.Name) and left.value.value == name.value:
                            value = right.value
            if not isinstance(value, cst.Call):
                continue
            if _is_transfer(value) and self.to_accelerator(value):
                return True
            device = keyword(value, "device")
            if device is not None and (self.context.qualname(value) or "").startswith("torch.") and self._may_be_cuda(device.value, 0):
                return True
            if last_name(value.func) == "Variable" and value.args and isinstance(value.args[0].value, cst.Name):
                if self._cuda_buffer(value.args[0].value, depth + 1):
                    return True
        return False

    def _helper_transfer(self, call: cst.Call, batch: set[str]) -> bool:
        """`batch_to_device(batch, device)`, `move_to_device(batch, self.device)`: a helper that moves the batch."""
        name = (last_name(call.func) or "").lower()
        if not any(word in name for word in _MOVE_HELPERS):
            return False
        given = positional(call)
        if not given or _root(given[0].value, conversions=False) not in batch:
            return False
        device = keyword(call, "device") or (given[1] if len(given) > 1 else None)
        return device is not None and self._may_be_cuda(device.value, 0)

    def to_accelerator(self, call: cst.Call) -> bool:
        """`.cuda()`, or `.to(d)` where `d` is, or may be, a CUDA device (not a dtype, not "cpu")."""
        attr = call.func.attr.value  # type: ignore[attr-defined]
        if attr == "cuda":
            return True
        arg = keyword(call, "device")
        if arg is None:
            given = positional(call)
            if not given:
                return False
            arg = given[0]
        return self._may_be_cuda(arg.value, 0)

    def _may_be_cuda(self, expr: cst.BaseExpression, depth: int) -> bool:
        if depth > 4:
            return False
        context = self.context
        value = context.literal(expr)
        if isinstance(value, str):
            return value.startswith("cuda")
        if isinstance(value, int) and not isinstance(value, bool):
            return value >= 0  # a CUDA device index
        if value is not UNKNOWN:
            return False
        if isinstance(expr, cst.IfExp):
            return self._may_be_cuda(expr.body, depth + 1) or self._may_be_cuda(expr.orelse, depth + 1)
        if isinstance(expr, (cst.FormattedString, cst.ConcatenatedString)):
            return "cuda" in context.code(expr)
        if isinstance(expr, cst.Call):
            name = context.qualname(expr) or ""
            if name == "torch.device":
                return bool(expr.args) and self._may_be_cuda(expr.args[0].value, depth + 1)
            if name.startswith(("torch.cuda.", "torch.accelerator.")):
                return True
            last = (last_name(expr.func) or "").lower()
            return any(word in last for word in _DEVICE_WORDS)
        if isinstance(expr, cst.Name):
            if (context.qualname(expr) or "").startswith("torch."):
                return False  # torch.float16 and friends, imported by name
            bindings = context.lookup(expr)
            if bindings and all(b.kind == "assign" for b in bindings):
                return any(self._may_be_cuda(b.value, depth + 1) for b in bindings if b.value is not None)
            return any(word in expr.value.lower() for word in _DEVICE_WORDS)
        if isinstance(expr, cst.Attribute):
            name = context.qualname(expr) or ""
            if name.startswith("torch.") and "accelerator" not in name:
                return False  # torch.float32, torch.bfloat16, ...
            if any(word in expr.attr.value.lower() for word in _DEVICE_WORDS):
                return True
            # torch.accelerator.current_accelerator().type
            return expr.attr.value == "type" and "accelerator" in context.code(expr.value)
        return False


def _either(a: dict[str, frozenset], b: dict[str, frozenset]) -> dict[str, frozenset]:
    """The facts of a dict that is one of two dicts."""
    missing = frozenset([_MISSING])
    return {key: a.get(key, missing) | b.get(key, missing) for key in {**a, **b}}


def _merge_update(base: dict[str, frozenset], change: dict[str, frozenset]) -> dict[str, frozenset]:
    """The facts after `base.update(change)` surely runs."""
    out = dict(base)
    for key, values in change.items():
        kept = out.get(key, frozenset([_MISSING])) if _MISSING in values else frozenset()
        out[key] = (values - {_MISSING}) | kept
    return out


def _merge_maybe(base: dict[str, frozenset], change: dict[str, frozenset]) -> dict[str, frozenset]:
    """The facts after `base.update(change)` may or may not have run (a branch, or an order not followed)."""
    out = dict(base)
    for key, values in change.items():
        out[key] = out.get(key, frozenset([_MISSING])) | values
    return out


def _strict_union(parts: list[Optional[frozenset]]) -> Optional[frozenset]:
    if not parts or any(p is None for p in parts):
        return None
    out: frozenset = frozenset()
    for part in parts:
        out |= part  # type: ignore[operator]
    return out


def _element(value: cst.BaseExpression, index: int, size: int) -> Optional[cst.BaseExpression]:
    elements = value.elements  # type: ignore[attr-defined]
    if len(elements) != size or any(isinstance(e, cst.StarredElement) for e in elements):
        return None
    return elements[index].value


def _returns(function: cst.FunctionDef) -> Iterator[cst.Return]:
    """The `return` statements of a function (not of functions nested in it)."""
    stack: list[cst.CSTNode] = [function.body]
    from torchlint.lint.walk import semantic_children

    while stack:
        node = stack.pop()
        for child in semantic_children(node):
            if isinstance(child, cst.Return):
                yield child
            elif not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                stack.append(child)


def _method(cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    body = cls.body
    if isinstance(body, cst.IndentedBlock):
        for stmt in body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
                return stmt
    return None


def _is_static(function: cst.FunctionDef) -> bool:
    return any(last_name(d.decorator) == "staticmethod" for d in function.decorators)


def _match_iteration(
    context: Context, iterable: cst.BaseExpression, target: cst.BaseExpression
) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """Pair what a loop iterates with the part of its target each item lands in.

    `for i, (x, y) in enumerate(loader)` -> [(loader, (x, y))]; `for a, b in zip(l1, l2)` -> [(l1, a), (l2, b)];
    `tqdm(loader)` is looked through.
    """
    if isinstance(iterable, cst.Call) and iterable.args and not has_star_args(iterable):
        func = iterable.func
        if _is_builtin(context, func, "enumerate"):
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                return _match_iteration(context, iterable.args[0].value, target.elements[1].value)
            return []
        if _is_builtin(context, func, "zip"):
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(iterable.args):
                pairs = []
                for arg, element in zip(iterable.args, target.elements):
                    pairs.extend(_match_iteration(context, arg.value, element.value))
                return pairs
            return []
        if last_name(func) in _TQDM and (context.qualname(iterable) or "").startswith(("tqdm", "rich")):
            return _match_iteration(context, iterable.args[0].value, target)
    return [(iterable, target)]


def flow(context: Context) -> _Flow:
    """The shared loader analysis of this file (call it from `leave_Module`, when every parent is known)."""
    return context.shared(_Flow)


def _set_argument(call: cst.Call, name: str, value: str, position: Optional[int] = None) -> cst.Call:
    """`call` with parameter `name` set to `value`: in place when passed by position, else as a keyword."""
    if keyword(call, name) is None and position is not None:
        given = positional(call)
        if position < len(given):
            target = given[position]
            expression = cst.parse_expression(value)
            return call.with_changes(args=[a.with_changes(value=expression) if a is target else a for a in call.args])
    return with_keyword(call, name, value)


def _with_keyword_fix(
    context: Context,
    call: cst.Call,
    name: str,
    value: str,
    description: str,
    *,
    position: Optional[int] = None,
    safe: bool = True,
) -> Optional[Fix]:
    return Fix(description, [Replace(call, _set_argument(call, name, value, position))], safe=safe)


def _snippet(context: Context, node: cst.CSTNode, limit: int = 40) -> str:
    text = " ".join(context.code(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- TL101 ---------------------------------------------------------------------------------------

_TENSOR_FACTORIES = frozenset(
    {
        "tensor", "as_tensor", "from_numpy", "randn", "rand", "randint", "zeros", "ones", "arange", "stack", "cat",
        "linspace", "load", "array", "asarray", "concatenate",
    }
)


def in_memory_loader(context: Context, call: cst.Call) -> bool:
    """A DataLoader over data already in memory as tensors (or a list), batched by the default collate."""
    collate = argument(call, "collate_fn", position=_COLLATE_AT)
    if collate is not None and not (isinstance(collate.value, cst.Name) and collate.value.value == "None"):
        return False
    dataset = argument(call, "dataset", position=0)
    return dataset is not None and _in_memory_dataset(context, dataset.value, 0)


def _in_memory_dataset(context: Context, expr: Optional[cst.BaseExpression], depth: int) -> bool:
    if expr is None or depth > 5:
        return False
    if isinstance(expr, (cst.List, cst.ListComp, cst.Tuple)):
        return True
    if isinstance(expr, cst.Subscript):
        return _in_memory_dataset(context, expr.value, depth + 1)  # `data[:n_train]` of a tensor or list
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Multiply)):
        # `[item] * 100`, `train_items + extra_items`
        return isinstance(expr.left, (cst.List, cst.ListComp)) or isinstance(expr.right, (cst.List, cst.ListComp))
    if isinstance(expr, cst.Call):
        name = context.qualname(expr) or ""
        if name == "torch.utils.data.TensorDataset":
            return True
        if name == "torch.utils.data.Subset" and expr.args:
            return _in_memory_dataset(context, expr.args[0].value, depth + 1)
        if name.startswith(("torch.", "numpy.")) and name.rsplit(".", 1)[-1] in _TENSOR_FACTORIES:
            return True
        if _is_builtin(context, expr.func, "list") or _is_builtin(context, expr.func, "tuple"):
            return len(expr.args) == 1 and _in_memory_items(context, expr.args[0].value, depth)
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("clone", "float", "long", "to", "cuda"):
            return _in_memory_dataset(context, expr.func.value, depth + 1)  # a tensor, converted
        if isinstance(expr.func, cst.Name):
            bindings = context.lookup(expr.func)
            if bindings and len(bindings) == 1 and isinstance(bindings[0].node, cst.ClassDef):
                return _indexes_memory(bindings[0].node)
        function = flow(context).function_called(expr)
        if function is not None:
            # `train_data = get_data(root)` where get_data builds and returns a list of ready samples
            values = [r.value for r in _returns(function)]
            return bool(values) and all(_in_memory_dataset(context, v, depth + 1) for v in values)
        return False
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr)
        if not bindings or len(bindings) != 1:
            return False
        binding = bindings[0]
        if binding.kind == "assign" and binding.value is not None:
            return _in_memory_dataset(context, binding.value, depth + 1)
        node = binding.node
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            # `train_ds, val_ds = random_split(TensorDataset(x, y), [0.8, 0.2])`
            if context.qualname(node.value) == "torch.utils.data.random_split" and node.value.args:
                return _in_memory_dataset(context, node.value.args[0].value, depth + 1)
    return False


def _indexes_memory(cls: cst.ClassDef) -> bool:
    """A Dataset class of this file whose `__getitem__` only indexes tensors it already holds.

    `return self.features[idx].float(), self.labels[idx]`: the data was loaded in `__init__`, and an item
    costs an index, nothing a worker process could take over.
    """
    getitem = _method(cls, "__getitem__")
    if getitem is None or not isinstance(getitem.body, cst.IndentedBlock):
        return False
    statements = list(getitem.body.body)
    if statements and _is_docstring(statements[0]):
        statements = statements[1:]
    if len(statements) != 1 or not isinstance(statements[0], cst.SimpleStatementLine):
        return False
    small = statements[0].body
    if len(small) != 1 or not isinstance(small[0], cst.Return) or small[0].value is None:
        return False
    value = small[0].value
    parts = [e.value for e in value.elements] if isinstance(value, (cst.Tuple, cst.List)) else [value]
    return all(_indexes_self(part) for part in parts)


def _indexes_self(expr: cst.BaseExpression) -> bool:
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SAME_TENSOR:
        expr = expr.func.value
    return (
        isinstance(expr, cst.Subscript)
        and isinstance(expr.value, cst.Attribute)
        and isinstance(expr.value.value, cst.Name)
        and expr.value.value.value == "self"
    )


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _in_memory_items(context: Context, expr: cst.BaseExpression, depth: int) -> bool:
    """`list(zip(x, y))` over tensors or lists."""
    if isinstance(expr, cst.Call) and _is_builtin(context, expr.func, "zip"):
        return bool(expr.args) and all(_in_memory_dataset(context, a.value, depth + 1) for a in expr.args)
    return _in_memory_dataset(context, expr, depth + 1)


# -- Hugging Face `datasets` prepared ahead of time -----------------------------------------------

# Dataset methods that keep what a (prepared) `datasets.Dataset` holds: their result is prepared too.
_HF_KEEPS = frozenset(
    {"select", "shuffle", "filter", "remove_columns", "rename_column", "rename_columns", "select_columns", "sort",
     "shard", "flatten", "train_test_split"}
)
_HF_FORMATS = frozenset({"torch", "pt", "numpy", "np"})
# Signs that items are still decoded or transformed when read: a lazy transform, a stream, image, audio or
# video features (decoded on every access), or columns named after them.
_HF_LAZY = re.compile(
    r"streaming\s*=\s*True|set_transform|with_transform|cast_column|\b(Image|Audio|Video)\s*\(|"
    r"(image|audio|video)folder|pixel_values|input_values|[\"'](image|img|audio|video|pixels?)s?[\"']",
    re.IGNORECASE,
)


def prepared_hf_loader(context: Context, call: cst.Call) -> bool:
    """A DataLoader over a Hugging Face dataset tokenized ahead of time, batched by the default collate.

    `ds = ds.map(tokenize, batched=True)` runs the tokenizer once, eagerly, and stores the result in Arrow
    tables; with `set_format("torch")` / `with_format("torch")` an item is a row lookup turned into tensors,
    nothing a worker process could take over. Not when the file shows items that are still decoded or
    transformed when read (images, audio, `set_transform`, a streamed dataset).
    """
    collate = argument(call, "collate_fn", position=_COLLATE_AT)
    if collate is not None and not (isinstance(collate.value, cst.Name) and collate.value.value == "None"):
        return False
    dataset = argument(call, "dataset", position=0)
    if dataset is None or _HF_LAZY.search(context.source.text):
        return False
    return _hf_prepared(context, dataset.value, 0)


def _hf_format(context: Context, call: cst.Call) -> bool:
    """`with_format("torch")`, `set_format(type="torch", columns=[...])`."""
    arg = argument(call, "type", position=0)
    return arg is not None and context.literal(arg.value) in _HF_FORMATS


def _hf_prepared(context: Context, expr: Optional[cst.BaseExpression], depth: int) -> bool:
    if expr is None or depth > 6:
        return False
    if isinstance(expr, cst.Subscript):
        return _hf_prepared(context, expr.value, depth + 1)  # `tokenized["train"]`
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            if attr == "map":
                batched = keyword(expr, "batched")
                return batched is not None and context.literal(batched.value) is True
            if attr == "with_format":
                return _hf_format(context, expr) or _hf_prepared(context, func.value, depth + 1)
            if attr in _HF_KEEPS:
                return _hf_prepared(context, func.value, depth + 1)
        function = flow(context).function_called(expr)
        if function is not None:
            values = [r.value for r in _returns(function)]
            return bool(values) and all(_hf_prepared(context, v, depth + 1) for v in values)
        return False
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr)
        if not bindings:
            return False
        found = False
        for binding in bindings:
            node = binding.node
            if binding.kind == "assign" and binding.value is not None:
                found = found or _hf_prepared(context, binding.value, depth + 1)
            elif isinstance(node, cst.Assign) and binding.kind == "other":
                value = _unpacked_value(context, node, expr.value)
                found = found or (value is not None and _hf_prepared(context, value, depth + 1))
            else:
                return False  # a parameter, a loop variable, an import: not followed
        return found or _set_format_on(context, expr)
    return False


def _unpacked_value(context: Context, assign: cst.Assign, name: str) -> Optional[cst.BaseExpression]:
    """`a, b, c = prepare(...)` where `prepare` returns `x, y, z`: the expression bound to `name`."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, (cst.Tuple, cst.List)):
        return None
    target = assign.targets[0].target
    if any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    index = next(
        (i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name), None
    )
    if index is None or not isinstance(assign.value, cst.Call):
        return None
    function = flow(context).function_called(assign.value)
    returns = list(_returns(function)) if function is not None else []
    if len(returns) != 1 or not isinstance(returns[0].value, (cst.Tuple, cst.List)):
        return None
    return _element(returns[0].value, index, len(target.elements))


def _set_format_on(context: Context, name: cst.Name) -> bool:
    """`name.set_format("torch")` in the scope that binds `name`."""
    scope = context.enclosing(name, cst.FunctionDef) or context.module
    for use in flow(context)._uses(name.value):
        attribute = context.parent(use)
        if not (isinstance(attribute, cst.Attribute) and attribute.value is use and attribute.attr.value == "set_format"):
            continue
        call = context.parent(attribute)
        if isinstance(call, cst.Call) and call.func is attribute and _hf_format(context, call):
            if (context.enclosing(call, cst.FunctionDef) or context.module) is scope:
                return True
    return False


# -- a Dataset that already lives on the accelerator ---------------------------------------------


def dataset_given_device(context: Context, call: cst.Call) -> bool:
    """The loader's dataset was built by a call that receives a (CUDA) device: `MyDataset(x, y, device)`.

    Its items are, or may be, GPU tensors: worker processes cannot create them (CUDA does not start in a
    forked worker) and have no decoding to take over.
    """
    dataset = argument(call, "dataset", position=0)
    return dataset is not None and _built_with_device(context, dataset.value, 0)


def _built_with_device(context: Context, expr: Optional[cst.BaseExpression], depth: int) -> bool:
    if expr is None or depth > 5:
        return False
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr)
        if not bindings or len(bindings) != 1:
            return False
        binding = bindings[0]
        if binding.kind == "assign":
            return _built_with_device(context, binding.value, depth + 1)
        node = binding.node
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and node.value.args:
            # `train_ds, val_ds = random_split(dataset, [n_train, n_val])`
            if context.qualname(node.value) == "torch.utils.data.random_split":
                return _built_with_device(context, node.value.args[0].value, depth + 1)
        return False
    if not isinstance(expr, cst.Call):
        return False
    name = context.qualname(expr) or ""
    if name == "torch.utils.data.Subset" and expr.args:
        return _built_with_device(context, expr.args[0].value, depth + 1)
    if name.startswith("torch.") or is_dataloader(context, expr):
        return False  # TensorDataset and friends: TL102's business, and in memory anyway
    data = flow(context)
    for arg in expr.args:
        value = arg.value
        if arg.keyword is not None and arg.keyword.value == "device":
            if context.literal(value) is not None and data._may_be_cuda(value, 0):
                return True
            continue
        if isinstance(value, cst.Call):
            if context.qualname(value) == "torch.device" and data._may_be_cuda(value, 0):
                return True
            if _is_transfer(value) and data.to_accelerator(value):
                return True  # tensors moved to the GPU before the Dataset wraps them
        elif isinstance(value, (cst.Name, cst.Attribute)):
            last = last_name(value) or ""
            if "device" in last.lower() and data._may_be_cuda(value, 0):
                return True
    return False


# Words of a comment (on the line above) that explains a single-process loader.
_REASON = re.compile(
    r"worker|process|pickl|fork|spawn|windows|mac|compat|debug|deadlock|hang|freez|shm|shared.memory|hdf5|"
    r"h5py|lmdb|single|main thread",
    re.IGNORECASE,
)
# Code that reads names by their spelling.
_DYNAMIC_NAMES = re.compile(r"\b(locals|globals|vars|eval|exec)\s*\(")
# Comments that are tool directives, not explanations.
_PRAGMA = re.compile(r"(noqa|type:|pragma|pylint:|fmt:|torchlint:|expect:)", re.IGNORECASE)


class DataLoaderNumWorkersZero(Rule):
    code = "TL101"
    name = "dataloader-num-workers-zero"
    family = "Data loading"
    summary = "`DataLoader` that loads and collates every batch in the training process (`num_workers` missing or 0)."
    message = (
        "DataLoader loads every batch in the training process (num_workers=0): set num_workers to the CPU "
        "cores you can spare, e.g. num_workers=min(8, os.cpu_count() or 1)"
    )
    explanation = (
        "With `num_workers=0` every batch is read, decoded, augmented and collated in the training process, "
        "between optimizer steps: the accelerator idles while the CPU works, and only one core does the work. "
        "Worker processes prepare the next batches while the current one trains, so loading is hidden behind "
        "compute up to the point where the workers cannot keep up.\n\n"
        "Measured on a 2-core CPU (torch 2.13, Linux): a dataset doing about 5 ms of CPU work per sample, "
        "batches of 32, and a 60 ms accelerator step (the host idle meanwhile) took 4.38 s per 16-batch epoch "
        "with `num_workers=0` and 2.80 s with `num_workers=2` (1.6x); with more cores the gap grows, up to "
        "the point where loading hides entirely behind compute. PyTorch's own profiler flags the same "
        "pattern (\"Synchronized DataLoader Pattern\") and its performance tuning guide recommends "
        "`num_workers > 0`."
    )
    bad = (
        "from torch.utils.data import DataLoader\n\n"
        "loader = DataLoader(dataset, batch_size=64, shuffle=True)\n"
    )
    good = (
        "import os\n\nfrom torch.utils.data import DataLoader\n\n"
        "loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=min(8, os.cpu_count() or 1))\n"
    )
    false_positives = (
        "Not reported: a `num_workers` that comes through `**kwargs` or from a value the linter cannot decide "
        "(`args.workers`, a config entry, `os.cpu_count()`); a loader over data already in memory with no "
        "per-item work (a `TensorDataset`, a tensor or NumPy array or a slice of one, a list, a list built "
        "and returned by a function of the same file, or a Dataset class of the file whose `__getitem__` only "
        "indexes tensors it holds) and the default `collate_fn`, where worker "
        "processes only add inter-process copies (measured on a 2-core CPU: an epoch over an "
        "in-memory `TensorDataset` took 0.50 s with 2 workers against 0.13 s without); a Hugging Face `datasets` "
        "dataset tokenized ahead of time (`.map(tokenize, batched=True)`, or `set_format(\"torch\")` / "
        "`with_format(\"torch\")`), where an item is a row lookup in Arrow tables, unless the file shows items "
        "still decoded on read (image, audio or video columns, `set_transform`, `streaming=True`); a dataset "
        "built by a call that receives a CUDA device (`MyDataset(x, y, device)`, `device=device`): its items "
        "live on the GPU, which worker processes cannot reach; a loader read only once, by `next(iter(loader))` outside any loop (one batch to look at); "
        "a loader bound to a name that appears nowhere else in the file (in a function, or in a program "
        "that iterates a loader or trains): it is never used; "
        "a script that iterates the loader (or trains) and shows no sign of a GPU or other accelerator (no "
        "`.cuda()`, `.to(`, `device`, ...): a CPU-only program, where workers would compete with the "
        "training threads for the same cores; "
        "test modules; an explicit `num_workers=0` with a comment on "
        "its line, or a comment about workers, processes or the platform on the line above (a deliberate choice: an unpicklable dataset, an "
        "environment that cannot start processes). Silence other deliberate choices with `# noqa: TL101`."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Sets `num_workers=min(8, os.cpu_count() or 1)` and adds `import os`. Unsafe: worker processes need a "
        "picklable dataset and `collate_fn`, each worker holds its own copy of the dataset (and its own random "
        "state), and on Windows and macOS workers re-import the script, so its training code must sit under "
        "`if __name__ == \"__main__\":` (the message says so for a script without that guard)."
    )
    requires = ("DataLoader",)

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.candidates: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader(self.context, node):
            return
        if has_star_kwargs(node) or is_test_file(self.context.source.path, self.context.source.text):
            return
        arg = argument(node, "num_workers", position=_NUM_WORKERS_AT)
        if arg is None and len(positional(node)) > _NUM_WORKERS_AT:
            return  # passed positionally through *args
        if arg is not None and (self.context.literal(arg.value) != 0 or self._explained(arg)):
            return  # a non-zero value, one that cannot be decided, or a commented choice
        self.candidates.append(node)

    def leave_Module(self, module: cst.Module) -> None:
        if not self.candidates:
            return
        cpu_only = not uses_accelerator(self.context.source.text)
        # Decided once every parent is known: what the dataset is, and how the loader is used later.
        for node in self.candidates:
            if in_memory_loader(self.context, node) or self._one_batch_only(node) or self._never_read(node):
                continue
            if prepared_hf_loader(self.context, node) or dataset_given_device(self.context, node):
                continue
            if cpu_only and self._consumed_here(node):
                continue  # a CPU-only program: workers would compete with the training threads for the cores
            self._report(node)

    def _consumed_here(self, node: cst.Call) -> bool:
        """This file iterates the loader or trains: the whole program is here, not only its data module."""
        if flow(self.context).loops_over(node):
            return True
        return ".backward(" in self.context.source.text

    def _report(self, node: cst.Call) -> None:
        message = None
        if self._unguarded_script(node):
            message = self.message + "; on Windows and macOS workers also need the script's code under `if __name__ == \"__main__\":`"
        self.report(node, message=message, fix=self._fix(node))

    def _fix(self, node: cst.Call) -> Optional[Fix]:
        value = "min(8, os.cpu_count() or 1)"
        change = Replace(node, _set_argument(node, "num_workers", value, _NUM_WORKERS_AT))
        return Fix(f"Set num_workers={value}", [change], safe=False, imports=("os",))

    def _explained(self, arg: cst.Arg) -> bool:
        """`num_workers=0,  # the HDF5 handle cannot be pickled` (or a comment about workers just above)."""
        statement = self.context.enclosing_statement(arg)
        if statement is None:
            return False
        lines = self.context.code(statement).splitlines()
        for index, line in enumerate(lines):
            at = line.find("num_workers")
            if at < 0:
                continue
            same_line = line[at:].partition("#")[2].strip()
            if same_line and not _PRAGMA.match(same_line):
                return True  # any note next to an explicit 0 says it was chosen
            previous = lines[index - 1].strip() if index > 0 else ""
            if previous.startswith("#") and _REASON.search(previous):
                return True
        return False

    def _one_batch_only(self, call: cst.Call) -> bool:
        """`sample = DataLoader(ds, batch_size=16)` read only by `next(iter(sample))`: one batch, to look at."""
        parent = self.context.parent(call)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
            return False
        name = parent.targets[0].target.value
        scope = self.context.enclosing(call, cst.FunctionDef) or self.context.module
        uses = 0
        for node in descendants(scope):
            if not (isinstance(node, cst.Name) and node.value == name) or node is parent.targets[0].target:
                continue
            inner = self.context.parent(node)
            outer = self.context.parent(inner) if isinstance(inner, cst.Arg) else None
            call_iter = self.context.parent(outer) if isinstance(outer, cst.Call) else None
            next_arg = self.context.parent(call_iter) if isinstance(call_iter, cst.Arg) else None
            if not (
                isinstance(outer, cst.Call)
                and _is_builtin(self.context, outer.func, "iter")
                and isinstance(next_arg, cst.Call)
                and _is_builtin(self.context, next_arg.func, "next")
                and not _enclosing_loops(self.context, next_arg)
            ):
                return False
            uses += 1
        return uses > 0

    def _never_read(self, call: cst.Call) -> bool:
        """`test_loader = DataLoader(...)` and the name is never read again: nothing to speed up.

        Only a plain name, mentioned nowhere else in the file (not even in a string or a comment); at
        module level only in a program (it iterates a loader or trains), not a module others import from.
        """
        parent = self.context.parent(call)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
        elif isinstance(parent, cst.AnnAssign) and parent.value is call:
            target = parent.target
        else:
            return False
        if not isinstance(target, cst.Name):
            return False
        text = self.context.source.text
        if _DYNAMIC_NAMES.search(text) or len(re.findall(rf"\b{re.escape(target.value)}\b", text)) != 1:
            return False
        if self.context.enclosing(call, cst.FunctionDef, cst.ClassDef) is not None:
            return True
        data = flow(self.context)
        return ".backward(" in text or any(data.loops_over(loader) for loader in data.loaders)

    def _unguarded_script(self, call: cst.Call) -> bool:
        if self.context.source.is_notebook:
            return False
        if self.context.enclosing(call, cst.FunctionDef, cst.ClassDef) is not None:
            return False
        return not _main_guarded(self.context, call) and not _has_main_guard(self.context.module)


# -- TL102 ---------------------------------------------------------------------------------------


class DataLoaderWithoutPinMemory(Rule):
    code = "TL102"
    name = "dataloader-without-pin-memory"
    family = "Data loading"
    summary = "`DataLoader` without `pin_memory=True` whose batches the same file copies to the GPU."
    message = (
        "Batches of this DataLoader are copied to the GPU from pageable memory: set pin_memory=True so the copy "
        "runs by DMA from page-locked memory (and can overlap compute with non_blocking=True)"
    )
    explanation = (
        "A host-to-device copy from ordinary (pageable) memory is staged by the CUDA driver through a "
        "page-locked buffer, one chunk at a time, and blocks the host until it is done. With "
        "`pin_memory=True` the DataLoader puts each batch in page-locked memory (in a background thread when "
        "it has workers), so `.to(device)` is a single DMA transfer at full bus speed, and with "
        "`non_blocking=True` it overlaps the step that is running. PyTorch's CUDA notes put it plainly: host-to-GPU copies are "
        "much faster when they originate from pinned memory; its performance tuning guide recommends "
        "`pin_memory=True` for loaders that feed a GPU.\n\n"
        "The rule follows the loader to the loops that iterate it (by name, through `self.` attributes, "
        "helper functions that return it, functions of the same file it is passed to, and dicts or lists of "
        "loaders read as `dataloaders[phase]`) and reports it only when a batch from such a loop is moved with "
        "`.cuda()` or `.to(device)` where `device` is, or may be, a CUDA device, cast with "
        "`.type(torch.cuda.FloatTensor)` (or a name bound to it), or copied with `buffer.copy_(batch)` into a "
        "tensor moved to the GPU. Settings passed as `**kwargs` are read when `kwargs` is a dict literal of the "
        "same file changed only by `kwargs.update(...)` or `kwargs[\"key\"] = ...`. It looks only at loaders with worker processes: without workers the DataLoader pins "
        "each batch on the main thread, one more copy in series with loading, and PyTorch's guide to "
        "`pin_memory` and `non_blocking` measures an explicit `pin_memory()` followed by a non-blocking copy "
        "at up to twice the time of a plain `.to(device)`; there, load in workers first (TL101)."
    )
    bad = (
        "loader = DataLoader(dataset, batch_size=64, num_workers=4)\n"
        "for images, labels in loader:\n"
        "    images, labels = images.to(device), labels.to(device)\n"
    )
    good = (
        "loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)\n"
        "for images, labels in loader:\n"
        "    images = images.to(device, non_blocking=True)\n"
        "    labels = labels.to(device, non_blocking=True)\n"
    )
    false_positives = (
        "Page-locked memory cannot be swapped out: on a host short of RAM with very large batches, pinning "
        "can hurt the rest of the system. A dataset that already returns CUDA tensors cannot be pinned "
        "(the loader raises): the rule stays silent when the file's `__getitem__` moves tensors to the GPU "
        "or the `TensorDataset` is built from GPU tensors. Not reported: loaders without workers, loaders "
        "whose settings come through `**kwargs` the rule cannot read (a parameter, a dict passed to another "
        "function or filled from a config), batches moved to `\"cpu\"`/`\"mps\"`, and batches handed to "
        "functions in other files that move them."
    )
    fix_safety = FixSafety.SAFE
    fix_notes = (
        "Sets `pin_memory=True`. Batches hold the same values; on a machine without CUDA the DataLoader "
        "only warns that pinning is unavailable and loads as before, so the fix is safe where the same "
        "script also runs on CPU. With `**kwargs` it is offered only when the dict cannot hold `pin_memory`."
    )
    requires = ("DataLoader",)

    def leave_Module(self, node: cst.Module) -> None:
        if is_test_file(self.context.source.path, self.context.source.text):
            return
        data = flow(self.context)
        for loader in data.loaders:
            pin = data.setting_options(loader, "pin_memory", _PIN_MEMORY_AT)
            if pin is None or not pin <= {_MISSING, False}:
                continue
            workers = data.setting_options(loader, "num_workers", _NUM_WORKERS_AT)
            if workers is not None and (_MISSING in workers or 0 in workers):
                # Without workers the loader pins each batch on the main thread, one more copy in front of the
                # transfer: loading in workers (TL101) comes first, and then pinning runs in the background.
                continue
            if self._dataset_on_device(data, loader):
                continue  # CUDA tensors cannot be pinned: the loader would raise
            moved = [t for loop, target in data.loops_over(loader) for t in data.transfers(loop, target)]
            if not moved:
                continue
            message = (
                f"Batches of this DataLoader are copied to the GPU (`{_snippet(self.context, moved[0])}`) from "
                "pageable memory: set pin_memory=True so the copy runs by DMA from page-locked memory "
                "(and can overlap compute with non_blocking=True)"
            )
            fix = None
            if pin == {_MISSING} or not has_star_kwargs(loader):  # never a second pin_memory from **kwargs
                fix = _with_keyword_fix(
                    self.context, loader, "pin_memory", "True", "Set pin_memory=True", position=_PIN_MEMORY_AT
                )
            self.report(loader, message=message, fix=fix)


    def _dataset_on_device(self, data: _Flow, loader: cst.Call) -> bool:
        """The dataset may already return GPU tensors: built from moved tensors, or a `__getitem__` that moves."""
        if data.getitem_moves is None:
            data.getitem_moves = any(
                isinstance(n, cst.FunctionDef)
                and n.name.value == "__getitem__"
                and any(isinstance(c, cst.Call) and _is_transfer(c) and data.to_accelerator(c) for c in descendants(n))
                for n in descendants(self.context.module)
            )
        if data.getitem_moves:
            return True
        dataset = argument(loader, "dataset", position=0)
        value = dataset.value if dataset is not None else None
        if isinstance(value, cst.Name):
            value = self.context.assigned_value(value) or value
        if isinstance(value, cst.Call) and self.context.qualname(value) == "torch.utils.data.TensorDataset":
            return any(
                isinstance(n, cst.Call) and _is_transfer(n) and data.to_accelerator(n)
                for a in value.args
                for n in [a.value, *descendants(a.value)]
            ) or any(self._moved_name(data, a.value) for a in value.args)
        return False

    def _moved_name(self, data: _Flow, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Name):
            return False
        value = self.context.assigned_value(expr)
        return (
            isinstance(value, cst.Call)
            and (
                (_is_transfer(value) and data.to_accelerator(value))
                or (keyword(value, "device") is not None and data._may_be_cuda(keyword(value, "device").value, 0))  # type: ignore[union-attr]
            )
        )


# -- TL103 ---------------------------------------------------------------------------------------


class CopyWithoutNonBlocking(Rule):
    code = "TL103"
    name = "copy-without-non-blocking"
    family = "Data loading"
    summary = "`.to(device)` / `.cuda()` of a batch from a pinned `DataLoader` without `non_blocking=True`."
    message = (
        "This batch comes from a pinned DataLoader but is copied synchronously: pass non_blocking=True so the "
        "copy overlaps the work already queued on the GPU"
    )
    explanation = (
        "`pin_memory=True` makes a batch eligible for an asynchronous copy, but `.to(device)` still waits "
        "for the copy to finish unless it is given `non_blocking=True`: the host stops issuing work and the "
        "GPU's queue drains. With `non_blocking=True` the copy is queued on the current stream like any "
        "kernel (so later kernels still see the data) and the host goes on to queue the forward pass. "
        "Without it, pinning buys only the faster DMA. PyTorch's CUDA notes pair the two: once a tensor "
        "is pinned, pass `non_blocking=True` to `to()` or `cuda()` for an asynchronous copy."
    )
    bad = (
        "loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)\n"
        "for images, labels in loader:\n"
        "    images, labels = images.cuda(), labels.cuda()\n"
    )
    good = (
        "loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)\n"
        "for images, labels in loader:\n"
        "    images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)\n"
    )
    false_positives = (
        "A host-to-device copy with `non_blocking=True` is ordered on the stream before the kernels that "
        "use it, so the batch's values are the same. It would matter only if the code wrote to the pinned "
        "CPU batch in place after the copy was queued, which the fix cannot see. Device-to-host copies are "
        "another matter (the host may read before the data arrives); the rule only looks at batches going "
        "to the GPU. A loader pinned on one path only (`kwargs = {\"pin_memory\": True} if args.cuda else {}`) is "
        "reported: on the other path `non_blocking=True` is a plain copy."
    )
    fix_safety = FixSafety.SAFE
    fix_notes = "Adds `non_blocking=True` to the `.to(...)` / `.cuda(...)` call."
    requires = ("pin_memory",)

    def leave_Module(self, node: cst.Module) -> None:
        if is_test_file(self.context.source.path, self.context.source.text):
            return
        data = flow(self.context)
        seen: set[int] = set()
        for loader in data.loaders:
            pin = data.setting_options(loader, "pin_memory", _PIN_MEMORY_AT)
            if pin is None or True not in pin:
                continue  # not pinned, or not known to be (`pin_memory=args.pin`); pinned on some path is enough
            for loop, target in data.loops_over(loader):
                for transfer in data.transfers(loop, target):
                    if id(transfer) in seen or not _is_transfer(transfer) or self._non_blocking_given(transfer):
                        continue
                    seen.add(id(transfer))
                    fix = _with_keyword_fix(self.context, transfer, "non_blocking", "True", "Pass non_blocking=True")
                    self.report(transfer, fix=fix)

    def _non_blocking_given(self, call: cst.Call) -> bool:
        arg = keyword(call, "non_blocking")
        if arg is not None:
            return self.context.literal(arg.value) is not False
        if has_star_kwargs(call) or has_star_args(call):
            return True
        # `.cuda(0, True)` / `.to(device, torch.float, True)`: a positional flag
        limit = 1 if call.func.attr.value == "cuda" else 2  # type: ignore[attr-defined]
        return len(positional(call)) > limit or any(
            isinstance(self.context.literal(a.value), bool) for a in positional(call)
        )


# -- TL104 ---------------------------------------------------------------------------------------


# Lightning hooks whose loader the trainer iterates once per epoch.
_EPOCH_HOOKS = frozenset({"train_dataloader", "val_dataloader"})


class DataLoaderWithoutPersistentWorkers(Rule):
    code = "TL104"
    name = "dataloader-without-persistent-workers"
    family = "Data loading"
    summary = (
        "`DataLoader` with worker processes, iterated once per epoch, without `persistent_workers=True` "
        "(its workers are started again every epoch)."
    )
    message = (
        "This DataLoader's worker processes are shut down after every pass and started again for the next "
        "epoch: set persistent_workers=True to keep them"
    )
    explanation = (
        "Each `for batch in loader:` creates a new iterator; without `persistent_workers=True` that starts "
        "`num_workers` new processes, hands each a copy of the dataset, and waits for them to fill their "
        "prefetch queues before the first batch of the epoch arrives; the workers are torn down when the pass "
        "ends. With the `spawn` start method (the default on Windows and macOS) every worker also re-imports "
        "torch and the script, and the dataset is pickled to each of them. Measured on a 2-core CPU with 2 "
        "workers: the first batch of each epoch took 2.69 s with the `spawn` start method and 0.20 s with "
        "persistent workers; with `fork` (the Linux default) 0.28 s against 0.25 s, a cost that grows with "
        "`num_workers` and with whatever each worker opens (files, LMDB or HDF5 handles, `worker_init_fn`). "
        "A validation loader iterated every epoch pays the same start-up each time. Besides loops in the same "
        "file, the rule counts a loader returned by a `train_dataloader()` or `val_dataloader()` hook, which "
        "the Lightning trainer iterates every epoch (Lightning itself suggests `persistent_workers=True` "
        "there)."
    )
    bad = (
        "loader = DataLoader(dataset, batch_size=64, num_workers=8)\n"
        "for epoch in range(epochs):\n"
        "    for images, labels in loader:\n"
        "        train_step(images, labels)\n"
    )
    good = (
        "loader = DataLoader(dataset, batch_size=64, num_workers=8, persistent_workers=True)\n"
        "for epoch in range(epochs):\n"
        "    for images, labels in loader:\n"
        "        train_step(images, labels)\n"
    )
    false_positives = (
        "Persistent workers keep the dataset copy they were given: a dataset the main process changes between "
        "epochs (`loader.dataset.mosaic = False`, `dataset.set_epoch(epoch)`) is not seen by them. The rule "
        "stays silent when the epoch loop assigns to or calls `set_epoch` on the dataset, when "
        "`num_workers` is not known to be positive, when the loader is built inside the epoch loop, and when "
        "its settings come through `**kwargs`. Persistent workers also hold their memory between epochs."
    )
    fix_safety = FixSafety.SAFE
    fix_notes = (
        "Adds `persistent_workers=True`; when `num_workers` is an option whose default is positive "
        "(`args.workers`) it adds `persistent_workers=args.workers > 0` instead, because the DataLoader "
        "rejects persistent workers with `num_workers=0`. The batches are the same data; random augmentations "
        "draw from worker random streams seeded once instead of once per epoch, and `worker_init_fn` runs once. "
        "Review it if code the rule cannot see changes the dataset between epochs."
    )
    requires = ("DataLoader",)

    def leave_Module(self, node: cst.Module) -> None:
        if is_test_file(self.context.source.path, self.context.source.text):
            return
        data = flow(self.context)
        for loader in data.loaders:
            if _setting(self.context, loader, "persistent_workers", None) is not _MISSING:
                continue
            workers = argument(loader, "num_workers", _NUM_WORKERS_AT)
            if workers is None:
                continue
            kind = _positive_workers(self.context, data, workers.value)
            if kind is None:
                continue
            if not (
                any(self._per_epoch(data, loader, loop) for loop, _ in data.loops_over(loader))
                or self._lightning_epoch_loader(loader)
            ):
                continue
            value = f"{self.context.code(workers.value)} > 0" if kind == "default" else "True"
            fix = _with_keyword_fix(self.context, loader, "persistent_workers", value, f"Set persistent_workers={value}")
            self.report(loader, fix=fix)

    def _per_epoch(self, data: _Flow, loader: cst.Call, loop: cst.For, depth: int = 0) -> bool:
        """The loop over `loader` runs again and again: it sits in an outer loop (here or in a caller)."""
        context = self.context
        for outer in _enclosing_loops(context, loop):
            if _inside(context, loader, outer):
                return False  # a new loader every time round: persistent workers would not help
            if self._changes_dataset(outer):
                return False
            return True
        if depth >= 2:
            return False
        function = context.enclosing_function(loop)
        if function is None:
            return False
        return any(self._per_epoch(data, loader, site, depth + 1) for site in data.call_sites(function))  # type: ignore[arg-type]

    def _lightning_epoch_loader(self, loader: cst.Call) -> bool:
        """Returned by a `train_dataloader()` / `val_dataloader()` hook: the trainer iterates it every epoch."""
        context = self.context
        function = context.enclosing_function(loader)
        if function is None or function.name.value not in _EPOCH_HOOKS:
            return False
        if context.enclosing(function, cst.ClassDef) is None:
            return False
        parent = context.parent(loader)
        if isinstance(parent, cst.Return):
            return True
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            name = parent.targets[0].target.value
            return any(isinstance(r.value, cst.Name) and r.value.value == name for r in _returns(function))
        return False

    def _changes_dataset(self, outer: cst.CSTNode) -> bool:
        for node in descendants(outer):
            if isinstance(node, (cst.Assign, cst.AugAssign)):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                if any(isinstance(t, cst.Attribute) and "dataset" in self.context.code(t.value).lower() for t in targets):
                    return True
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                if "dataset" in self.context.code(node.func.value).lower():
                    if node.func.attr.value.startswith("set_") or node.func.attr.value in ("shuffle", "reset", "update"):
                        return True
        return False


# -- TL105 ---------------------------------------------------------------------------------------


def _looks_like_loader(expr: cst.BaseExpression) -> bool:
    name = (last_name(expr) or "").lower()
    return "loader" in name or name == "dl" or name.endswith("_dl") or name.startswith("dl_")


class IterInLoop(Rule):
    code = "TL105"
    name = "iter-in-loop"
    family = "Data loading"
    summary = "`next(iter(loader))` inside a loop: a new DataLoader iterator (and new workers) every time round."
    message = (
        "next(iter(loader)) inside a loop starts a new pass over the DataLoader each time (new workers, a new "
        "shuffle, prefetching thrown away): create the iterator once outside the loop and call next() on it"
    )
    explanation = (
        "`iter(loader)` starts a fresh pass: with workers it launches `num_workers` processes and has them "
        "prefetch `prefetch_factor` batches each, only for `next()` to take one and throw the rest away; "
        "without workers it still re-runs the sampler (a full `randperm` of the dataset when shuffling). "
        "And without `shuffle=True` every call returns the same first batch, which is rarely what a training "
        "loop wants. Measured on a 2-core CPU with 2 workers: 343 ms per `next(iter(loader))` against 174 ms "
        "for `next(it)` on an iterator kept across steps (2x), and the gap grows with `num_workers`."
    )
    bad = (
        "for step in range(num_steps):\n"
        "    images, labels = next(iter(train_loader))\n"
        "    train_step(images, labels)\n"
    )
    good = (
        "batches = iter(train_loader)\n"
        "for step in range(num_steps):\n"
        "    try:\n"
        "        images, labels = next(batches)\n"
        "    except StopIteration:\n"
        "        batches = iter(train_loader)\n"
        "        images, labels = next(batches)\n"
        "    train_step(images, labels)\n"
    )
    false_positives = (
        "Reported only for a `DataLoader` built in the same file, or an object whose name says it is a "
        "loader (`train_loader`, `dl`). Not reported where the call runs once per epoch (in an epoch loop "
        "around the step loop, or a loop whose variable is named like `epoch`: one sample batch per epoch, "
        "for a plot, costs little), only every N steps (`if step % 500 == 0:`), or when the loop variable "
        "is itself the loader (`for loader in loaders:`)."
    )
    requires = ("next(",)

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.candidates: list[tuple[cst.Call, cst.BaseExpression]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Name) and node.func.value == "next") or len(node.args) != 1:
            return
        inner = node.args[0].value
        if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "iter"):
            return
        if len(inner.args) != 1 or inner.args[0].star:
            return
        self.candidates.append((node, inner.args[0].value))

    def _rebound_in(self, source: cst.BaseExpression, loop: cst.CSTNode) -> bool:
        """`loader = make_loader(cfg)` inside the loop: each trip iterates a new loader once."""
        if not isinstance(source, cst.Name):
            return False
        bindings = self.context.lookup(source) or []
        return any(_inside(self.context, b.node, loop) for b in bindings)

    def _repeated(self, call: cst.Call, innermost: cst.CSTNode) -> bool:
        """The call runs on (nearly) every trip of a loop that runs many times, not once per epoch."""
        context = self.context
        loop = hot_loop(context, call)
        if loop is not None:
            return not gated(context, call, loop)
        if isinstance(innermost, cst.For) and any("epoch" in n.lower() for n in _target_names(innermost.target)):
            return False
        if any(isinstance(n, _LOOPS) and is_hot(context, n) for n in descendants(innermost.body)):
            return False  # an epoch loop around the step loop: once per epoch
        return not gated(context, call, innermost)  # type: ignore[arg-type]

    def leave_Module(self, node: cst.Module) -> None:
        if not self.candidates or is_test_file(self.context.source.path, self.context.source.text):
            return
        context = self.context
        data = None
        for call, source in self.candidates:
            if not _is_builtin(context, call.func, "next") or not _is_builtin(context, call.args[0].value.func, "iter"):  # type: ignore[attr-defined]
                continue
            loops = _enclosing_loops(context, call)
            if not loops or not self._repeated(call, loops[0]):
                continue
            root = _root(source, conversions=False)
            bound = {n for loop in loops if isinstance(loop, cst.For) for n in _target_names(loop.target)}
            if root in bound or self._rebound_in(source, loops[0]):
                continue  # a different loader each time round
            if data is None:
                data = flow(context)
            if data.loaders_of(source) is None and not _looks_like_loader(source):
                continue
            name = _snippet(context, source, 30)
            self.report(
                call,
                message=f"next(iter({name})) inside a loop starts a new pass over the DataLoader each time (new "
                "workers, a new shuffle, prefetching thrown away): create the iterator once before the loop "
                "and call next() on it",
            )


# -- TL106 ---------------------------------------------------------------------------------------

_MAP_STYLE = frozenset(
    {"torch.utils.data.TensorDataset", "torch.utils.data.Subset", "torch.utils.data.ConcatDataset"}
)


class LenOfListLoader(Rule):
    code = "TL106"
    name = "len-of-list-loader"
    family = "Data loading"
    summary = "`len(list(loader))`: loads every batch of the dataset just to count them."
    message = "len(list(loader)) loads and collates every batch only to count them: use len(loader)"
    explanation = (
        "`list(loader)` runs a whole epoch of data loading (reading, decoding, augmenting, collating every "
        "sample, and starting the workers) and keeps every batch in memory, just to take its length. "
        "`len(loader)` computes the same number from the dataset length and batch size in microseconds. "
        "Measured on a 2-core CPU: 6.3 s for `len(list(loader))` over 32 batches of 32 images against 13 "
        "microseconds for `len(loader)`."
    )
    bad = "steps_per_epoch = len(list(train_loader))\n"
    good = "steps_per_epoch = len(train_loader)\n"
    false_positives = (
        "`len(loader)` needs a dataset with `__len__`; for an `IterableDataset` it returns an estimate "
        "(or raises), which is why the fix is only offered as safe when the loader is a `DataLoader` built in "
        "this file over a dataset known to be map-style (a `TensorDataset`, `Subset`, torchvision dataset, "
        "list or tensor) and as unsafe when the dataset is unknown. An object that is only named like a loader "
        "is reported without a fix."
    )
    fix_safety = FixSafety.SOMETIMES
    fix_notes = (
        "Replaces `len(list(loader))` with `len(loader)`: safe over a map-style dataset, where both count the "
        "batches the same way (`drop_last` included); unsafe over a dataset that may be iterable."
    )
    requires = ("len(list(", "len(tuple(")

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.candidates: list[tuple[cst.Call, cst.BaseExpression]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Name) and node.func.value == "len") or len(node.args) != 1:
            return
        inner = node.args[0].value
        if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value in ("list", "tuple")):
            return
        if len(inner.args) != 1 or inner.args[0].star:
            return
        self.candidates.append((node, inner.args[0].value))

    def leave_Module(self, node: cst.Module) -> None:
        if not self.candidates or is_test_file(self.context.source.path, self.context.source.text):
            return
        context = self.context
        data = flow(context)
        for call, source in self.candidates:
            inner = call.args[0].value
            if not _is_builtin(context, call.func, "len") or not _is_builtin(context, inner.func, inner.func.value):  # type: ignore[attr-defined]
                continue
            loaders = data.loaders_of(source)
            name = _snippet(context, source, 30)
            message = f"{_snippet(context, call, 50)} loads and collates every batch only to count them: use len({name})"
            if loaders is None:
                if _looks_like_loader(source):
                    self.report(call, message=message)
                continue
            safe = all(self._map_style(loader) for loader in loaders)
            fixed = call.with_changes(args=[call.args[0].with_changes(value=source)])
            self.report(call, message=message, fix=Fix(f"Use len({name})", [Replace(call, fixed)], safe=safe))

    def _map_style(self, loader: cst.Call) -> bool:
        dataset = argument(loader, "dataset", position=0)
        return dataset is not None and self._map_style_dataset(dataset.value, 0)

    def _map_style_dataset(self, expr: cst.BaseExpression, depth: int) -> bool:
        context = self.context
        if depth > 4:
            return False
        if isinstance(expr, (cst.List, cst.ListComp, cst.Tuple)):
            return True
        if isinstance(expr, cst.Call):
            name = context.qualname(expr) or ""
            if name in _MAP_STYLE or name.startswith("torchvision.datasets."):
                return True
            if name.startswith("torch.") and name.rsplit(".", 1)[-1] in _TENSOR_FACTORIES:
                return True
            return _is_builtin(context, expr.func, "list")
        if isinstance(expr, cst.Name):
            value = context.assigned_value(expr)
            if value is not None:
                return self._map_style_dataset(value, depth + 1)
            bindings = context.lookup(expr)
            if bindings and len(bindings) == 1 and isinstance(bindings[0].node, cst.Assign):
                value = bindings[0].node.value
                if isinstance(value, cst.Call) and context.qualname(value) == "torch.utils.data.random_split":
                    return True
        return False
