"""Data loading: DataLoader settings that leave the accelerator waiting for the next batch."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument, has_star_kwargs, positional, with_keyword
from torchlint.lint.rule import Fix, FixSafety, Replace, Rule

DATALOADER = "torch.utils.data.DataLoader"


class DataLoaderNumWorkersZero(Rule):
    code = "TL101"
    name = "dataloader-num-workers-zero"
    family = "Data loading"
    summary = "`DataLoader` that loads and collates every batch in the training process (`num_workers` missing or 0)."
    message = (
        "DataLoader runs in the main process (num_workers=0): set num_workers to the CPU cores you can spare, "
        "e.g. num_workers=min(8, os.cpu_count() or 1)"
    )
    explanation = (
        "With `num_workers=0` every batch is read, decoded, augmented and collated in the training process, "
        "between optimizer steps: the accelerator idles while the CPU works, and only one core does the work. "
        "Worker processes prepare the next batches while the current one trains. With image decoding and "
        "augmentation, data loading in the main process commonly dominates the step time."
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
        "A dataset already in memory as tensors (`TensorDataset`) with no per-item work gains little from "
        "workers, and some environments (Windows notebooks, restricted containers) cannot start them. "
        "Silence a deliberate choice with `# noqa: TL101`."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Sets `num_workers=min(8, os.cpu_count() or 1)` and adds `import os`. Unsafe: worker processes need "
        "a picklable dataset and collate function, and each worker holds its own copy of the dataset."
    )
    requires = ("DataLoader",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node) != DATALOADER or has_star_kwargs(node):
            return
        arg = argument(node, "num_workers", position=5)
        if arg is None and len(positional(node)) > 5:
            return  # passed positionally through *args
        if arg is not None and self.context.literal(arg.value) != 0:
            return  # a non-zero value, or one that cannot be decided
        self.report(node, fix=self._fix(node))

    def _fix(self, node: cst.Call) -> Fix:
        fixed = with_keyword(node, "num_workers", "min(8, os.cpu_count() or 1)")
        return Fix("Set num_workers=min(8, os.cpu_count() or 1)", [Replace(node, fixed)], safe=False, imports=("os",))
