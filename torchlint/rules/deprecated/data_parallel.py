"""TL802 data-parallel."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import UNKNOWN
from torchlint.lint.names import last_name
from torchlint.lint.rule import FixSafety, Rule

# Wrappers that show a script already runs one process per GPU.
_DISTRIBUTED = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
    }
)

_WATCHED = frozenset({"DataParallel", "Accelerator", *(name.rpartition(".")[2] for name in _DISTRIBUTED)})


class DataParallel(Rule):
    code = "TL802"
    name = "data-parallel"
    family = "Deprecated and slow APIs"
    summary = "`nn.DataParallel(model)`: single-process, multi-threaded data parallelism."
    message = (
        "nn.DataParallel replicates the model and scatters every batch from one process: use "
        "DistributedDataParallel (one process per GPU, torchrun), also on a single machine"
    )
    explanation = (
        "`nn.DataParallel` runs one Python thread per GPU inside a single process. On every forward pass it "
        "copies the model's parameters and buffers from the first GPU to the others, splits the batch from the "
        "first GPU, runs the replicas in threads that contend for the GIL, and gathers the outputs (and, in "
        "backward, reduces the gradients) back on the first GPU, which therefore uses more memory and does more "
        "work than the others. `DistributedDataParallel` runs one process per GPU, keeps the replicas in sync by "
        "all-reducing gradients in buckets that overlap with the backward pass, and moves no parameters or "
        "inputs between GPUs. PyTorch's documentation recommends `DistributedDataParallel` over `DataParallel` "
        "even on a single machine, noting that DataParallel is usually slower because of GIL contention, the "
        "per-iteration model replication, and the scattering and gathering of inputs and outputs."
    )
    bad = (
        "import torch.nn as nn\n\n"
        "model = nn.DataParallel(model).cuda()\n"
    )
    good = (
        "# launched with: torchrun --nproc-per-node=NUM_GPUS train.py\n"
        "import os\n\n"
        "import torch\n"
        "import torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
        "dist.init_process_group(\"nccl\")\n"
        "local_rank = int(os.environ[\"LOCAL_RANK\"])\n"
        "torch.cuda.set_device(local_rank)\n"
        "model = DDP(model.cuda(local_rank), device_ids=[local_rank])\n"
        "# and a DistributedSampler for the training DataLoader\n"
    )
    false_positives = (
        "Switching to DDP changes how the script is launched (`torchrun`), how data is sharded "
        "(`DistributedSampler`), and what is logged or saved (only on rank 0), so it is not a one-line change. "
        "A quick interactive experiment or a notebook on one multi-GPU machine may reasonably keep "
        "`DataParallel`; so may a library that offers it as a fallback: `# noqa: TL802`. Not reported: a file "
        "that also builds `DistributedDataParallel` (or FSDP), where `DataParallel` is the fallback branch of a "
        "script that already runs distributed; a file that hands the model to `accelerate` "
        "(`Accelerator().prepare(...)`); and a call under a guard that is always false "
        "(`multi_gpu = False` ... `if multi_gpu:`)."
    )
    fix_safety = FixSafety.NONE
    fix_notes = "No autofix: moving to DistributedDataParallel changes how the program is launched and how data is split."
    requires = ("DataParallel",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.candidates: list[cst.Call] = []
        self.distributed = False  # the file builds DistributedDataParallel / FSDP itself
        self.accelerator = False  # an `accelerate.Accelerator` is built
        self.prepares = False  # and something is handed to `.prepare(...)`

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = last_name(func)
        if last == "prepare" and isinstance(func, cst.Attribute):
            self.prepares = True
            return
        if not (isinstance(func, cst.Name) or last in _WATCHED):
            return  # an attribute call of another name: not one of these (a bare name may be an alias)
        qual = self.context.qualname(node)
        if qual == "torch.nn.DataParallel":
            self.candidates.append(node)
        elif qual in _DISTRIBUTED:
            self.distributed = True
        elif qual == "accelerate.Accelerator":
            self.accelerator = True

    def leave_Module(self, node: cst.Module) -> None:
        if self.distributed or (self.accelerator and self.prepares):
            # DataParallel is the fallback of a script that runs distributed on its main path (or lets
            # `accelerate` wrap the model): the message would tell its author nothing new.
            return
        for call in self.candidates:
            if not self._dead(call):
                self.report(call)

    def _dead(self, call: cst.Call) -> bool:
        """Under `if multi_gpu:` where `multi_gpu = False` is the only binding: code that never runs."""
        child: cst.CSTNode = call
        for ancestor in self.context.ancestors(call):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(ancestor, (cst.If, cst.While)) and child is ancestor.body and self._false(ancestor.test):
                return True
            if isinstance(ancestor, cst.IfExp) and child is ancestor.body and self._false(ancestor.test):
                return True
            child = ancestor
        return False

    def _false(self, test: cst.BaseExpression) -> bool:
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            return self._false(test.left) or self._false(test.right)
        value = self.context.literal(test)
        return value is not UNKNOWN and isinstance(value, (bool, int, type(None))) and not value
