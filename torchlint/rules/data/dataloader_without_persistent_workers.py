"""TL104 dataloader-without-persistent-workers."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.calls import argument
from torchlint.lint.rule import FixSafety, Rule
from torchlint.lint.walk import descendants
from torchlint.rules.data._common import (
    NUM_WORKERS_AT,
    enclosing_loops,
    is_inside,
    loaders_to_check,
    with_keyword_fix,
)
from torchlint.semantic.functions import returns_of
from torchlint.semantic.loader_calls import MISSING, setting_value
from torchlint.semantic.loader_settings import positive_workers
from torchlint.semantic.loaders import Flow

# Lightning hooks whose loader the trainer iterates once per epoch.
_EPOCH_HOOKS = frozenset({"train_dataloader", "val_dataloader"})


class DataloaderWithoutPersistentWorkers(Rule):
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
        "Off by default (enable it with `--extend-select TL104`): the restart costs a fraction of a second "
        "with `fork` (the Linux default) and a few seconds with `spawn`, once per epoch, so it is measurable only "
        "where epochs are short (a small dataset, many epochs, an evaluation pass every epoch) and heavy "
        "workers start up often. How long an epoch is depends on the dataset's size, which the code rarely "
        "shows: on real projects most findings were ImageNet-, VOC- or CelebA-scale epochs of thousands of steps, "
        "where one restart is noise. The rule stays silent on a loader over an in-memory dataset (the workers "
        "themselves are the waste there: see TL101), on a loader built anew on each call of a function (nothing "
        "persists between calls), and on an evaluation run from inside the training loop at an interval of "
        "steps. Persistent workers keep the dataset copy they were given: a dataset the main process changes between "
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
    # Whether one restart per epoch is measurable depends on how long an epoch is, which the code rarely shows.
    default_enabled = False

    def leave_Module(self, node: cst.Module) -> None:
        data = self.semantic.loaders
        for loader in loaders_to_check(self):
            if setting_value(self.context, loader, "persistent_workers", None) is not MISSING:
                continue
            workers = argument(loader, "num_workers", NUM_WORKERS_AT)
            if workers is None:
                continue
            kind = positive_workers(self.context, data, workers.value)
            if kind is None:
                continue
            if self.semantic.loads_from_memory(loader):
                continue  # ready tensors: the workers themselves are the waste (TL101 says so), not their restart
            if not (
                any(self._per_epoch(data, loader, loop) for loop, _ in data.loops_over(loader))
                or self._lightning_epoch_loader(loader)
            ):
                continue
            value = f"{self.context.code(workers.value)} > 0" if kind == "default" else "True"
            fix = with_keyword_fix(self.context, loader, "persistent_workers", value, f"Set persistent_workers={value}")
            self.report(loader, fix=fix)

    def _per_epoch(self, data: Flow, loader: cst.Call, loop: cst.For, depth: int = 0) -> bool:
        """The loop over `loader` runs again and again: it sits in an outer loop (here or in a caller)."""
        context = self.context
        for outer in enclosing_loops(context, loop):
            if is_inside(context, loader, outer):
                return False  # a new loader every time round: persistent workers would not help
            if self._changes_dataset(outer):
                return False
            # A pass run from inside the step loop is an evaluation every N steps: one restart per
            # thousands of steps is noise.
            return not (isinstance(outer, cst.For | cst.While) and self.semantic.is_hot(outer))
        if depth >= 2:
            return False
        function = context.enclosing_function(loop)
        if function is None or is_inside(context, loader, function):
            return False  # no loop around it, or a new loader on every call of the function
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
            return any(isinstance(r.value, cst.Name) and r.value.value == name for r in returns_of(function))
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
