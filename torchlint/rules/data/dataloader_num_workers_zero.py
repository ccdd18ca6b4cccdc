"""TL101 dataloader-num-workers-zero."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument, has_star_kwargs, positional
from torchlint.lint.context import Context
from torchlint.lint.rule import Fix, FixSafety, Replace, Rule
from torchlint.lint.walk import descendants
from torchlint.rules.data._common import NUM_WORKERS_AT, set_argument
from torchlint.semantic import project
from torchlint.semantic.file_kind import has_main_guard, main_guarded
from torchlint.semantic.loader_calls import MISSING

# Words of a comment (on the line above) that explains a single-process loader.
_REASON = re.compile(
    r"worker|process|pickl|fork|spawn|windows|mac|compat|debug|deadlock|hang|freez|shm|shared.memory|hdf5|"
    r"h5py|lmdb|single|main thread",
    re.IGNORECASE,
)

# Code that reads names by their spelling.
_DYNAMIC_NAMES = re.compile(r"(?<![\w.])(locals|globals|vars|eval|exec)\s*\(")  # not `model.eval()`

# Comments that are tool directives, not explanations.
_PRAGMA = re.compile(r"(noqa|type:|pragma|pylint:|fmt:|torchlint:|expect:)", re.IGNORECASE)


_ITERABLE = (
    "DataLoader reads this IterableDataset in the training process (num_workers=0); workers each run the whole "
    "iterator, so shard it by `torch.utils.data.get_worker_info()` before setting num_workers"
)


class DataloaderNumWorkersZero(Rule):
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
        "Not reported: a `num_workers` that comes through `**kwargs` the linter cannot read (a parameter, a dict "
        "filled from a config; settings given as `**params` are read when `params` is a dict of the same file "
        "changed only by `params.update(...)` or `params[\"key\"] = ...`, and reported when it leaves "
        "`num_workers` out, with the fix adding the keyword, or sets it to 0) or from a value the linter cannot "
        "decide (`args.workers`, a config entry, `os.cpu_count()`); a loader over data already in memory with no "
        "per-item work (a `TensorDataset`, a tensor or NumPy array or a slice of one, a list, such data built "
        "and returned by a function of this or another project file (or one element of a tuple it returns) or "
        "bound at the top level of another project file, or a Dataset class of this or another project file whose "
        "`__getitem__` only indexes data it holds and converts it, with dict lookups at most, also through `if`/`else` "
        "branches (`return self.x[i], self.y[i]` when labels exist); also an "
        "instance built by a classmethod of such a class, `train, dev, vocab = TextDataset.splits(root)`) and "
        "the default `collate_fn` or one that only pads and stacks the items, where worker "
        "processes only add inter-process copies (measured on a 2-core CPU: an epoch over an "
        "in-memory `TensorDataset` took 0.50 s with 2 workers against 0.13 s without); a Hugging Face `datasets` "
        "dataset tokenized ahead of time (`.map(tokenize, batched=True)` or a `.map` with Hugging Face's own "
        "keywords such as `fn_kwargs` or `num_proc`, or `set_format(\"torch\")` / `with_format(\"torch\")`), "
        "batched by the default collate or one that only pads and stacks (also one a factory function of the "
        "file returns), where an item is a row lookup in Arrow tables, unless the file shows items "
        "still decoded on read (image, audio or video columns, `set_transform`, `streaming=True`); a dataset "
        "built by a call that receives a CUDA device (`MyDataset(x, y, device)`, `device=device`), or a Dataset "
        "class (of this or another project file) whose code puts tensors on the GPU, moving each item as it is read "
        "or the data it indexes when it is built: its items "
        "live on the GPU, which worker processes cannot reach; a loader whose `collate_fn` (a function or lambda "
        "of the file, or a `partial` of one) moves the batch to the GPU, which a worker process cannot do; a loader only looked at: read by `next(iter(loader))` "
        "(also once per epoch in a loop: each fresh iterator yields one batch, and workers would start again for "
        "each), or `it = iter(loader)` then `next(it)` outside any loop, measured with `len(loader)`, shown by a "
        "notebook cell, or handed to a function of the file that does no more with it, also when a function returns it "
        "(`return DataLoader(ds, batch_size=16)`) and every file calling it only looks at it; a loader only iterated "
        "by a viewer that waits for a person on every batch (`plt.show()`, `input()`, `cv2.waitKey(0)`); "
        "a loader bound to a name that appears nowhere else in the file (in a function, or in a program "
        "that iterates a loader or trains): it is never used; "
        "a script that iterates the loader (or trains) and shows no sign of a GPU or other accelerator (no "
        "`.cuda()`, `.to(`, `device`, ...), or a loader returned to callers (or, bound at the top level, imported by files) that show none, nor do the project files they import, or "
        "a loader of a program that trains and shows none in this file or any project file it imports or that imports it, wherever its loop is "
        "(`train_one_epoch(model, loader)` of engine.py), or of a notebook that shows none in it or the project files it imports: a CPU-only program, where "
        "workers would compete with the "
        "training threads for the same cores; "
        "test modules; a `DataLoader` that is the project's own class or function (`from package.dataloader import *` "
        "where that module defines `DataLoader`), which sets its workers in its own code; an explicit `num_workers=0` with a comment on "
        "its line, or a comment about workers, processes or the platform on the line above (a deliberate choice: an unpicklable dataset, an "
        "environment that cannot start processes). Silence other deliberate choices with `# noqa: TL101`."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Sets `num_workers=min(8, os.cpu_count() or 1)` and adds `import os`; no fix where the value is a "
        "parameter of the function building the loader (`num_workers=num_workers`, reported when every call "
        "leaves its default of 0 or passes 0): the callers choose it. Unsafe: worker processes need a "
        "picklable dataset and `collate_fn`, each worker holds its own copy of the dataset (and its own random "
        "state), and on Windows and macOS workers re-import the script, so its training code must sit under "
        "`if __name__ == \"__main__\":` (the message says so for a script without that guard)."
    )
    requires = ("DataLoader",)

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.candidates: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not self.semantic.is_dataloader(node):
            return
        if self.semantic.is_test_module or self._project_loader(node):
            return
        if has_star_kwargs(node):
            # `DataLoader(ds, **params)`: reported where `params` is a dict of this file that provably leaves
            # num_workers out or sets it to 0 (read as TL102 reads `pin_memory` there)
            options = self.semantic.loaders.setting_options(node, "num_workers", NUM_WORKERS_AT)
            given = argument(node, "num_workers", position=NUM_WORKERS_AT)
            if options is None or not options <= {MISSING, 0} or given is not None and self._explained(given):
                return
            self.candidates.append(node)
            return
        arg = argument(node, "num_workers", position=NUM_WORKERS_AT)
        if arg is None and len(positional(node)) > NUM_WORKERS_AT:
            return  # passed positionally through *args
        if arg is not None and (self.semantic.loaders.value_options(arg.value) != {0} or self._explained(arg)):
            return  # a non-zero value, one that cannot be decided, or a commented choice
        # (a parameter of the function building the loader counts with what its calls pass, or its default)
        self.candidates.append(node)

    def leave_Module(self, module: cst.Module) -> None:
        if not self.candidates:
            return
        cpu_only = not self.semantic.uses_accelerator
        # Decided once every parent is known: what the dataset is, and how the loader is used later.
        for node in self.candidates:
            data = self.semantic.loaders
            if self.semantic.loads_from_memory(node) or data.only_peeked(node) or data.only_shown(node) or self._never_read(node):
                continue
            if self.semantic.loads_prepared_hf_data(node):
                continue
            if self.semantic.batches_on_device(node):
                continue  # items or batches already on the GPU: a worker process cannot make them, nor decode
            if cpu_only and (self._consumed_here(node) or data.callers_on_accelerator(node) is False or data.cpu_program_trains()):
                continue  # a CPU-only program: workers would compete with the training threads for the cores
            if cpu_only and self.context.source.is_notebook and data.cpu_program():
                continue  # a notebook (run, never imported) whose program never puts anything on an accelerator
            self._report(node)

    def _project_loader(self, node: cst.Call) -> bool:
        """`DataLoader(opt)` where `DataLoader` is a class or function of the project, brought in by
        `from package.dataloader import *`: its own loader type, whose settings live in its code."""
        if not isinstance(node.func, cst.Name) or self.context.imports.origin(node.func.value) is not None:
            return False
        found = project.imported(self.context, node.func)
        definition = found[0].definition(found[1]) if found is not None else None
        return isinstance(definition, (cst.ClassDef, cst.FunctionDef))

    def _consumed_here(self, node: cst.Call) -> bool:
        """This file iterates the loader or trains: the whole program is here, not only its data module."""
        if self.semantic.loaders.batch_reads(node):
            return True
        return ".backward(" in self.context.source.text

    def _report(self, node: cst.Call) -> None:
        dataset = argument(node, "dataset", 0)
        if dataset is not None and self.semantic.objects.is_iterable_dataset(dataset.value):
            # every worker runs its own copy of the iterator: without sharding by worker, each sample comes
            # num_workers times. Said, never fixed.
            self.report(node, _ITERABLE)
            return
        message = None
        if self._unguarded_script(node):
            message = self.message + "; on Windows and macOS workers also need the script's code under `if __name__ == \"__main__\":`"
        self.report(node, message=message, fix=self._fix(node))

    def _fix(self, node: cst.Call) -> Optional[Fix]:
        given = argument(node, "num_workers", position=NUM_WORKERS_AT)
        if given is not None and self.context.literal(given.value) != 0:
            return None  # `num_workers=num_workers`: the parameter's callers choose, not this line
        if given is None and has_star_kwargs(node):
            if self.semantic.loaders.setting_options(node, "num_workers", NUM_WORKERS_AT) != {MISSING}:
                return None  # the dict sets num_workers=0: a second keyword would be an error
        value = "min(8, os.cpu_count() or 1)"
        change = Replace(node, set_argument(node, "num_workers", value, NUM_WORKERS_AT))
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
        mentions = len(re.findall(rf"\b{re.escape(target.value)}\b", text)) - self._displays(target.value)
        if _DYNAMIC_NAMES.search(text) or mentions != 1:
            return False
        if self.context.enclosing(call, cst.FunctionDef, cst.ClassDef) is not None:
            return True
        data = self.semantic.loaders
        return ".backward(" in text or any(data.loops_over(loader) for loader in data.loaders)

    def _displays(self, name: str) -> int:
        """How often a notebook only shows the loader: a cell ending in `train_loader, test_loader`."""
        if not self.context.source.is_notebook:
            return 0
        shown = 0
        for statement in descendants(self.context.module):
            if not (isinstance(statement, cst.Expr) and isinstance(self.context.parent(statement), cst.SimpleStatementLine)):
                continue
            value = statement.value
            items = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
            shown += sum(1 for item in items if isinstance(item, cst.Name) and item.value == name)
        return shown

    def _unguarded_script(self, call: cst.Call) -> bool:
        if self.context.source.is_notebook:
            return False
        if self.context.enclosing(call, cst.FunctionDef, cst.ClassDef) is not None:
            return False
        return not main_guarded(self.context, call) and not has_main_guard(self.context.module)
