"""TL102 dataloader-without-pin-memory."""

from __future__ import annotations

import os

import libcst as cst

from torchlint.lint.calls import has_star_kwargs
from torchlint.lint.rule import FixSafety, Rule
from torchlint.rules.data._common import (
    NUM_WORKERS_AT,
    PIN_MEMORY_AT,
    loaders_to_check,
    snippet,
    with_keyword_fix,
)
from torchlint.semantic.loader_calls import MISSING


class DataloaderWithoutPinMemory(Rule):
    code = "TL102"
    name = "dataloader-without-pin-memory"
    family = "Data loading"
    summary = "`DataLoader` without `pin_memory=True` whose batches are copied to the GPU."
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
        "The rule follows the loader to the places its batches are read (by name, through `self.` attributes, "
        "helper functions that return it, functions of the same file it is passed to, dicts or lists of "
        "loaders read as `dataloaders[phase]` (`loaders[\"train\"]` reads that entry only) or in turn (`for it in iterators: next(it)`, the list filled by `append`), `iter(loader)` and `next(it)` inside a loop, and generators "
        "of the file that yield its items, such as `infiniteloop(loader)`) and reports it only when a batch "
        "is moved with `.cuda()` or `.to(device)` where `device` is, or may be, a CUDA device (there, in a "
        "function of the file the batch is handed to or a function of another project file it is handed to, "
        "`x, y = to_device(batch)` or `imgs, z = utils.cuda([imgs, z])`, or in a file that gets the loader from a function of "
        "this one: `train_loader = get_training_dataloader(...)`, or a dict of them, `loaders = build_loaders(cfg)` "
        "then `loaders[\"train\"]`, or from a method of a class of this one, "
        "`data = CIFARData(args)` then `data.train_dataloader()`, or imports it by name, `from data import "
        "train_loader`, or in a class of another file the loader is "
        "handed to, `Trainer(model, train_dataloader=loader)` whose methods iterate `self.train_data`), cast with `.type(torch.cuda.FloatTensor)` (or a name "
        "bound to it), or copied with `buffer.copy_(batch)` into a tensor moved to the GPU. Settings passed "
        "as `**kwargs` are read when `kwargs` is a dict literal of the same file changed only by "
        "`kwargs.update(...)` or `kwargs[\"key\"] = ...`; a setting given as a parameter of the function that "
        "builds the loader (`def loader(path, pin_memory=False)`) takes the values its calls pass, or its default. Pinning pays without worker processes too: the "
        "loader pins each batch as it collates it, and the copy then runs at full bus speed and can overlap "
        "the step with `non_blocking=True` (TL103), the pairing PyTorch's tuning guide recommends; so does a loader "
        "over tensors already in memory (a `TensorDataset`) whose batches feed a training step on the GPU. A "
        "project subclass of `DataLoader` that passes its arguments through (no `__init__`, or "
        "`super().__init__(*args, **kwargs)`) is a loader with the settings of each call that builds it "
        "(`AudioDataLoader(dataset, batch_size=1, num_workers=4)`)."
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
        "(the loader raises): the rule stays silent when the dataset's class (of this file or another project "
        "file) puts tensors on the GPU (its items as they are read, or the data it indexes when it is built), "
        "or the `TensorDataset` wraps tensors moved to the GPU before it (`x = x.to(device)`, "
        "`torch.randn(n, d, device=device)`), or the loader's `collate_fn` (of this file or another) moves the "
        "batch to the GPU; where the dataset's code cannot be read, also when it is built by a call given a CUDA "
        "device (`MyDataset(path, device)`) or a dataset class of the file moves its items (a class that is given a "
        "device and never moves anything hands out host tensors, and is reported). Not reported either: a loader whose `collate_fn` pads "
        "token ids to a padding index (`get_collate_fn(pad_index)`, `partial(padded_collate_sft, padding_idx=...)`): "
        "a few hundred KB of integers per batch, where a pinned copy saves microseconds on a step of a language model. Not reported: a loader without workers over tensors in memory whose "
        "batches are read only outside a training step of this file (a predict or evaluation loop that reads each result "
        "back: the pin would be one more copy on the main thread, with no queued work to overlap); batches read only every so many steps "
        "(`if step % 100 == 0: x, y = next(test_iter)`) or in a loop that waits for a person on every trip "
        "(`cv2.waitKey(0)`, `input()`, a blocking `plt.show()`); loaders "
        "whose settings come through `**kwargs` the rule cannot read (a dict filled from a config; a helper's "
        "`**kwargs` is read at every call of the helper), batches moved to `\"cpu\"`/`\"mps\"` or to a device "
        "from torch_xla (`xm.xla_device()`: a TPU takes its copies through XLA, and page-locked memory is CUDA's), batches "
        "handed to methods of other files that move them (`model.parse_batch(batch)`), and loaders a "
        "file that gets them from this one passes on to a third. Batches handed on the host to an `nn.DataParallel` "
        "model count as copied: it scatters them to its GPUs on every call."
    )
    fix_safety = FixSafety.SAFE
    fix_notes = (
        "Sets `pin_memory=True`. Batches hold the same values; on a machine without CUDA the DataLoader "
        "only warns that pinning is unavailable and loads as before, so the fix is safe where the same "
        "script also runs on CPU. With `**kwargs` it is offered only when the dict cannot hold `pin_memory`."
    )
    requires = ("DataLoader",)

    def leave_Module(self, node: cst.Module) -> None:
        data = self.semantic.loaders
        for loader in loaders_to_check(self):
            pin = data.setting_options(loader, "pin_memory", PIN_MEMORY_AT)
            if pin is None or not pin <= {MISSING, False}:
                continue
            if self.semantic.batches_on_device(loader):
                continue  # CUDA tensors cannot be pinned: the loader would raise
            if data.collates_token_ids(loader):
                continue  # padded token ids: too few bytes per step for pinning to show
            moved = (
                [(self.context, c) for c in data.batch_copies(loader)]
                or data.copies_in_importers(loader)
                or data.copies_in_callees(loader)
            )
            if not moved:
                continue
            workers = data.setting_options(loader, "num_workers", NUM_WORKERS_AT)
            single = workers is not None and (MISSING in workers or 0 in workers)
            if single and self.semantic.loads_from_memory(loader) and not data.read_by_training_step(loader):
                # Tensors in memory batched on the main thread, read outside a training step (a predict or
                # evaluation loop that reads each result back): pinning adds a copy there, nothing to overlap.
                continue
            where, copy = moved[0]
            shown = snippet(where, copy) + ("" if where is self.context else f"` in `{os.path.basename(where.source.path)}")
            message = (
                f"Batches of this DataLoader are copied to the GPU (`{shown}`) from "
                "pageable memory: set pin_memory=True so the copy runs by DMA from page-locked memory "
                "(and can overlap compute with non_blocking=True)"
            )
            fix = None
            if pin == {MISSING} or not has_star_kwargs(loader):  # never a second pin_memory from **kwargs
                fix = with_keyword_fix(
                    self.context, loader, "pin_memory", "True", "Set pin_memory=True", position=PIN_MEMORY_AT
                )
            self.report(loader, message=message, fix=fix)
