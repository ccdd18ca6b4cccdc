"""Loaders that cost nothing per step even in the main process: the ones only looked at (`len(loader)`,
`next(iter(loader))` outside any loop, a notebook cell showing one), and the ones of a program that puts
nothing on an accelerator."""

from __future__ import annotations

import re

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.calls import has_star_args, has_star_kwargs, keyword, positional
from torchlint.lint.context import Context
from torchlint.lint.walk import descendants
from torchlint.semantic import project
from torchlint.semantic.functions import method_named
from torchlint.semantic.loader_calls import enclosing_loops, is_builtin, is_transfer, param_for

if TYPE_CHECKING:
    from torchlint.semantic.loaders import Flow


# A padding token index given to a collate function: its batches are token ids.
_TOKEN_PADDING = re.compile(r"\bpad(ding)?_(idx|index|id|token_id)\b|padded_collate")


class LoaderExemptions:
    """Loaders whose batches are only looked at, and programs that never use an accelerator (part of `Flow`)."""

    def only_peeked(self, loader: cst.Call) -> bool:
        """The name the loader is bound to is read, and only to look at a batch or two, never per step:
        `next(iter(loader))` or `it = iter(loader)` then `next(it)` outside any loop, `len(loader)`, a
        notebook cell showing it, or handed to a function of this file that does no more with it; or the
        loader is returned, and every file calling the function that returns it only looks at it."""
        parent = self.context.parent(loader)
        if isinstance(parent, cst.Return):
            return self._peeked_by_importers(loader)  # `def preview_loader(ds): return DataLoader(ds, ...)`
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
            return False
        target = parent.targets[0].target
        scope = self.context.enclosing(loader, cst.FunctionDef) or self.context.module
        uses = [n for n in self._uses(target.value) if n is not target and self._within(n, scope)]
        returned = [n for n in uses if self.context.enclosing(n, cst.Return) is not None]
        if returned and not self._peeked_by_importers(loader):
            return False
        return bool(uses) and all(n in returned or self._peek(n, 0) for n in uses)

    def only_shown(self, loader: cst.Call) -> bool:
        """Every loop over the loader waits for a person on each trip (a viewer: `plt.show()`, `input()`,
        `cv2.waitKey(0)`), and some loop iterates it."""
        loops = self.loops_over(loader)
        return bool(loops) and all(waits_for_a_person(self.context, loop.body) for loop, _ in loops)

    def _peeked_by_importers(self, loader: cst.Call) -> bool:
        """Every file calling the function that returns the loader only looks at it (`get_loaders(args)`,
        then `model.evaluate(test_loader)` that never iterates it)."""
        returned = self.returned_by(loader)
        sites = project.call_sites(self.context.source.path, returned[0]) if returned is not None else []
        return bool(sites) and all(site.summary.model.loaders.result_peeked(site.call, returned[1]) for site in sites)  # type: ignore[index]

    def result_peeked(self, call: cst.Call, index: Optional[int]) -> bool:
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
            holder = context.parent(call)
            if isinstance(holder, cst.Arg):
                # `next(iter(loader))`, in a loop too: each fresh iterator yields one batch, and worker
                # processes would only start again for every one of them
                outer = context.parent(holder)
                return isinstance(outer, cst.Call) and is_builtin(context, outer.func, "next")
            if enclosing_loops(context, call):
                return False
            if isinstance(holder, cst.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0].target, cst.Name):
                name = holder.targets[0].target  # `it = iter(loader)`, then `next(it)`
                scope = context.enclosing(call, cst.FunctionDef) or context.module
                reads = [n for n in self._uses(name.value) if n is not name and self._within(n, scope) and self._reads_binding(n, holder)]
                return bool(reads) and all(self._next_once(n) for n in reads)
            return False
        if depth > 1 or has_star_args(call) or has_star_kwargs(call):
            return False
        function = self.function_called(call)
        callees = [(self, function)] if function is not None else self._foreign_callees(call)
        if not callees:
            return False
        for flow_there, callee in callees:
            name = param_for(flow_there.context, callee, call, parent)
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
            if isinstance(node, cst.ClassDef):
                node = method_named(node, "__init__")  # `Trainer(model, train_dataloader=loader)`
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

    def _reads_binding(self, use: cst.Name, assign: cst.Assign) -> bool:
        """`use` may read the value `assign` binds (not a later `it = iter(other)` in a loop below)."""
        parent = self.context.parent(use)
        if isinstance(parent, cst.AssignTarget) and parent.target is use:
            return False  # another binding of the name
        reaching = self._reaching_at_top(use, self.context.lookup(use) or [])
        return not reaching or any(b.node is assign or self._contains(assign, b.node) for b in reaching)

    def _next_once(self, use: cst.Name) -> bool:
        holder = self.context.parent(use)
        call = self.context.parent(holder) if isinstance(holder, cst.Arg) else None
        return (
            isinstance(call, cst.Call)
            and is_builtin(self.context, call.func, "next")
            and not enclosing_loops(self.context, call)
        )

    def collate_on_device(self, loader: cst.Call) -> bool:
        """The loader's `collate_fn` is a function of this file that moves the batch to an accelerator: its
        batches arrive on the GPU, so there is nothing to pin, and worker processes could not run it."""
        arg = keyword(loader, "collate_fn")
        value = arg.value if arg is not None else None
        if isinstance(value, cst.Call) and (self.context.qualname(value) or "") == "functools.partial" and value.args:
            value = value.args[0].value  # `collate_fn=partial(collate, device=device)`
        body: Optional[cst.CSTNode] = None
        if isinstance(value, cst.Lambda):
            body = value.body
        elif isinstance(value, cst.Name):
            bindings = self.context.lookup(value) or []
            if len(bindings) == 1 and isinstance(bindings[0].node, cst.FunctionDef):
                body = bindings[0].node
        elif isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "self":
            cls = self.context.enclosing(value, cst.ClassDef)
            body = method_named(cls, value.attr.value) if cls is not None else None
        return body is not None and any(
            isinstance(n, cst.Call) and is_transfer(n) and self.to_accelerator(n) for n in descendants(body)
        )

    def collates_token_ids(self, loader: cst.Call) -> bool:
        """The loader's `collate_fn` pads sequences of token ids to a padding index (`get_collate_fn(pad_index)`,
        `partial(padded_collate_sft, padding_idx=tokenizer.pad_id)`): a few hundred KB of integers per batch,
        where a pinned copy saves microseconds on a step of a language model."""
        arg = keyword(loader, "collate_fn")
        value = arg.value if arg is not None else None
        if isinstance(value, cst.Name):
            value = self.context.assigned_value(value) or value  # `collate_fn = get_collate_fn(pad_index)`
        return value is not None and _TOKEN_PADDING.search(self.context.code(value)) is not None

    def callers_on_accelerator(self, loader: cst.Call) -> Optional[bool]:
        """Whether the program around the loader puts anything on an accelerator: the files calling the
        function that returns it or, for a loader bound at the top level of the file, the files importing
        it, and the project files they import (None when no project file uses it)."""
        returned = self.returned_by(loader)
        sites = project.call_sites(self.context.source.path, returned[0]) if returned is not None else []
        users = [site.summary for site in sites]
        if not users and self.context.enclosing(loader, cst.FunctionDef, cst.ClassDef) is None:
            # `from data import train_loader`
            users = [project.summary(path) for path in project.importers(self.context.source.path)]
        if not users or any(user is None for user in users):
            return None  # not used by another file, or used by one that cannot be read
        return any(_program_on_accelerator(user) for user in users)  # type: ignore[arg-type]


    def cpu_program_trains(self) -> bool:
        """Neither this file nor any project file it imports (at any depth) or that imports it shows an
        accelerator, and one of them trains (runs a backward pass): this file's loaders feed a CPU-only
        training program, wherever its loop is (`train_one_epoch(model, loader)` of engine.py)."""
        return self.cpu_program() and any(".backward(" in t for t in self._program_texts())

    def cpu_program(self) -> bool:
        """Neither this file nor any project file it imports (at any depth) or that imports it shows an
        accelerator."""
        if self._cpu_program is None:
            self._cpu_program = not any(_shows_accelerator(t) for t in self._program_texts())
        return self._cpu_program

    def _program_texts(self) -> list[str]:
        if self._program_sources is None:
            source = self.context.source
            self._program_sources = [source.text]
            for path in project.dependencies(source.path, source.text):
                text = project.read_text(path)
                self._program_sources.append(text if text is not None else ".cuda(")  # unreadable: cannot tell
        return self._program_sources


def _shows_accelerator(text: str) -> bool:
    from torchlint.semantic.placement import uses_accelerator

    return uses_accelerator(text)


def _program_on_accelerator(user: project.ModuleSummary) -> bool:
    """The file, or a project file it imports, shows an accelerator (True when one cannot be read)."""
    from torchlint.semantic.placement import uses_accelerator

    if user.model.uses_accelerator:
        return True
    source = user.context.source
    for path in project.dependencies(source.path, source.text):
        text = project.read_text(path)
        if text is None or uses_accelerator(text):
            return True  # shown, or cannot tell
    return False


def waits_for_a_person(context: Context, region: cst.CSTNode) -> bool:
    """The region stops for someone on every run: `cv2.waitKey(0)`, `input()`, a blocking `plt.show()`.
    A viewer that shows one batch per key press is not held back by how batches are loaded or copied."""
    for node in descendants(region):
        if not isinstance(node, cst.Call):
            continue
        name = context.qualname(node) or ""
        if name == "cv2.waitKey":
            given = positional(node)
            delay = context.literal(given[0].value) if given else 0
            if delay == 0:
                return True  # 0: wait for a key, however long it takes
        elif is_builtin(context, node.func, "input"):
            return True
        elif name in ("matplotlib.pyplot.show", "matplotlib.pyplot.waitforbuttonpress"):
            block = keyword(node, "block")
            if block is None or context.literal(block.value) is not False:
                return True
    return False


def after_an_exit(context: Context, node: cst.CSTNode) -> bool:
    """`node` follows a `return` or `raise` of its own block or an enclosing one in the same function
    (`def test(self): return` left above an old evaluation loop): code that never runs."""
    child = node
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Module)):
            return False
        if isinstance(ancestor, cst.IndentedBlock):
            for statement in ancestor.body:
                if statement is child:
                    break
                if isinstance(statement, cst.SimpleStatementLine) and any(
                    isinstance(s, (cst.Return, cst.Raise)) for s in statement.body
                ):
                    return True
        child = ancestor
    return False
