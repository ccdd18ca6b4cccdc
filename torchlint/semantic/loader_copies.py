"""Where a loader's batches go: their copies to an accelerator (`.to(device)`, `.cuda()`, `.type(cuda
tensor type)`, `buffer.copy_(batch)`, `to_device(batch, device)` helpers), in the loop that reads them,
in functions of this file they are handed to, and in files that import the loader."""

from __future__ import annotations

import os
from typing import Optional

import libcst as cst

from torchlint.lint.calls import has_star_args, has_star_kwargs, keyword, positional
from torchlint.lint.context import UNKNOWN, Context
from torchlint.lint.names import last_name, target_names
from torchlint.lint.walk import descendants
from torchlint.semantic import project
from torchlint.semantic.call_arguments import passed_for
from torchlint.semantic.devices import is_device_name
from torchlint.semantic.functions import is_generator, method_named, returns_of
from torchlint.semantic.loader_batches import HELD, CallResult, ImportedLoader
from torchlint.semantic.loader_calls import (
    TQDM,
    element_at,
    is_builtin,
    is_transfer,
    match_iteration,
    next_of,
    param_for,
    step_loop_of_read,
)
from torchlint.semantic.values import value_kinds

_TENSOR_VIEWS = frozenset({"items", "values"})


SAME_TENSOR = frozenset({"float", "long", "half", "double", "int", "bool", "contiguous", "bfloat16"})


# Reshapes of a batch: `images.reshape(-1, 28 * 28).to(device)` still copies the batch (a view of its memory).
_RESHAPES = frozenset({"reshape", "view", "flatten", "unsqueeze", "squeeze", "permute", "transpose"})


_MOVE_HELPERS = ("to_device", "to_cuda", "to_gpu", "move_to")


_DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel"})


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
            and expr.func.attr.value in (SAME_TENSOR | _TENSOR_VIEWS | _RESHAPES)
        ):
            expr = expr.func.value
            continue
        if isinstance(expr, cst.Call) and last_name(expr.func) == "Variable" and expr.args:
            expr = expr.args[0].value  # `Variable(images).cuda()` in older scripts
            continue
        return None


def _values_target(iterable: cst.BaseExpression, target: cst.BaseExpression) -> cst.BaseExpression:
    """The part of a loop's target that holds the batch's tensors: `value` of `for key, value in batch.items()`."""
    if (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Attribute)
        and iterable.func.attr.value == "items"
        and isinstance(target, (cst.Tuple, cst.List))
        and len(target.elements) == 2
    ):
        return target.elements[1].value
    return target


def _root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What `expr` is a view or conversion of: `next(it)[0].float()` -> `next(it)`."""
    while True:
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SAME_TENSOR:
            expr = expr.func.value
        else:
            return expr


class LoaderCopies:
    """Where a loader's batches go: their copies to an accelerator (part of `Flow`)."""

    def batch_copies(self, loader: object) -> list[cst.Call]:
        """Every copy of the loader's batches to an accelerator, wherever they are read (`batch_reads`)."""
        found: list[cst.Call] = []
        for region, target in self.batch_reads(loader):
            for call in self.transfers(region, target):
                if all(call is not f for f in found):
                    found.append(call)
        return found

    def copies_in_importers(self, loader: cst.Call) -> list[tuple[Context, cst.Call]]:
        """Copies to an accelerator of the loader's batches in the files that call the function returning it,
        or that import it by name when it is bound at the top level of this file."""
        returned = self.returned_by(loader)
        if returned is None:
            return self._copies_where_imported(loader) or self._copies_of_method_result(loader)
        name, index = returned
        function = self.context.enclosing(loader, cst.FunctionDef)
        key = self.returned_key(function, loader) if index == HELD and function is not None else None
        found: list[tuple[Context, cst.Call]] = []
        for site in project.call_sites(self.context.source.path, name):
            caller = site.summary.model.loaders
            result = CallResult(caller, site.call, index, key)
            copies = [(caller.context, c) for c in caller.batch_copies(result)]
            found.extend(copies or caller.copies_in_callees(result))
        return found

    def _copies_of_method_result(self, loader: cst.Call) -> list[tuple[Context, cst.Call]]:
        """Copies in the files that call the method of a top-level class of this file that returns the loader:
        `data.train_dataloader()` where `data = CIFARData(args)`."""
        method = self.context.enclosing(loader, cst.FunctionDef)
        cls = self.context.enclosing(method, cst.ClassDef) if method is not None else None
        if not isinstance(method, cst.FunctionDef) or cls not in self.context.module.body:
            return []
        if not any(loader in (self.loaders_of(r.value) or ()) for r in returns_of(method) if r.value is not None):
            return []
        here = os.path.realpath(self.context.source.path)
        found: list[tuple[Context, cst.Call]] = []
        for site in project.method_call_sites(self.context.source.path, method.name.value):
            caller = site.summary.model.loaders
            target = caller.imported_function(site.call)
            if target is None or os.path.realpath(target[0].path) != here:
                continue  # a method of the same name on something else
            if method_named(target[0].definition(cls.name.value), method.name.value) is not target[1]:  # type: ignore[arg-type]
                continue  # the same method name on another class of this file
            found.extend((caller.context, c) for c in caller.batch_copies(CallResult(caller, site.call, None)))
        return found

    def _copies_where_imported(self, loader: cst.Call) -> list[tuple[Context, cst.Call]]:
        assign = self.context.parent(loader)
        if not (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and self.context.enclosing(loader, cst.FunctionDef, cst.ClassDef) is None
        ):
            return []
        source = ImportedLoader(os.path.realpath(self.context.source.path), assign.targets[0].target.value)
        found: list[tuple[Context, cst.Call]] = []
        for path in project.importers(self.context.source.path):
            importer = project.summary(path)
            if importer is not None:
                found.extend((importer.context, c) for c in importer.model.loaders.batch_copies(source))
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
                        if not isinstance(arg.value, (cst.Name, cst.Subscript, cst.Attribute)) or source not in (self.batch_sources(arg.value) or ()):
                            continue
                        for there, callee in self._foreign_callees(call):
                            param = param_for(there.context, callee, call, arg)
                            if param is not None:
                                found.extend((there.context, c) for c in there.param_copies(callee, param))
        finally:
            self._remote = False
        return found

    def param_copies(self, function: cst.FunctionDef, param: cst.Name) -> list[cst.Call]:
        """Copies to an accelerator of the batches of the loader a function receives as `param` (in a
        constructor, in every method of its class: `self.train_data = train_dataloader`)."""
        found: list[cst.Call] = []
        scope: cst.CSTNode = function
        if function.name.value == "__init__":
            scope = self.context.enclosing(function, cst.ClassDef) or function
        for loop in self.fors:
            if not self._within(loop, scope):
                continue
            for source, target in match_iteration(self.context, loop.iter, loop.target):
                if self._derives(source, param, 0):
                    found.extend(self.transfers(loop.body, target))
        for call in [*self.calls_by_name.get("next", ()), *self.calls_by_name.get("__next__", ())]:
            iterator = next_of(self.context, call)
            loop = step_loop_of_read(self.context, call)
            if iterator is None or loop is None or not self._within(call, scope) or not self._derives(iterator, param, 0):
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
        if depth > 8:
            return False
        if isinstance(expr, cst.Name):
            bindings = self.context.lookup(expr) or []
            if any(b.kind == "param" and b.node.name is param for b in bindings):  # type: ignore[attr-defined]
                return True
            for binding in bindings:
                if binding.kind == "param":
                    # `def iteration(self, epoch, data_loader)` called as `self.iteration(epoch, self.train_data)`
                    passed = passed_for(self.context, binding.node, elsewhere=False, every=True)
                    if any(self._derives(v, param, depth + 1) for _, v in passed):
                        return True
            return any(b.kind == "assign" and b.value is not None and self._derives(b.value, param, depth + 1) for b in bindings)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = self.context.enclosing(expr, cst.ClassDef)
            key = (id(cls), expr.attr.value)
            values = list(self.self_assigns.get(key, [])) if cls is not None else []
            # `self.train_data, self.eval_data = train_loader, eval_loader`
            values += [v for a in self.self_unpacked.get(key, []) if (v := unpacked_into(a, expr.attr.value)) is not None]
            return any(self._derives(v, param, depth + 1) for v in values)
        if isinstance(expr, cst.Call) and expr.args and not has_star_args(expr):
            if any(is_builtin(self.context, expr.func, name) for name in ("iter", "enumerate")) or last_name(expr.func) in TQDM:
                return self._derives(expr.args[0].value, param, depth + 1)
            function = self.function_called(expr)
            if function is not None and is_generator(function):
                return any(self._derives(a.value, param, depth + 1) for a in expr.args)
        return False

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
                elif isinstance(node, (cst.CompFor, cst.For)) and root_name(node.iter, conversions=True) in batch:
                    batch.update(target_names(_values_target(node.iter, node.target)))
            if len(batch) == before:
                break
        found = []
        for node in body:
            if not isinstance(node, cst.Call):
                continue
            if is_transfer(node) and not self._on_imported_module(node):
                receiver = node.func.value  # type: ignore[attr-defined]
                held = root_name(receiver, conversions=True) in batch or (read is not None and _root(receiver) is read)
                if held and self.to_accelerator(node) and not self._already_moved(node):
                    found.append(node)
            elif depth < 2 and batch and (moved := self._handed_to_function(node, batch, depth)):
                found.extend(moved)  # a helper of this file (`batch_to_device(batch, device)`): its own copies
            elif self._helper_transfer(node, batch):
                found.append(node)
                if depth < 2:
                    self._moved_by_imported_function(node, batch, depth)  # keeps its copies for `helper_copies`
            elif (
                self._cast_transfer(node, batch)
                or self._copy_transfer(node, batch)
                or self._scattered(node, batch)
            ):
                found.append(node)
            elif depth < 2 and batch and self._moved_by_imported_function(node, batch, depth):
                found.append(node)
        return found

    def _on_imported_module(self, call: cst.Call) -> bool:
        """`utils.cuda([x, y])`: a function of an imported module named like a transfer, not a tensor's method."""
        receiver = call.func.value  # type: ignore[attr-defined]
        if not isinstance(receiver, cst.Name):
            return False
        bindings = self.context.lookup(receiver) or []
        return bool(bindings) and all(b.kind == "import" for b in bindings)

    def _moved_by_imported_function(self, call: cst.Call, batch: set[str], depth: int) -> bool:
        """A function of another project file moves the batch parts it is given: `x, y = to_device(batch)`
        with `def to_device(batch): return [b.to(device) for b in batch]` in utils.py. Its copies are kept for
        `helper_copies`."""
        if has_star_args(call) or has_star_kwargs(call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
            return False
        if not any(_holds_batch(arg.value, batch) for arg in call.args):
            return False
        found = project.imported(self.context, call.func)
        function = found[0].definition(found[1]) if found is not None else None
        if not isinstance(function, cst.FunctionDef) or is_generator(function):
            return False
        names = _parameters_given(found[0].context, call, function, batch)  # type: ignore[index]
        there = found[0].model.loaders  # type: ignore[index]
        copies = there._find_transfers(function.body, names, None, depth + 1) if names else []
        self._helper_copies[id(call)] = [(found[0].context, c) for c in copies]  # type: ignore[index]
        return bool(copies)

    def helper_copies(self, call: cst.Call) -> list[tuple[Context, cst.Call]]:
        """The copies that a helper of another project file, which `batch_copies` found moving the batch at
        `call`, makes inside (each with the context of its file)."""
        return self._helper_copies.get(id(call), [])

    def _already_moved(self, call: cst.Call) -> bool:
        """`target_var = target.cuda()` after `target = target.cuda()` in the same block: the name already
        holds a GPU tensor, so this call copies nothing."""
        receiver = call.func.value  # type: ignore[attr-defined]
        statement = self.context.enclosing_statement(call)
        block = self.context.parent(statement) if statement is not None else None
        if not isinstance(receiver, cst.Name) or not isinstance(block, cst.IndentedBlock):
            return False
        for earlier in block.body:
            if earlier is statement:
                return False
            assign = earlier.body[0] if isinstance(earlier, cst.SimpleStatementLine) and len(earlier.body) == 1 else None
            if (
                isinstance(assign, cst.Assign)
                and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)
                and assign.targets[0].target.value == receiver.value
                and isinstance(assign.value, cst.Call)
                and is_transfer(assign.value)
                and self.to_accelerator(assign.value)
            ):
                return True
        return False

    def _handed_to_function(self, call: cst.Call, batch: set[str], depth: int) -> list[cst.Call]:
        """The copies a function of this file makes of the batch parts it is given:
        `pred = self._process_one_batch(data, batch_x, batch_y)` where the method moves `batch_x`."""
        if has_star_args(call) or has_star_kwargs(call):
            return []
        function = self.function_called(call)
        if function is None or is_generator(function):
            return []
        names = _parameters_given(self.context, call, function, batch)
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
            if device is not None and (self.context.qualname(value) or "").startswith("torch.") and self.may_be_cuda(device.value, 0):
                return True
            if last_name(value.func) == "Variable" and value.args and isinstance(value.args[0].value, cst.Name):
                if self._cuda_buffer(value.args[0].value, depth + 1):
                    return True
        return False

    def _scattered(self, call: cst.Call, batch: set[str]) -> bool:
        """`outputs = net(images)` where `net = nn.DataParallel(model).cuda()`: DataParallel copies a host batch
        to its GPUs on every call."""
        if not any(a.keyword is None and root_name(a.value, conversions=True) in batch for a in call.args):
            return False
        return self._data_parallel(call.func, 0)

    def _data_parallel(self, expr: cst.BaseExpression, depth: int) -> bool:
        """`expr` holds an `nn.DataParallel` module (possibly moved with `.cuda()` / `.to(device)`)."""
        if depth > 4:
            return False
        if isinstance(expr, cst.Call):
            if self.context.qualname(expr) in _DATA_PARALLEL:
                return True
            return is_transfer(expr) and self._data_parallel(expr.func.value, depth + 1)  # type: ignore[attr-defined]
        if isinstance(expr, cst.Name):
            bindings = self.context.lookup(expr) or []
            chosen = value_kinds(self.context).reaching_binding(expr, bindings) if bindings else None
            return chosen is not None and chosen.kind == "assign" and chosen.value is not None and self._data_parallel(chosen.value, depth + 1)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = self.context.enclosing(expr, cst.ClassDef)
            values = self.self_assigns.get((id(cls), expr.attr.value), []) if cls is not None else []
            return len(values) == 1 and self._data_parallel(values[0], depth + 1)
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
        return device is not None and self.may_be_cuda(device.value, 0)

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
        return self.may_be_cuda(arg.value, 0)

    def may_be_cuda(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Whether `expr` may name a CUDA device (`"cuda:0"`, `torch.device("cuda")`, a name bound to one)."""
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
            return self.may_be_cuda(expr.body, depth + 1) or self.may_be_cuda(expr.orelse, depth + 1)
        if isinstance(expr, (cst.FormattedString, cst.ConcatenatedString)):
            return "cuda" in context.code(expr)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value == "format":
                template = context.literal(func.value)  # `"cuda:{:d}".format(rank)`
                return isinstance(template, str) and template.startswith("cuda")
            name = context.qualname(expr) or ""
            if name == "torch.device":
                return bool(expr.args) and self.may_be_cuda(expr.args[0].value, depth + 1)
            if name.startswith(("torch.cuda.", "torch.accelerator.")):
                return True
            if name.startswith("torch_xla."):
                return False  # `xm.xla_device()`: a TPU takes its copies through XLA, and pinned memory is CUDA's
            last = (last_name(expr.func) or "").lower()
            return is_device_name(last)
        if isinstance(expr, cst.Name):
            if (context.qualname(expr) or "").startswith("torch."):
                return False  # torch.float16 and friends, imported by name
            bindings = context.lookup(expr)
            if bindings and all(b.kind == "assign" for b in bindings):
                return any(self.may_be_cuda(b.value, depth + 1) for b in bindings if b.value is not None)
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
def unpacked_into(assign: cst.Assign, attribute: str) -> Optional[cst.BaseExpression]:
    """The value `self.<attribute>` gets from `self.a, self.b = x, y` (None when the right side is no tuple)."""
    target, value = assign.targets[0].target, assign.value
    if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(value, (cst.Tuple, cst.List)):
        return None
    for index, element in enumerate(target.elements):
        held = element.value
        if isinstance(held, cst.Attribute) and isinstance(held.value, cst.Name) and held.attr.value == attribute:
            return element_at(value, index, len(target.elements))
    return None


def _holds_batch(expr: cst.BaseExpression, batch: set[str]) -> bool:
    """`x`, `x[0].float()`, or a list or tuple written around batch parts (`cuda([imgs, z])`): a helper given it
    is given the batch."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(_holds_batch(e.value, batch) for e in expr.elements)
    return root_name(expr, conversions=True) in batch


def _parameters_given(context: Context, call: cst.Call, function: cst.FunctionDef, batch: set[str]) -> set[str]:
    """The parameters of `function` that `call` hands a batch part to (by position or keyword)."""
    names = set()
    for arg in call.args:
        if _holds_batch(arg.value, batch):
            param = param_for(context, function, call, arg)
            if param is not None:
                names.add(param.value)
    return names
