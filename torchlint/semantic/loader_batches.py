"""Where a loader's batches are read once per step: loops over it (directly, through `iter`, `tqdm` and
generators), `next(it)` inside a loop, and loaders built in another file of the project (`Remote`,
`CallResult`) or passed in from one."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.calls import has_star_args
from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants
from torchlint.semantic import project
from torchlint.semantic.call_arguments import passed_for
from torchlint.semantic.functions import is_generator, method_named, returns_of
from torchlint.semantic.loader_calls import (
    TQDM,
    argument_for,
    element_at,
    is_builtin,
    match_iteration,
    next_of,
    step_loop_of_read,
    strict_union,
)
from torchlint.semantic.loader_entries import entry_key
from torchlint.semantic.loader_exemptions import after_an_exit, waits_for_a_person

if TYPE_CHECKING:
    from torchlint.semantic.loaders import Flow


# One file away at most when following a parameter to the files that call its function.
_REMOTE_HOPS = [0]


@dataclass(frozen=True, repr=False)
class Remote:
    """A DataLoader(...) built in another file of the project (`flow` is that file's)."""

    flow: Flow
    call: cst.Call


@dataclass(frozen=True, repr=False)
class ImportedLoader:
    """A DataLoader(...) bound at the top level of another project file and imported by name
    (`from data import train_loader`): the same loader for every file that imports it."""

    path: str  # the real path of the file that builds it
    name: str

    def resolve(self) -> Optional[list[Remote]]:
        """The DataLoader(...) calls the name is bound to, or None when not certain."""
        there = project.summary(self.path)
        if there is None:
            return None
        values = [
            statement.body[0].value
            for statement in there.context.module.body
            if isinstance(statement, cst.SimpleStatementLine)
            and isinstance(statement.body[0], cst.Assign)
            and any(isinstance(t.target, cst.Name) and t.target.value == self.name for t in statement.body[0].targets)
        ]
        loaders = there.model.loaders.loaders_of(values[0]) if len(values) == 1 else None
        return [Remote(there.model.loaders, call) for call in loaders] if loaders else None


# The index of a `CallResult` that stands for any element of a returned dict or list of loaders
# (`loaders = build_loaders(cfg)` then `for x, y in loaders["train"]:`).
HELD = -1


@dataclass(frozen=True, repr=False)
class CallResult:
    """What a call, in `flow`'s file, of a function of another project file returns (element `index` of a
    returned tuple, or `HELD`: an element of a returned dict or list): `get_loader(args)`."""

    flow: Flow
    call: cst.Call
    index: Optional[int]
    key: Optional[str] = None  # with `HELD`: the literal key read (`loaders["train"]`), None for any

    def resolve(self) -> Optional[list[Remote]]:
        """The DataLoader(...) calls of the other file the function returns, or None when not certain."""
        target = self.flow.imported_function(self.call)
        if target is None:
            return None
        there, function = target[0].model.loaders, target[1]
        out: list[Remote] = []
        for ret in returns_of(function):
            value = ret.value
            if self.index == HELD:
                entries = there.dict_entry(value, self.key) if value is not None and self.key is not None else None
                elements = entries if entries is not None else there._elements(value, 0) if value is not None else None
                loaders = there._union(elements, 0) if elements else None
                if loaders is None:
                    return None
                out.extend(Remote(there, call) for call in loaders)
                continue
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


class LoaderBatches:
    """Where a loader's batches are read once per step, in this file and across files (part of `Flow`)."""

    def loops_over(self, loader: cst.Call) -> list[tuple[cst.For, cst.BaseExpression]]:
        """(for-loop, the part of its target that holds the batch) for each loop iterating `loader`."""
        if not self._loops_memo:
            self._loops_memo[-1] = []
            for loop in self.fors:
                for source, target in match_iteration(self.context, loop.iter, loop.target):
                    for found in self.loaders_of(source) or ():
                        self._loops_memo.setdefault(id(found), []).append((loop, target))
        return self._loops_memo.get(id(loader), [])

    def batch_reads(self, loader: object) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
        """(region, batch) for each place the loader's batches are read once per step: the body of a loop
        over it (directly, through `iter(loader)`, or through a generator of this file that yields its
        items, such as `infiniteloop(loader)`) with the loop's target, and the body of the loop around a
        `next(it)` with the name it is assigned to (or the `next(...)` call itself when used inline).
        `loader` is a DataLoader(...) call of this file, or a `Remote` or `CallResult` (see `batch_sources`)."""
        if self._reads is None:
            self._reads = {}
            for loop in self.fors:
                if waits_for_a_person(self.context, loop.body) or after_an_exit(self.context, loop):
                    continue  # a viewer (one batch per key press), or a loop that never runs
                for source, target in match_iteration(self.context, loop.iter, loop.target):
                    self._record_read(source, loop.body, target)
            for call in [*self.calls_by_name.get("next", ()), *self.calls_by_name.get("__next__", ())]:
                iterator = next_of(self.context, call)
                if iterator is None:
                    continue
                loop = step_loop_of_read(self.context, call)
                if loop is None or waits_for_a_person(self.context, loop.body) or after_an_exit(self.context, call):
                    continue  # one batch read once, to look at, or one every so many steps
                parent = self.context.parent(call)
                target: cst.BaseExpression = call
                if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and parent.value is call:
                    target = parent.targets[0].target
                self._record_read(iterator, loop.body, target)
            self._record_wrapper_reads()
        found = self._reads.get(loader, [])
        if isinstance(loader, CallResult) and loader.key is not None:
            found = found + self._reads.get(replace(loader, key=None), [])  # `loaders[phase]` reads every entry
        return found

    def _record_wrapper_reads(self) -> None:
        """`batch = batch_loader.next()` in a step loop, where `batch_loader = InfiniteDataLoader(...)` is a
        class of this file whose method returns `next(self.data_iter)`: a read of the iterator it advances."""
        for calls in self.calls_by_name.values():
            for call in calls:
                iterator = self._wrapped_iterator(call)
                loop = step_loop_of_read(self.context, call) if iterator is not None else None
                if loop is None or waits_for_a_person(self.context, loop.body) or after_an_exit(self.context, call):
                    continue
                parent = self.context.parent(call)
                target: cst.BaseExpression = call
                if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and parent.value is call:
                    target = parent.targets[0].target
                self._record_read(iterator, loop.body, target)  # type: ignore[arg-type]

    def _wrapped_iterator(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """The iterator whose `next(...)` the method `call` runs returns, for an instance of a class of this file."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return None
        built = self.context.assigned_value(func.value)
        bindings = self.context.lookup(built.func) if isinstance(built, cst.Call) and isinstance(built.func, cst.Name) else None
        if not bindings or len(bindings) != 1 or not isinstance(bindings[0].node, cst.ClassDef):
            return None
        method = method_named(bindings[0].node, func.attr.value)
        if method is None:
            return None
        iterators = []
        for ret in returns_of(method):
            value = ret.value
            if isinstance(value, cst.Name):
                value = self.context.assigned_value(value) or next(
                    (b.value for b in self.context.lookup(value) or () if b.kind == "assign"), None
                )
            iterator = next_of(self.context, value) if isinstance(value, cst.Call) else None
            if iterator is None:
                return None
            iterators.append(iterator)
        return iterators[0] if iterators else None

    def _record_read(self, source: cst.BaseExpression, body: cst.CSTNode, target: cst.BaseExpression) -> None:
        """Record that `body` reads the batches of every loader `source` draws from, into `target`."""
        # other files are asked only about loops that copy what they read to an accelerator
        self._remote = bool(self.transfers(body, target))
        try:
            found_sources = self.batch_sources(source) or ()
        finally:
            self._remote = False
        for found in found_sources:
            self._reads.setdefault(found, []).append((body, target))

    def read_by_training_step(self, loader: object) -> bool:
        """Some loop of this file that reads the loader's batches trains: it runs a backward pass or an
        optimizer step, itself or through a function of this file it calls."""
        from torchlint.semantic import loops  # loops asks about values, which ask about loaders

        for region, _ in self.batch_reads(loader):
            loop = self.context.parent(region)
            if isinstance(loop, (cst.For, cst.While)) and loops.is_training_loop(self.context, loop):
                return True
            for call in descendants(region):
                function = self.function_called(call) if isinstance(call, cst.Call) else None
                if function is not None and any(
                    isinstance(n, cst.Attribute) and n.attr.value in ("backward", "step") for n in descendants(function)
                ):
                    return True
        return False

    def batch_sources(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[frozenset]:
        """The DataLoader(...) calls whose batches iterating `expr` yields: `loaders_of`, and also through
        `iter(loader)` and generators of this file that loop over a loader they are given."""
        found = self.loaders_of(expr)
        if found is not None or depth > 6:
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
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            # `self.train_loader`, bound to a loader of another file, or unpacked from a project call's result
            cls = context.enclosing(expr, cst.ClassDef)
            key = (id(cls), expr.attr.value)
            values, unpacked = self.self_assigns.get(key, []), self.self_unpacked.get(key, [])
            if cls is None or not (values or unpacked):
                return None
            parts = [self.batch_sources(v, depth + 1) for v in values]
            parts += [self._unpacked_result(a, expr.attr.value, attribute=True, depth=depth + 1) for a in unpacked]
            return strict_union(parts)
        if isinstance(expr, cst.Name):
            parts = []
            for binding in self._reaching_at_top(expr, context.lookup(expr) or []):
                if binding.kind == "assign" and binding.value is not None:
                    parts.append(self.batch_sources(binding.value, depth + 1))
                elif binding.kind == "param":
                    found = self._param_loaders(binding.node, depth)
                    parts.append(found if found is not None else self._param_sources(binding.node, depth))
                elif isinstance(binding.node, cst.Assign):
                    parts.append(self._unpacked_result(binding.node, expr.value, depth=depth + 1))
                elif binding.kind == "import" and self._remote:
                    parts.append(self._imported_loader(expr))
                elif isinstance(binding.node, cst.WithItem):
                    parts.append(self.batch_sources(binding.node.item, depth + 1))  # `with tqdm(...) as bar:`
                elif isinstance(binding.node, cst.For) and isinstance(binding.node.target, cst.Name):
                    # `for it in iterators: x, y = next(it)`: each element of a list of loaders or their iterators
                    elements = self._elements(binding.node.iter, depth + 1)
                    if not elements:
                        return None
                    parts.extend(self.batch_sources(e, depth + 1) for e in elements)
                else:
                    return None
            return strict_union(parts)
        if isinstance(expr, cst.Subscript) and self._remote:
            # `loaders["train"]` where `loaders = build_loaders(cfg)` of another file returns a dict of loaders
            held = self._held_in(expr.value)
            return frozenset([CallResult(self, held, HELD, entry_key(context, expr))]) if held is not None else None
        if isinstance(expr, cst.Call) and self._remote and self.function_called(expr) is None and self.imported_function(expr):
            # `loader = get_loader(args)` of another file, or `data.train_dataloader()` of a class of another file
            return frozenset([CallResult(self, expr, None)])
        if not isinstance(expr, cst.Call) or not expr.args or has_star_args(expr):
            return None
        if is_builtin(context, expr.func, "iter") and len(expr.args) == 1:
            return self.batch_sources(expr.args[0].value, depth + 1)
        if is_builtin(context, expr.func, "enumerate") or (
            last_name(expr.func) in TQDM and (context.qualname(expr) or "").startswith(("tqdm", "rich"))
        ):
            return self.batch_sources(expr.args[0].value, depth + 1)  # `tqdm(enumerate(loader))`
        function = self.function_called(expr)
        if function is not None and not is_generator(function) and self._remote:
            return self._returned_sources(function, None, 0, depth + 1)  # `loader = self.get_loader()`
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
                arg = argument_for(context, function, expr, iterated.value)
                if arg is not None:
                    parts.append(self.batch_sources(arg, depth + 1))
        return strict_union(parts) if parts else None

    def _held_in(self, container: cst.BaseExpression) -> Optional[cst.Call]:
        """The call of another project file's function that `container` (a name or `self.<attr>`, bound once)
        holds the result of."""
        if isinstance(container, cst.Name):
            values = [self.context.assigned_value(container)]
        elif isinstance(container, cst.Attribute) and isinstance(container.value, cst.Name) and container.value.value == "self":
            cls = self.context.enclosing(container, cst.ClassDef)
            values = list(self.self_assigns.get((id(cls), container.attr.value), [])) if cls is not None else []
        else:
            return None
        if len(values) != 1 or not isinstance(values[0], cst.Call):
            return None
        call = values[0]
        return call if self.function_called(call) is None and self.imported_function(call) else None

    def _unpacked_result(
        self, assign: cst.Assign, name: str, attribute: bool = False, depth: int = 0
    ) -> Optional[frozenset]:
        """`train_loader, test_loader = data_setup.create_dataloaders(...)`: element `name` (with `attribute`,
        `self.name`) of a project call."""
        call = assign.value
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if not (isinstance(call, (cst.Call, cst.Tuple, cst.List)) and isinstance(target, (cst.Tuple, cst.List))):
            return None
        if any(isinstance(e, cst.StarredElement) for e in target.elements):
            return None
        kind = cst.Attribute if attribute else cst.Name
        index = next(
            (
                i
                for i, e in enumerate(target.elements)
                if isinstance(e.value, kind) and (e.value.attr if attribute else e.value).value == name  # type: ignore[union-attr]
            ),
            None,
        )
        if index is not None and isinstance(call, (cst.Tuple, cst.List)):
            # `train_iter, test_iter = iter(train_loader), iter(test_loader)`
            element = element_at(call, index, len(target.elements))
            return self.batch_sources(element, depth) if element is not None else None
        if index is None or not self._remote:
            return None
        function = self.function_called(call)  # type: ignore[arg-type]
        if function is not None:
            # `data_set, data_loader = self._get_data(flag)`: element `index` of what this file's function returns
            return self._returned_sources(function, index, len(target.elements), depth)
        if not project.imported(self.context, call.func):  # type: ignore[union-attr]
            return None
        return frozenset([CallResult(self, call, index)])

    def _returned_sources(
        self, function: cst.FunctionDef, index: Optional[int], size: int, depth: int = 0
    ) -> Optional[frozenset]:
        """`batch_sources` of what a function of this file returns (element `index` of a returned tuple)."""
        parts: list[Optional[frozenset]] = []
        for ret in returns_of(function):
            value = ret.value
            if index is not None:
                if isinstance(value, cst.Name):
                    assigned = self.context.assigned_value(value)
                    value = assigned if isinstance(assigned, (cst.Tuple, cst.List)) else value
                value = element_at(value, index, size) if isinstance(value, (cst.Tuple, cst.List)) else None
            parts.append(self.batch_sources(value, depth) if value is not None else None)
        return strict_union(parts) if parts else None

    def imported_function(self, call: cst.Call) -> Optional[tuple[project.ModuleSummary, cst.FunctionDef]]:
        """The function of another project file a call runs: one imported from it (`get_loader(args)`), or a
        method of an instance of a class imported from it (`data = CIFARData(args)`, `data.train_dataloader()`)."""
        found = project.imported(self.context, call.func)
        definition = found[0].definition(found[1]) if found is not None else None
        if found is not None and isinstance(definition, cst.FunctionDef):
            return found[0], definition
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return None
        bindings = self.context.lookup(func.value) or []
        value = bindings[0].value if len(bindings) == 1 and bindings[0].kind == "assign" else None
        if not isinstance(value, cst.Call) or self.function_called(value) is not None:
            return None
        found = project.imported(self.context, value.func)
        cls = found[0].definition(found[1]) if found is not None else None
        method = method_named(cls, func.attr.value) if isinstance(cls, cst.ClassDef) else None
        return (found[0], method) if found is not None and method is not None else None

    def _imported_loader(self, name: cst.Name) -> Optional[frozenset]:
        """`from data import train_loader`: a loader bound at the top level of another project file."""
        found = project.imported(self.context, name)
        if found is None or found[0].definition(found[1]) is not None:
            return None
        return frozenset([ImportedLoader(os.path.realpath(found[0].path), found[1])])

    def _param_sources(self, param: cst.CSTNode, depth: int) -> Optional[frozenset]:
        """`batch_sources` of what this file's calls pass for a parameter, or, when none does, the files
        that import this one."""
        passed = passed_for(self.context, param, elsewhere=False, every=True)  # type: ignore[arg-type]
        if passed:
            return strict_union([self.batch_sources(v, depth + 1) for _, v in passed])
        return self._remote_param(param)

    def _remote_param(self, param: cst.CSTNode) -> Optional[frozenset]:
        """The loaders that files importing this one pass for a parameter of a top-level function or of the
        constructor of a top-level class (`Trainer(model, loader)` runs `__init__(self, model, loader)`)."""
        from torchlint.semantic.model import semantic_model

        function = self.context.enclosing(param, cst.FunctionDef) if isinstance(param, cst.Param) else None
        if not isinstance(function, cst.FunctionDef) or not self._called_from_importers(function):
            return None
        if not self._remote or self.call_sites(function) or _REMOTE_HOPS[0] >= 1:
            return None  # called here too (and that was not decided), or already one file away
        _REMOTE_HOPS[0] += 1
        try:
            parts: list[Optional[frozenset]] = []
            for there, value in passed_for(self.context, param, every=True):  # type: ignore[arg-type]
                caller = semantic_model(there).loaders
                caller._remote = True
                try:
                    found = caller.batch_sources(value)
                finally:
                    caller._remote = False
                if found is None:
                    return None
                parts.append(frozenset(Remote(caller, f) if isinstance(f, cst.Call) else f for f in found))
        finally:
            _REMOTE_HOPS[0] -= 1
        return strict_union(parts)

    def _called_from_importers(self, function: cst.FunctionDef) -> bool:
        """Other files may call `function`: a top-level function, or the constructor of a top-level class."""
        if function in self.context.module.body:
            return True
        cls = self.context.enclosing(function, cst.ClassDef)
        return function.name.value == "__init__" and cls in self.context.module.body

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
            elements = self._elements(ret.value, 0) if ret.value is not None else None
            if elements and loader in (self._union(elements, 0) or ()):
                return function.name.value, HELD  # `return {"train": DataLoader(...), "val": ...}`
        return None

    def pinned_options(self, source: object) -> Optional[frozenset]:
        """The `pin_memory` values a loader (of this file, or a `Remote`/`CallResult` one) may have."""
        if isinstance(source, cst.Call):
            return self.pin_options(source)
        if isinstance(source, Remote):
            return source.flow.pin_options(source.call)
        if isinstance(source, (CallResult, ImportedLoader)):
            loaders = source.resolve()
            if not loaders:
                return None
            out: set = set()
            for loader in loaders:
                options = loader.flow.pin_options(loader.call)
                if options is None:
                    return None
                out |= options
            return frozenset(out)
        return None

    def batches_on_device(self, source: object) -> bool:
        """A loader (of this file, or a `Remote`/`CallResult` one) whose batches may already be on an
        accelerator when they come out of it (see `device_batches`)."""
        from torchlint.semantic.device_batches import batches_on_device

        if isinstance(source, cst.Call):
            return batches_on_device(self.context, source)
        if isinstance(source, Remote):
            return batches_on_device(source.flow.context, source.call)
        if isinstance(source, (CallResult, ImportedLoader)):
            return any(batches_on_device(r.flow.context, r.call) for r in source.resolve() or ())
        return False

    def sources_read(self) -> list[object]:
        """Every loader whose batches this file reads (after `batch_reads` has indexed them)."""
        self.batch_reads(None)
        return list(self._reads or ())
