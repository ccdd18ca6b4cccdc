"""TL802 data-parallel."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import UNKNOWN
from torchlint.lint.names import last_name
from torchlint.lint.rule import FixSafety, Rule
from torchlint.lint.walk import descendants
from torchlint.semantic.single_replica import (
    batch_of_one,
    moves,
    names_one_device,
    one_sample,
)

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
        "(`Accelerator().prepare(...)`); a call under a guard that is always false "
        "(`multi_gpu = False` ... `if multi_gpu:`); a model wrapped in an `if __name__ == \"__main__\":` block "
        "with no loop (to convert or save weights); and a wrapped model that is only ever given one sample "
        "(`model(img.unsqueeze(0))`), which DataParallel runs on a single replica anyway, as in a file whose "
        "every DataLoader batches one sample; `device_ids` that name one GPU as the program is set up (`[0]`, or "
        "`range(n)` where `n` is 1 or a command-line option whose default is 1), a single replica; the CPU branch "
        "of `if torch.cuda.is_available():`; and a copy "
        "wrapped under `if isinstance(model, nn.DataParallel):` (an EMA copy), where the choice was made, and is "
        "reported, where the model was first wrapped."
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
            if not (
                self._dead(call)
                or self._wraps_once(call)
                or self._one_sample_at_a_time(call)
                or self._rewraps(call)
                or self._without_cuda(call)
                or names_one_device(self.context, self.semantic.loaders, call)
                or self._single_sample_loaders()
            ):
                self.report(call)

    def _rewraps(self, call: cst.Call) -> bool:
        """Under `if isinstance(module, nn.DataParallel):`: a copy is wrapped the way the caller's model already
        was (an EMA copy, a clone); the choice was made, and is reported, where the caller wrapped it."""
        for ancestor in self.context.ancestors(call):
            if isinstance(ancestor, cst.If) and any(
                isinstance(n, cst.Call) and last_name(n.func) == "isinstance" and "DataParallel" in self.context.code(n)
                for n in (ancestor.test, *descendants(ancestor.test))
            ):
                return True
        return False

    def _without_cuda(self, call: cst.Call) -> bool:
        """The `else:` of `if torch.cuda.is_available():` (or the body of `if not ...`): the CPU fallback, where
        DataParallel runs the module as is."""
        child: cst.CSTNode = call
        for ancestor in self.context.ancestors(call):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(ancestor, cst.If):
                test = ancestor.test
                negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
                if negated:
                    test = test.expression  # type: ignore[attr-defined]
                asks_cuda = isinstance(test, cst.Call) and self.context.qualname(test) == "torch.cuda.is_available"
                if asks_cuda and (child is ancestor.body) == negated:
                    return True
            child = ancestor
        return False

    def _single_sample_loaders(self) -> bool:
        """Every DataLoader of the file batches one sample (`batch_size=1`, or no batch size at all): each
        forward gets a batch of one, which DataParallel runs on a single replica."""
        loaders = [
            n for n in descendants(self.context.module)
            if isinstance(n, cst.Call) and self.context.qualname(n) == "torch.utils.data.DataLoader"
        ]
        return bool(loaders) and all(batch_of_one(self.context, loader) for loader in loaders)

    def _wraps_once(self, call: cst.Call) -> bool:
        """In an `if __name__ == "__main__":` block with no loop: the model is wrapped to save or convert
        weights, or to run a smoke test, not to train or serve."""
        for ancestor in self.context.ancestors(call):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.For, cst.While)):
                return False
            if isinstance(ancestor, cst.If) and "__name__" in self.context.code(ancestor.test):
                nodes = list(descendants(ancestor.body))
                if any(isinstance(n, (cst.For, cst.While)) for n in nodes):
                    return False
                # Handed to a function (`extract_features(model, loader)`): it may run it over a dataset.
                inner = set(map(id, descendants(call)))
                after = nodes[next(i for i, n in enumerate(nodes) if n is call) + 1 :]
                handed = {
                    a.value.value
                    for n in after
                    if isinstance(n, cst.Call) and id(n) not in inner
                    for a in n.args
                    if isinstance(a.value, cst.Name)
                }
                return _bound_name(self.context, call) not in handed
        return False

    def _one_sample_at_a_time(self, call: cst.Call) -> bool:
        """Every forward of the wrapped model gets one sample (`model(img.unsqueeze(0))`): DataParallel splits
        a batch of one into a single replica, so there is nothing to parallelise."""
        name = _bound_name(self.context, call)
        if name is None:
            return False
        scope = self.context.enclosing_function(call) or self.context.module
        forwards = [
            n for n in descendants(scope) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == name
        ]
        forwards = [f for f in forwards if f is not call]
        return bool(forwards) and all(f.args and self._one_sample_at(f, f.args[0].value) for f in forwards)

    def _one_sample_at(self, forward: cst.Call, expr: cst.BaseExpression) -> bool:
        """`expr`, as it reaches `forward`, is one sample: the last assignments to the name before the
        forward, in the same block (`img = transform(img).unsqueeze(0)`, then `img = img.to(device)`)."""
        if not isinstance(expr, cst.Name):
            return one_sample(self.context, expr)
        statement = self.context.enclosing_statement(forward)
        block = self.context.parent(statement) if statement is not None else None
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            return False
        earlier = list(block.body[: next(i for i, s in enumerate(block.body) if s is statement)])
        for previous in reversed(earlier):
            small = previous.body[0] if isinstance(previous, cst.SimpleStatementLine) and len(previous.body) == 1 else None
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                continue
            target = small.targets[0].target
            if isinstance(target, cst.Name) and target.value == expr.value:
                if one_sample(self.context, small.value):
                    return True
                if not moves(small.value, expr.value):
                    return False
        return False

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


def _bound_name(context, call: cst.Call):
    """`model` for `model = nn.DataParallel(net)` (or `... .cuda()`), else None."""
    parent = context.parent(call)
    while isinstance(parent, (cst.Attribute, cst.Call)):
        parent = context.parent(parent)  # `nn.DataParallel(net).cuda()`
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value
    return None
