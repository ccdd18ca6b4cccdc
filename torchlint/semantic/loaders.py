"""DataLoaders: which loaders an expression may hold (through assignments, containers, dicts of options,
function returns and parameters), with which settings (`num_workers`, `pin_memory`, `**kwargs` dicts,
argparse defaults), the loops that iterate them, and the copies of their batches to a device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

import libcst as cst

from torchlint.lint.calls import (
    argument,
    has_star_args,
    has_star_kwargs,
    keyword,
    positional,
)
from torchlint.lint.context import UNKNOWN, Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants
from torchlint.semantic import project
from torchlint.semantic.devices import is_device_name
from torchlint.semantic.functions import called_function, is_generator, method_named, returns_of

DATALOADER = "torch.utils.data.DataLoader"

# Drop-in replacements with the same constructor and defaults.
_LOADERS = frozenset(
    {
        DATALOADER,
        "torchdata.stateful_dataloader.StatefulDataLoader",
        "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader",
    }
)


def is_dataloader(context: Context, node: cst.CSTNode) -> bool:
    """`node` is a call of torch's `DataLoader` (through any import spelling)."""
    return isinstance(node, cst.Call) and context.qualname(node) in _LOADERS


def is_builtin(context: Context, func: cst.BaseExpression, name: str) -> bool:
    return isinstance(func, cst.Name) and func.value == name and context.lookup(func) is None


def target_names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value)


def setting_value(context: Context, call: cst.Call, name: str, position: Optional[int]) -> object:
    """The literal value of a DataLoader argument: its default marker MISSING, a value, or UNKNOWN."""
    arg = argument(call, name, position)
    if arg is None:
        if has_star_kwargs(call) or has_star_args(call):
            return UNKNOWN
        if position is not None and len(positional(call)) > position:
            return UNKNOWN
        return MISSING
    return context.literal(arg.value)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()

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


_TENSOR_VIEWS = frozenset({"items", "values"})

SAME_TENSOR = frozenset({"float", "long", "half", "double", "int", "bool", "contiguous", "bfloat16"})


_TQDM = frozenset({"tqdm", "track"})

_MOVE_HELPERS = ("to_device", "to_cuda", "to_gpu", "move_to")

# Calls on a tensor that return (a view of) the same storage: `buf.resize_(x.size()).copy_(x)`.
_BUFFER_VIEWS = frozenset({"resize_", "resize_as_", "view", "view_as", "narrow", "reshape", "squeeze", "unsqueeze"})


def root_name(expr: cst.BaseExpression, *, conversions: bool) -> Optional[str]:
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
            and expr.func.attr.value in (SAME_TENSOR | _TENSOR_VIEWS)
        ):
            expr = expr.func.value
            continue
        if isinstance(expr, cst.Call) and last_name(expr.func) == "Variable" and expr.args:
            expr = expr.args[0].value  # `Variable(images).cuda()` in older scripts
            continue
        return None


def is_transfer(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda")


class Flow:
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
        self._sources_active: set[int] = set()
        self._remote = False  # whether `batch_sources` may ask other files (see `batch_reads`)
        self._reads: Optional[dict[object, list[tuple[cst.CSTNode, cst.BaseExpression]]]] = None
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
                return self._union(r.value for r in returns_of(function))
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
        """The FunctionDef a call runs, when it is a function or a `self.` method defined in this file."""
        return called_function(self.context, call)

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
        """Every value a DataLoader setting may take (`MISSING` for the default), or None when undecidable.

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
                facts[key] = frozenset([context.literal(element.value)])
            return facts
        if isinstance(expr, cst.Call) and is_builtin(context, expr.func, "dict"):
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

    # -- every read of a loader's batches --------------------------------------------------------
    def batch_reads(self, loader: object) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
        """(region, batch) for each place the loader's batches are read once per step: the body of a loop
        over it (directly, through `iter(loader)`, or through a generator of this file that yields its
        items, such as `infiniteloop(loader)`) with the loop's target, and the body of the loop around a
        `next(it)` with the name it is assigned to (or the `next(...)` call itself when used inline).
        `loader` is a DataLoader(...) call of this file, or a `Remote` or `CallResult` (see `batch_sources`)."""
        if self._reads is None:
            self._reads = {}
            for loop in self.fors:
                for source, target in _match_iteration(self.context, loop.iter, loop.target):
                    # other files are asked only about loops that copy what they read to an accelerator
                    self._remote = bool(self.transfers(loop.body, target))
                    try:
                        found_sources = self.batch_sources(source) or ()
                    finally:
                        self._remote = False
                    for found in found_sources:
                        self._reads.setdefault(found, []).append((loop.body, target))
            for call in [*self.calls_by_name.get("next", ()), *self.calls_by_name.get("__next__", ())]:
                iterator = _next_of(self.context, call)
                if iterator is None:
                    continue
                loop = next(iter(_enclosing_loops(self.context, call)), None)
                if loop is None:
                    continue  # one batch read once, to look at
                parent = self.context.parent(call)
                target: cst.BaseExpression = call
                if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and parent.value is call:
                    target = parent.targets[0].target
                self._remote = bool(self.transfers(loop.body, target))
                try:
                    found_sources = self.batch_sources(iterator) or ()
                finally:
                    self._remote = False
                for found in found_sources:
                    self._reads.setdefault(found, []).append((loop.body, target))
        return self._reads.get(loader, [])

    def batch_sources(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[frozenset]:
        """The DataLoader(...) calls whose batches iterating `expr` yields: `loaders_of`, and also through
        `iter(loader)` and generators of this file that loop over a loader they are given."""
        found = self.loaders_of(expr)
        if found is not None or depth > 4:
            return found
        if id(expr) in self._sources_active:
            return frozenset()  # `loader = sample_data(loader)`: the name's other binding says what it holds
        self._sources_active.add(id(expr))
        try:
            return self._batch_sources(expr, depth)
        finally:
            self._sources_active.discard(id(expr))

    def _batch_sources(self, expr: cst.BaseExpression, depth: int) -> Optional[frozenset]:
        context = self.context
        if isinstance(expr, cst.Name):
            parts = []
            for binding in context.lookup(expr) or ():
                if binding.kind == "assign" and binding.value is not None:
                    parts.append(self.batch_sources(binding.value, depth + 1))
                elif binding.kind == "param":
                    found = self._param_loaders(binding.node, depth)
                    parts.append(found if found is not None else self._param_sources(binding.node, depth))
                elif isinstance(binding.node, cst.Assign):
                    parts.append(self._unpacked_result(binding.node, expr.value))
                else:
                    return None
            return _strict_union(parts)
        if isinstance(expr, cst.Call) and self._remote and self.function_called(expr) is None and project.imported(context, expr.func):
            return frozenset([CallResult(self, expr, None)])  # `loader = get_loader(args)` of another file
        if not isinstance(expr, cst.Call) or not expr.args or has_star_args(expr):
            return None
        if is_builtin(context, expr.func, "iter") and len(expr.args) == 1:
            return self.batch_sources(expr.args[0].value, depth + 1)
        function = self.function_called(expr)
        if function is None or not is_generator(function):
            return None
        # `def infiniteloop(loader): while True: for x, y in loader: yield x`: its items are the loader's
        parts = []
        for loop in descendants(function.body):
            if not isinstance(loop, cst.For) or not any(isinstance(n, cst.Yield) for n in descendants(loop.body)):
                continue
            iterated = loop.iter
            if isinstance(iterated, cst.Call) and is_builtin(context, iterated.func, "iter") and iterated.args:
                iterated = iterated.args[0].value
            if isinstance(iterated, cst.Name):
                arg = _argument_for(context, function, expr, iterated.value)
                if arg is not None:
                    parts.append(self.batch_sources(arg, depth + 1))
        return _strict_union(parts) if parts else None

    # -- loaders only looked at --------------------------------------------------------------------
    def only_peeked(self, loader: cst.Call) -> bool:
        """The name the loader is bound to is read, and only to look at a batch or two, never per step:
        `next(iter(loader))` or `it = iter(loader)` then `next(it)` outside any loop, `len(loader)`, a
        notebook cell showing it, or handed to a function of this file that does no more with it."""
        parent = self.context.parent(loader)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
            return False
        target = parent.targets[0].target
        scope = self.context.enclosing(loader, cst.FunctionDef) or self.context.module
        uses = [n for n in self._uses(target.value) if n is not target and self._within(n, scope)]
        returned = [n for n in uses if self.context.enclosing(n, cst.Return) is not None]
        if returned and not self._peeked_by_importers(loader):
            return False
        return bool(uses) and all(n in returned or self._peek(n, 0) for n in uses)

    def _peeked_by_importers(self, loader: cst.Call) -> bool:
        """Every file calling the function that returns the loader only looks at it (`get_loaders(args)`,
        then `model.evaluate(test_loader)` that never iterates it)."""
        returned = self.returned_by(loader)
        sites = project.call_sites(self.context.source.path, returned[0]) if returned is not None else []
        return bool(sites) and all(site.summary.model.loaders._result_peeked(site.call, returned[1]) for site in sites)  # type: ignore[index]

    def _result_peeked(self, call: cst.Call, index: Optional[int]) -> bool:
        """The value `call` returns (element `index` of it) is bound to a name only looked at."""
        assign = self.context.parent(call)
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return False
        target = assign.targets[0].target
        if index is not None:
            if not isinstance(target, (cst.Tuple, cst.List)) or index >= len(target.elements):
                return False
            target = target.elements[index].value
        if not isinstance(target, cst.Name):
            return False
        scope = self.context.enclosing(call, cst.FunctionDef) or self.context.module
        uses = [n for n in self._uses(target.value) if n is not target and self._within(n, scope)]
        return all(self._peek(n, 1) for n in uses)

    def _within(self, node: cst.CSTNode, scope: cst.CSTNode) -> bool:
        return scope is self.context.module or any(a is scope for a in self.context.ancestors(node))

    def _peek(self, use: cst.Name, depth: int) -> bool:
        """This use of a loader's name reads at most a batch, once."""
        context = self.context
        parent = context.parent(use)
        if isinstance(parent, cst.Expr) or (
            isinstance(parent, cst.Element) and isinstance(context.parent(context.parent(parent)), cst.Expr)
        ):
            return context.source.is_notebook  # a cell that shows it
        if not isinstance(parent, cst.Arg) or parent.value is not use or parent.star:
            return False
        call = context.parent(parent)
        if not isinstance(call, cst.Call):
            return False
        if is_builtin(context, call.func, "len"):
            return True
        if is_builtin(context, call.func, "iter"):
            if _enclosing_loops(context, call):
                return False
            holder = context.parent(call)
            if isinstance(holder, cst.Arg):
                outer = context.parent(holder)  # `next(iter(loader))`
                return isinstance(outer, cst.Call) and is_builtin(context, outer.func, "next")
            if isinstance(holder, cst.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0].target, cst.Name):
                name = holder.targets[0].target  # `it = iter(loader)`, then `next(it)`
                scope = context.enclosing(call, cst.FunctionDef) or context.module
                reads = [n for n in self._uses(name.value) if n is not name and self._within(n, scope)]
                return bool(reads) and all(self._next_once(n) for n in reads)
            return False
        if depth > 1 or has_star_args(call) or has_star_kwargs(call):
            return False
        function = self.function_called(call)
        callees = [(self, function)] if function is not None else self._foreign_callees(call)
        if not callees:
            return False
        for flow_there, callee in callees:
            name = _param_for(flow_there.context, callee, call, parent)
            if name is None:
                return False
            reads = [n for n in flow_there._uses(name.value) if n is not name and flow_there._within(n, callee)]
            if not all(flow_there._peek(n, depth + 1) for n in reads):  # one that never reads it is fine too
                return False
        return True

    def _foreign_callees(self, call: cst.Call) -> list[tuple["Flow", cst.FunctionDef]]:
        """The functions of other project files `call` may run: an imported function, or `obj.method(...)`
        where every value bound to `obj` is an instance of a project class defining the method (empty when
        that is not certain)."""
        func = call.func
        found = project.imported(self.context, func)
        if found is not None:
            node = found[0].definition(found[1])
            return [(found[0].model.loaders, node)] if isinstance(node, cst.FunctionDef) else []
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return []
        bindings = self.context.lookup(func.value)
        if not bindings or any(b.kind != "assign" or b.value is None for b in bindings):
            return []
        out: list[tuple["Flow", cst.FunctionDef]] = []
        for binding in bindings:
            value = binding.value
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            cls = project.imported(self.context, value.func) if isinstance(value, cst.Call) else None  # type: ignore[union-attr]
            node = cls[0].definition(cls[1]) if cls is not None else None
            method = method_named(node, func.attr.value) if isinstance(node, cst.ClassDef) else None
            if method is None:
                return []  # not a project class, or the method is inherited
            out.append((cls[0].model.loaders, method))  # type: ignore[index]
        return out

    def _next_once(self, use: cst.Name) -> bool:
        holder = self.context.parent(use)
        call = self.context.parent(holder) if isinstance(holder, cst.Arg) else None
        return (
            isinstance(call, cst.Call)
            and is_builtin(self.context, call.func, "next")
            and not _enclosing_loops(self.context, call)
        )

    # -- loaders and batches that cross files -------------------------------------------------------
    def _unpacked_result(self, assign: cst.Assign, name: str) -> Optional[frozenset]:
        """`train_loader, test_loader = data_setup.create_dataloaders(...)`: element `name` of a project call."""
        call = assign.value
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if not (isinstance(call, cst.Call) and isinstance(target, (cst.Tuple, cst.List))):
            return None
        if any(isinstance(e, cst.StarredElement) for e in target.elements):
            return None
        index = next((i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name), None)
        if index is None or not self._remote or self.function_called(call) is not None:
            return None
        if not project.imported(self.context, call.func):
            return None
        return frozenset([CallResult(self, call, index)])

    def _param_sources(self, param: cst.CSTNode, depth: int) -> Optional[frozenset]:
        """`batch_sources` of what this file's calls pass for a parameter, or, when none does, the files
        that import this one."""
        values = self._param_args(param)
        if values is not None:
            return _strict_union([self.batch_sources(v, depth + 1) for v in values])
        return self._remote_param(param)

    def _remote_param(self, param: cst.CSTNode) -> Optional[frozenset]:
        """The loaders that files importing this one pass for a parameter of a top-level function."""
        function = self.context.enclosing(param, cst.FunctionDef) if isinstance(param, cst.Param) else None
        if not isinstance(function, cst.FunctionDef) or function not in self.context.module.body:
            return None
        if not self._remote or self.call_sites(function) or _REMOTE_HOPS[0] >= 1:
            return None  # called here too (and that was not decided), or already one file away
        ordered = [*function.params.posonly_params, *function.params.params]
        position = ordered.index(param) if param in ordered else None
        _REMOTE_HOPS[0] += 1
        try:
            parts: list[Optional[frozenset]] = []
            for site in project.call_sites(self.context.source.path, function.name.value):
                arg = argument(site.call, param.name.value, position)  # type: ignore[attr-defined]
                caller = site.summary.model.loaders
                caller._remote = True
                try:
                    found = caller.batch_sources(arg.value) if arg is not None else None
                finally:
                    caller._remote = False
                if found is None:
                    return None
                parts.append(frozenset(Remote(caller, f) if isinstance(f, cst.Call) else f for f in found))
        finally:
            _REMOTE_HOPS[0] -= 1
        return _strict_union(parts)

    def returned_by(self, loader: cst.Call) -> Optional[tuple[str, Optional[int]]]:
        """(name, index) when a top-level function of this file returns the loader (as element `index` of a
        returned tuple): `return train_loader` or `return train_loader, test_loader`."""
        function = self.context.enclosing(loader, cst.FunctionDef)
        if not isinstance(function, cst.FunctionDef) or function not in self.context.module.body:
            return None
        for ret in returns_of(function):
            values = ret.value.elements if isinstance(ret.value, (cst.Tuple, cst.List)) else [ret.value]
            for index, element in enumerate(values):
                value = element.value if isinstance(element, (cst.Element, cst.StarredElement)) else element
                if isinstance(element, cst.StarredElement) or value is None:
                    continue
                if loader in (self.loaders_of(value) or ()):
                    at = index if isinstance(ret.value, (cst.Tuple, cst.List)) else None
                    return function.name.value, at
        return None

    def callers_on_accelerator(self, loader: cst.Call) -> Optional[bool]:
        """Whether the program around the loader puts anything on an accelerator: the files calling the
        function that returns it, or the project files they import (None when no project file calls it)."""
        from torchlint.semantic.placement import uses_accelerator

        returned = self.returned_by(loader)
        sites = project.call_sites(self.context.source.path, returned[0]) if returned is not None else []
        if not sites:
            return None
        for site in sites:
            source = site.summary.context.source
            if site.summary.model.uses_accelerator:
                return True
            for path in project.dependencies(source.path, source.text):
                try:
                    with open(path, encoding="utf-8", errors="replace") as handle:
                        if uses_accelerator(handle.read(project.MAX_SUMMARY_BYTES)):
                            return True
                except OSError:
                    return True  # cannot tell
        return False

    def copies_in_importers(self, loader: cst.Call) -> list[tuple[Context, cst.Call]]:
        """Copies to an accelerator of the loader's batches in the files that call the function returning it."""
        returned = self.returned_by(loader)
        if returned is None:
            return []
        name, index = returned
        found: list[tuple[Context, cst.Call]] = []
        for site in project.call_sites(self.context.source.path, name):
            caller = site.summary.model.loaders
            result = CallResult(caller, site.call, index)
            copies = [(caller.context, c) for c in caller.batch_copies(result)]
            found.extend(copies or caller.copies_in_callees(result))
        return found

    def copies_in_callees(self, source: object) -> list[tuple[Context, cst.Call]]:
        """Copies to an accelerator of the source's batches in functions of other files the loader is handed
        to: `model.train(train_loader)` where the class's `train` iterates its parameter and moves batches."""
        found: list[tuple[Context, cst.Call]] = []
        self._remote = True
        try:
            for calls in self.calls_by_name.values():
                for call in calls:
                    if has_star_args(call) or has_star_kwargs(call) or self.function_called(call) is not None:
                        continue
                    for arg in call.args:
                        if not isinstance(arg.value, cst.Name) or source not in (self.batch_sources(arg.value) or ()):
                            continue
                        for there, callee in self._foreign_callees(call):
                            param = _param_for(there.context, callee, call, arg)
                            if param is not None:
                                found.extend((there.context, c) for c in there.param_copies(callee, param))
        finally:
            self._remote = False
        return found

    def param_copies(self, function: cst.FunctionDef, param: cst.Name) -> list[cst.Call]:
        """Copies to an accelerator of the batches of the loader a function receives as `param`."""
        found: list[cst.Call] = []
        for loop in self.fors:
            if not self._within(loop, function):
                continue
            for source, target in _match_iteration(self.context, loop.iter, loop.target):
                if self._derives(source, param, 0):
                    found.extend(self.transfers(loop.body, target))
        for call in [*self.calls_by_name.get("next", ()), *self.calls_by_name.get("__next__", ())]:
            iterator = _next_of(self.context, call)
            loop = next(iter(_enclosing_loops(self.context, call)), None)
            if iterator is None or loop is None or not self._within(call, function) or not self._derives(iterator, param, 0):
                continue
            parent = self.context.parent(call)
            target: cst.BaseExpression = call
            if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and parent.value is call:
                target = parent.targets[0].target
            found.extend(self.transfers(loop.body, target))  # type: ignore[attr-defined]
        return found

    def _derives(self, expr: cst.BaseExpression, param: cst.Name, depth: int) -> bool:
        """Iterating `expr` yields the batches of what was passed as `param`: the parameter itself,
        `iter(param)`, a generator of this file given it, or a name or `self.` attribute bound to those."""
        if depth > 4:
            return False
        if isinstance(expr, cst.Name):
            bindings = self.context.lookup(expr) or []
            if any(b.kind == "param" and b.node.name is param for b in bindings):  # type: ignore[attr-defined]
                return True
            return any(b.kind == "assign" and b.value is not None and self._derives(b.value, param, depth + 1) for b in bindings)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = self.context.enclosing(expr, cst.ClassDef)
            values = self.self_assigns.get((id(cls), expr.attr.value), []) if cls is not None else []
            return any(self._derives(v, param, depth + 1) for v in values)
        if isinstance(expr, cst.Call) and expr.args and not has_star_args(expr):
            if is_builtin(self.context, expr.func, "iter") or last_name(expr.func) in _TQDM:
                return self._derives(expr.args[0].value, param, depth + 1)
            function = self.function_called(expr)
            if function is not None and is_generator(function):
                return any(self._derives(a.value, param, depth + 1) for a in expr.args)
        return False

    def pinned_options(self, source: object) -> Optional[frozenset]:
        """The `pin_memory` values a loader (of this file, or a `Remote`/`CallResult` one) may have."""
        if isinstance(source, cst.Call):
            return self.setting_options(source, "pin_memory", _PIN_MEMORY_AT)
        if isinstance(source, Remote):
            return source.flow.setting_options(source.call, "pin_memory", _PIN_MEMORY_AT)
        if isinstance(source, CallResult):
            loaders = source.resolve()
            if not loaders:
                return None
            out: set = set()
            for loader in loaders:
                options = loader.flow.setting_options(loader.call, "pin_memory", _PIN_MEMORY_AT)
                if options is None:
                    return None
                out |= options
            return frozenset(out)
        return None

    def sources_read(self) -> list[object]:
        """Every loader whose batches this file reads (after `batch_reads` has indexed them)."""
        self.batch_reads(None)
        return list(self._reads or ())

    def batch_copies(self, loader: object) -> list[cst.Call]:
        """Every copy of the loader's batches to an accelerator, wherever they are read (`batch_reads`)."""
        found: list[cst.Call] = []
        for region, target in self.batch_reads(loader):
            for call in self.transfers(region, target):
                if all(call is not f for f in found):
                    found.append(call)
        return found

    def transfers(self, region: cst.CSTNode, target: cst.BaseExpression) -> list[cst.Call]:
        """`.to(device)` / `.cuda()` calls in `region` on the batch (or parts of it), and in the functions
        of this file the batch is handed to."""
        key = id(target)
        if key not in self._transfers_memo:
            if isinstance(target, cst.Call):  # `next(it).to(device)`: the read itself is the batch
                self._transfers_memo[key] = self._find_transfers(region, set(), target, 0)
            else:
                self._transfers_memo[key] = self._find_transfers(region, set(target_names(target)), None, 0)
        return self._transfers_memo[key]

    def _find_transfers(
        self, region: cst.CSTNode, batch: set[str], read: Optional[cst.Call], depth: int
    ) -> list[cst.Call]:
        if not batch and read is None:
            return []
        body = list(descendants(region))
        # Names that hold (views of) the batch: `x, y = batch`, `x = batch["x"]`, `for k, v in batch.items()`.
        for _ in range(3):
            before = len(batch)
            for node in body:
                if isinstance(node, cst.Assign) and root_name(node.value, conversions=False) in batch:
                    for t in node.targets:
                        batch.update(target_names(t.target))
                elif isinstance(node, cst.Assign) and isinstance(node.value, (cst.Tuple, cst.List)):
                    for t in node.targets:
                        if isinstance(t.target, (cst.Tuple, cst.List)) and len(t.target.elements) == len(node.value.elements):
                            for left, right in zip(t.target.elements, node.value.elements):
                                if root_name(right.value, conversions=False) in batch:
                                    batch.update(target_names(left.value))
                elif isinstance(node, cst.CompFor) and root_name(node.iter, conversions=True) in batch:
                    batch.update(target_names(node.target))
            if len(batch) == before:
                break
        found = []
        for node in body:
            if not isinstance(node, cst.Call):
                continue
            if is_transfer(node):
                receiver = node.func.value  # type: ignore[attr-defined]
                held = root_name(receiver, conversions=True) in batch or (read is not None and _root(receiver) is read)
                if held and self.to_accelerator(node):
                    found.append(node)
            elif self._helper_transfer(node, batch) or self._cast_transfer(node, batch) or self._copy_transfer(node, batch):
                found.append(node)
            elif depth < 2 and batch:
                found.extend(self._handed_to_function(node, batch, depth))
        return found

    def _handed_to_function(self, call: cst.Call, batch: set[str], depth: int) -> list[cst.Call]:
        """The copies a function of this file makes of the batch parts it is given:
        `pred = self._process_one_batch(data, batch_x, batch_y)` where the method moves `batch_x`."""
        if has_star_args(call) or has_star_kwargs(call):
            return []
        function = self.function_called(call)
        if function is None or is_generator(function):
            return []
        params = [*function.params.posonly_params, *function.params.params]
        if self.context.enclosing(function, cst.ClassDef) is not None and not _is_static(function):
            params = params[1:]  # `self`
        names = set()
        for index, arg in enumerate(call.args):
            if root_name(arg.value, conversions=True) not in batch:
                continue
            if arg.keyword is not None:
                names.add(arg.keyword.value)
            elif index < len(params):
                names.add(params[index].name.value)
        if not names:
            return []
        return self._find_transfers(function.body, names, None, depth + 1)

    def _cast_transfer(self, call: cst.Call, batch: set[str]) -> bool:
        """`batch["A"].type(Tensor)` where `Tensor` is, or may be, `torch.cuda.FloatTensor`."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "type"):
            return False
        if root_name(func.value, conversions=True) not in batch:
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
        if not given or root_name(given[0].value, conversions=True) not in batch:
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
            if is_transfer(value) and self.to_accelerator(value):
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
        if not given or root_name(given[0].value, conversions=False) not in batch:
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
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value == "format":
                template = context.literal(func.value)  # `"cuda:{:d}".format(rank)`
                return isinstance(template, str) and template.startswith("cuda")
            name = context.qualname(expr) or ""
            if name == "torch.device":
                return bool(expr.args) and self._may_be_cuda(expr.args[0].value, depth + 1)
            if name.startswith(("torch.cuda.", "torch.accelerator.")):
                return True
            last = (last_name(expr.func) or "").lower()
            return is_device_name(last)
        if isinstance(expr, cst.Name):
            if (context.qualname(expr) or "").startswith("torch."):
                return False  # torch.float16 and friends, imported by name
            bindings = context.lookup(expr)
            if bindings and all(b.kind == "assign" for b in bindings):
                return any(self._may_be_cuda(b.value, depth + 1) for b in bindings if b.value is not None)
            return is_device_name(expr.value)
        if isinstance(expr, cst.Attribute):
            name = context.qualname(expr) or ""
            if name.startswith("torch.") and "accelerator" not in name:
                return False  # torch.float32, torch.bfloat16, ...
            if is_device_name(expr.attr.value):
                return True
            # torch.accelerator.current_accelerator().type
            return expr.attr.value == "type" and "accelerator" in context.code(expr.value)
        return False


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


def _strict_union(parts: list[Optional[frozenset]]) -> Optional[frozenset]:
    if not parts or any(p is None for p in parts):
        return None
    out: frozenset = frozenset()
    for part in parts:
        out |= part  # type: ignore[operator]
    return out


def element_at(value: cst.BaseExpression, index: int, size: int) -> Optional[cst.BaseExpression]:
    elements = value.elements  # type: ignore[attr-defined]
    if len(elements) != size or any(isinstance(e, cst.StarredElement) for e in elements):
        return None
    return elements[index].value


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
        if is_builtin(context, func, "enumerate"):
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                return _match_iteration(context, iterable.args[0].value, target.elements[1].value)
            return []
        if is_builtin(context, func, "zip"):
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(iterable.args):
                pairs = []
                for arg, element in zip(iterable.args, target.elements):
                    pairs.extend(_match_iteration(context, arg.value, element.value))
                return pairs
            return []
        if last_name(func) in _TQDM and (context.qualname(iterable) or "").startswith(("tqdm", "rich")):
            return _match_iteration(context, iterable.args[0].value, target)
    return [(iterable, target)]


_PIN_MEMORY_AT = 7

# One file away at most when following a parameter to the files that call its function.
_REMOTE_HOPS = [0]


@dataclass(frozen=True, repr=False)
class Remote:
    """A DataLoader(...) built in another file of the project (`flow` is that file's)."""

    flow: Flow
    call: cst.Call


@dataclass(frozen=True, repr=False)
class CallResult:
    """What a call, in `flow`'s file, of a function of another project file returns (element `index` of a
    returned tuple): `get_loader(args)`."""

    flow: Flow
    call: cst.Call
    index: Optional[int]

    def resolve(self) -> Optional[list[Remote]]:
        """The DataLoader(...) calls of the other file the function returns, or None when not certain."""
        found = project.imported(self.flow.context, self.call.func)
        function = found[0].definition(found[1]) if found is not None else None
        if not isinstance(function, cst.FunctionDef):
            return None
        there = found[0].model.loaders  # type: ignore[index]
        out: list[Remote] = []
        for ret in returns_of(function):
            value = ret.value
            if self.index is not None:
                if isinstance(value, cst.Name):
                    value = there.context.assigned_value(value) or value
                if not isinstance(value, (cst.Tuple, cst.List)) or self.index >= len(value.elements):
                    return None
                value = value.elements[self.index].value
            loaders = there.loaders_of(value) if value is not None else None
            if loaders is None:
                return None
            out.extend(Remote(there, call) for call in loaders)
        return out or None


def _root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What `expr` is a view or conversion of: `next(it)[0].float()` -> `next(it)`."""
    while True:
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SAME_TENSOR:
            expr = expr.func.value
        else:
            return expr


_LOOPS = (cst.For, cst.While)


def _enclosing_loops(context: Context, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The `for`/`while` statements around `node` within its own function, innermost first."""
    loops = []
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            break
        if isinstance(ancestor, _LOOPS):
            loops.append(ancestor)
    return loops


def _next_of(context: Context, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The iterator `next(it)` or `it.__next__()` advances."""
    if is_builtin(context, call.func, "next") and call.args and not has_star_args(call):
        return call.args[0].value
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "__next__" and not call.args:
        return call.func.value
    return None


def _param_for(context: Context, function: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> Optional[cst.Name]:
    """The name of the parameter of `function` that `arg` of `call` is passed to."""
    params = [*function.params.posonly_params, *function.params.params, *function.params.kwonly_params]
    if context.enclosing(function, cst.ClassDef) is not None and not _is_static(function):
        params = params[1:]
    if arg.keyword is not None:
        matches = [p for p in params if p.name.value == arg.keyword.value]
    else:
        index = [a for a in call.args if not a.keyword].index(arg)
        matches = params[index : index + 1] if index < len(function.params.posonly_params) + len(function.params.params) else []
    return matches[0].name if matches else None


def _argument_for(
    context: Context, function: cst.FunctionDef, call: cst.Call, param: str
) -> Optional[cst.BaseExpression]:
    """The expression `call` passes for `function`'s parameter `param`."""
    params = [*function.params.posonly_params, *function.params.params]
    if context.enclosing(function, cst.ClassDef) is not None and not _is_static(function):
        params = params[1:]
    names = [p.name.value for p in params]
    position = names.index(param) if param in names else None
    arg = argument(call, param, position)
    return arg.value if arg is not None else None


def flow(context: Context) -> Flow:
    """The shared loader analysis of this file (call it from `leave_Module`, when every parent is known)."""
    return context.shared(Flow)
