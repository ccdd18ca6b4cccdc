"""TL103 copy-without-non-blocking."""

from __future__ import annotations

import os

import libcst as cst

from torchlint.lint.calls import has_star_args, has_star_kwargs, keyword, positional
from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.lint.rule import FixSafety, Rule
from torchlint.rules.data._common import with_keyword_fix
from torchlint.semantic.loader_copies import is_transfer


_HELPER = (
    "This batch comes from a pinned DataLoader but `{name}()` copies it synchronously (`{copy}` in `{file}`): "
    "pass non_blocking=True there so the copy overlaps the work already queued on the GPU"
)


_CHOSEN = (
    "This copy from pinned memory is made blocking on purpose (non_blocking=False): the host waits for every "
    "batch; pass non_blocking=True unless the code reads the batch on the host before the copy ends"
)


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
        "The loader is followed as TL102 follows it (through `iter()`, `next()` in a loop, generators that "
        "yield its batches and functions of the file the batch is handed to), and across files: a loader "
        "built in another project file and passed to a function of this one, returned to this file by a "
        "function of another, imported by name from another (`from data import train_loader`), handed to the `__call__` of an evaluator object (`evaluate(model, loader)`), or built by a "
        "helper of another file given `**kwargs` that pin it, or built from a project subclass of `DataLoader` that passes its "
        "arguments through (`AudioDataLoader(dataset, pin_memory=True)`), counts with the settings it was built with. A "
        "batch handed to a helper that copies it (`batch = to_device(batch, device)`, a recursive mover of lists and "
        "dicts) is followed into the helper: one of this file is reported at its own copy, one of another project "
        "file at the call that hands it the batch (without a fix: the copy to change is in the helper). "
        "A host-to-device copy with `non_blocking=True` is ordered on the stream before the kernels that "
        "use it, so the batch's values are the same. It would matter only if the code wrote to the pinned "
        "CPU batch in place after the copy was queued, which the fix cannot see. Device-to-host copies are "
        "another matter (the host may read before the data arrives); the rule only looks at batches going "
        "to the GPU. A loader pinned on one path only (`kwargs = {\"pin_memory\": True} if args.cuda else {}`, or "
        "`pin_memory=args.pin_memory` with a `store_true` switch, `pin_memory=torch.cuda.is_available()`, a pinning switch whose value the file cannot see such as `pin_memory=config[\"pin_memory\"]` or `pin_memory=use_gpu` handed in by the caller) is reported: on the other path `non_blocking=True` is a plain copy. A `.cuda()` of a name that an earlier "
        "statement of the same block already moved (`target = target.cuda()`, then `target_var = target.cuda()`) "
        "copies nothing and is not reported, nor is a copy of a batch that is already on the GPU when it leaves "
        "the loader (its dataset moves its items there, or wraps tensors moved there, or its `collate_fn` moves "
        "the batch: the rules of TL102): the copy is a no-op."
    )
    fix_safety = FixSafety.SAFE
    fix_notes = (
        "Adds `non_blocking=True` to the `.to(...)` / `.cuda(...)` call. An explicit `non_blocking=False` is "
        "reported but never changed: someone chose it."
    )
    requires = ("pin_memory", ".to(", ".cuda(")  # the loader may be pinned in another file

    def leave_Module(self, node: cst.Module) -> None:
        if self.semantic.is_test_module:
            return
        data = self.semantic.loaders
        seen: set[int] = set()
        # the file's loaders, and those of other project files whose batches it reads
        sources = [*data.loaders, *(s for s in data.sources_read() if not isinstance(s, cst.Call))]
        for loader in sources:
            pin = data.pinned_options(loader)
            if pin is None or True not in pin:
                continue  # not pinned, or not known to be (`pin_memory=args.pin`); pinned on some path is enough
            if data.batches_on_device(loader):
                continue  # its batches are already on the GPU: the copy is a no-op
            for transfer in data.batch_copies(loader):
                if id(transfer) in seen:
                    continue
                if not is_transfer(transfer):
                    self._check_helper(transfer, data.helper_copies(transfer))
                    seen.add(id(transfer))
                    continue
                if _non_blocking_given(self.context, transfer):
                    continue
                seen.add(id(transfer))
                if keyword(transfer, "non_blocking") is not None:
                    # someone chose `non_blocking=False`: say what it costs, leave the choice to them
                    self.report(transfer, _CHOSEN)
                    continue
                fix = with_keyword_fix(self.context, transfer, "non_blocking", "True", "Pass non_blocking=True")
                self.report(transfer, fix=fix)

    def _check_helper(self, call: cst.Call, copies: list[tuple[Context, cst.Call]]) -> None:
        """`batch = to_device(batch, device)` where the helper, in another project file, copies the pinned batch
        without `non_blocking=True`: reported at the call (the copy is written there, the batch comes from here)."""
        blocking = [(c, t) for c, t in copies if is_transfer(t) and not _non_blocking_given(c, t)]
        if blocking:
            where, copy = blocking[0]
            self.report(call, _HELPER.format(
                name=last_name(call.func), copy=where.code(copy), file=os.path.basename(where.source.path)
            ))


def _non_blocking_given(context: Context, call: cst.Call) -> bool:
    arg = keyword(call, "non_blocking")
    if arg is not None:
        return context.literal(arg.value) is not False
    if has_star_kwargs(call) or has_star_args(call):
        return True
    # `.cuda(0, True)` / `.to(device, torch.float, True)`: a positional flag
    limit = 1 if call.func.attr.value == "cuda" else 2  # type: ignore[attr-defined]
    return len(positional(call)) > limit or any(isinstance(context.literal(a.value), bool) for a in positional(call))
