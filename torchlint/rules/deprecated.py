"""Deprecated and slow APIs: the device-specific AMP namespaces, nn.DataParallel."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import has_star_args, keyword, positional, with_keyword
from torchlint.lint.context import UNKNOWN
from torchlint.lint.names import last_name
from torchlint.lint.rule import Fix, FixSafety, Replace, Rule

# Deprecated name -> (what replaces it, the device type).
_AUTOCAST = {
    "torch.cuda.amp.autocast": "cuda",
    "torch.cpu.amp.autocast": "cpu",
    "torch.cpu.amp.autocast_mode.autocast": "cpu",
}
_SCALER = {
    "torch.cuda.amp.GradScaler": "cuda",
    "torch.cpu.amp.GradScaler": "cpu",
    "torch.cpu.amp.grad_scaler.GradScaler": "cpu",
}
_CUSTOM = {"torch.cuda.amp.custom_fwd": "custom_fwd", "torch.cuda.amp.custom_bwd": "custom_bwd"}
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
# torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)
_AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")


class DeprecatedCudaAmp(Rule):
    code = "TL801"
    name = "deprecated-cuda-amp"
    family = "Deprecated and slow APIs"
    summary = (
        "The deprecated device-specific AMP spellings: `torch.cuda.amp.autocast(...)`, "
        "`torch.cuda.amp.GradScaler(...)`, `torch.cuda.amp.custom_fwd/custom_bwd`, `torch.cpu.amp.autocast(...)`, "
        "`torch.cpu.amp.GradScaler(...)`."
    )
    message = "Deprecated AMP spelling: use torch.amp.autocast(\"cuda\", ...) / torch.amp.GradScaler(\"cuda\", ...)"
    explanation = (
        "This rule is here for migration, not for speed: the old spellings are thin subclasses of the device-"
        "generic `torch.amp` classes and run the same code, so there is no run-time cost to remove. Since PyTorch "
        "2.4 they are deprecated: every call raises a `FutureWarning` (\"`torch.cuda.amp.autocast(args...)` is "
        "deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.\"), which Python prints once per "
        "call site by default, and code that turns warnings into errors (`-W error`, pytest's "
        "`filterwarnings = error`) fails. A deprecated API is eventually removed. The `torch.amp` spellings take the device type as an argument, so the "
        "same code serves CUDA, CPU, XPU and MPS."
    )
    bad = (
        "import torch\n\n"
        "scaler = torch.cuda.amp.GradScaler()\n"
        "for x, y in loader:\n"
        "    with torch.cuda.amp.autocast():\n"
        "        loss = criterion(model(x), y)\n"
        "    scaler.scale(loss).backward()\n"
    )
    good = (
        "import torch\n\n"
        "scaler = torch.amp.GradScaler(\"cuda\")\n"
        "for x, y in loader:\n"
        "    with torch.amp.autocast(\"cuda\"):\n"
        "        loss = criterion(model(x), y)\n"
        "    scaler.scale(loss).backward()\n"
    )
    false_positives = (
        "Code that must still run on PyTorch older than 2.3 (`torch.amp.GradScaler`) or 2.4 "
        "(`torch.amp.custom_fwd/custom_bwd`) cannot use the new spellings yet: silence the finding with "
        "`# noqa: TL801` or ignore TL801 for the project. Only calls and decorators are reported, not other "
        "references (`isinstance(scaler, torch.cuda.amp.GradScaler)`)."
    )
    fix_safety = FixSafety.SAFE
    fix_notes = (
        "Rewrites the call to the `torch.amp` spelling with the device type as first argument "
        "(`torch.cuda.amp.autocast(True)` becomes `torch.amp.autocast(\"cuda\", enabled=True)`: the old "
        "positional parameters are passed by keyword because the order differs; `GradScaler`'s arguments keep "
        "their positions after the device), and `@torch.cuda.amp.custom_fwd` becomes "
        "`@torch.amp.custom_fwd(device_type=\"cuda\")`. Names imported with `from torch.cuda.amp import autocast` "
        "are rewritten at the call (`torch` is imported if the file does not bind it); the old import is left "
        "in place, for you to remove when nothing else uses it. Behaviour is the same: the old classes call the "
        "new ones with exactly these arguments."
    )
    requires = ("amp",)

    def __init__(self, context) -> None:
        super().__init__(context)
        text = context.source.text
        self._quote = "'" if text.count("'") > text.count('"') else '"'

    def _string(self, value: str) -> str:
        return f"{self._quote}{value}{self._quote}"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value not in ("autocast", "GradScaler", "custom_fwd", "custom_bwd"):
            return
        qual = self.context.qualname(func)
        if qual is None:
            return
        if self._new_style(node):
            return  # already called the torch.amp way: the name is bound to both (try/except import fallback)
        torch = self.context.local_name_for("torch")
        if qual in _AUTOCAST:
            device = _AUTOCAST[qual]
            fix = self._autocast_fix(node, torch, device)
            self.report(
                node,
                f"`torch.{device}.amp.autocast(...)` is deprecated: use `torch.amp.autocast(\"{device}\", ...)`",
                fix=fix,
            )
        elif qual in _SCALER:
            device = _SCALER[qual]
            fix = self._prepend_fix(node, f"{torch}.amp.GradScaler", device)
            self.report(
                node,
                f"`torch.{device}.amp.GradScaler(...)` is deprecated: use `torch.amp.GradScaler(\"{device}\", ...)`",
                fix=fix,
            )
        elif qual in _CUSTOM:
            name = _CUSTOM[qual]
            new = node.with_changes(func=cst.parse_expression(f"{torch}.amp.{name}"))
            if keyword(new, "device_type") is None:
                new = with_keyword(new, "device_type", self._string("cuda"))
            fix = Fix(f"Use torch.amp.{name}(device_type=\"cuda\")", [Replace(node, new)], imports=("torch",))
            self.report(node, self._custom_message(name), fix=fix)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator
        if isinstance(expr, cst.Call) or isinstance(expr, cst.Attribute) and expr.attr.value not in ("custom_fwd", "custom_bwd"):
            return
        name = _CUSTOM.get(self.context.qualname(expr) or "")
        if name is None:
            return
        torch = self.context.local_name_for("torch")
        new = f"{torch}.amp.{name}(device_type={self._string('cuda')})"
        fix = Fix(f"Use torch.amp.{name}(device_type=\"cuda\")", [Replace(expr, new)], imports=("torch",))
        self.report(expr, self._custom_message(name), fix=fix)

    def _new_style(self, node: cst.Call) -> bool:
        """A device string first, or a `device`/`device_type` keyword: the torch.amp signature."""
        if any(a.keyword is not None and a.keyword.value in ("device", "device_type") for a in node.args):
            return True
        given = positional(node)
        return bool(given) and isinstance(self.context.literal(given[0].value), str)

    @staticmethod
    def _custom_message(name: str) -> str:
        return f"`torch.cuda.amp.{name}` is deprecated: use `torch.amp.{name}(device_type=\"cuda\")`"

    def _autocast_fix(self, node: cst.Call, torch: str, device: str) -> Optional[Fix]:
        if has_star_args(node):
            return None
        given = positional(node)
        if len(given) > len(_AUTOCAST_POSITIONAL):
            return None
        names = dict(zip(map(id, given), _AUTOCAST_POSITIONAL))
        args = []
        for arg in node.args:
            if id(arg) in names:
                if keyword(node, names[id(arg)]) is not None:
                    return None  # the same parameter twice: leave the error to Python
                arg = arg.with_changes(
                    keyword=cst.Name(names[id(arg)]),
                    equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                    ),
                )
            args.append(arg)
        return self._prepend_fix(node.with_changes(args=args), f"{torch}.amp.autocast", device, original=node)

    def _prepend_fix(self, node: cst.Call, func: str, device: str, original: Optional[cst.Call] = None) -> Optional[Fix]:
        if has_star_args(node):
            return None
        first = cst.Arg(value=cst.SimpleString(self._string(device)))
        if node.args:
            first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        new = node.with_changes(func=cst.parse_expression(func), args=[first, *node.args])
        name = func.rpartition(".")[2]
        return Fix(
            f"Use torch.amp.{name}(\"{device}\", ...)", [Replace(original or node, new)], imports=("torch",)
        )


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
