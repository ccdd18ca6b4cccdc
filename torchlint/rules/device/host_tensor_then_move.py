"""TL601 host-tensor-then-move."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import (
    has_star_args,
    has_star_kwargs,
    keyword,
    positional,
    with_keyword,
)
from torchlint.lint.context import UNKNOWN
from torchlint.lint.rule import Fix, FixSafety, Replace, Rule
from torchlint.semantic.placement import is_dtype_expr

# Factories whose result does not depend on where it is built (values are exact on every device).
_EXACT = frozenset({"zeros", "ones", "empty", "full", "eye", "arange"})

# Factories whose result does not change when the dtype is applied at creation instead of by a cast.
_CAST_FREE = frozenset({"zeros", "ones", "empty", "eye"})

# Random factories: another device means another generator (other values, and the CPU stream no longer advances).
_RANDOM = frozenset({"rand", "randn", "randint", "randperm"})

# Floating-point ranges: CPU and CUDA kernels may round the last bit differently.
_RANGES = frozenset({"linspace", "logspace"})

FACTORIES = {f"torch.{name}": name for name in _EXACT | _RANDOM | _RANGES}


def _int_like(context, node: cst.BaseExpression, _depth: int = 0) -> bool:
    """An expression that is an int: literal, len(), .size(i), .shape[i], .numel(), int(), arithmetic of those."""
    if _depth > 6:
        return False
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Name):
        value = context.literal(node)
        if value is not UNKNOWN:
            return isinstance(value, int) and not isinstance(value, bool)
        assigned = context.assigned_value(node)
        return assigned is not None and _int_like(context, assigned, _depth + 1)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _int_like(context, node.expression, _depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(
        node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide)
    ):
        return _int_like(context, node.left, _depth + 1) and _int_like(context, node.right, _depth + 1)
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name) and func.value in ("len", "int"):
            return True
        if isinstance(func, cst.Attribute) and func.attr.value in ("numel", "size", "dim", "ndimension") and node.args:
            return func.attr.value != "size" or len(node.args) == 1
        return isinstance(func, cst.Attribute) and func.attr.value in ("numel", "dim", "ndimension")
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute):
        return node.value.attr.value == "shape"
    return False


class HostTensorThenMove(Rule):
    code = "TL601"
    name = "host-tensor-then-move"
    family = "Device placement and transfers"
    summary = (
        "A tensor built by a factory on the CPU and then copied to the accelerator on every step or batch: "
        "`torch.zeros(n).to(device)`, `torch.randn(n).cuda()`, `torch.arange(n).to(\"cuda\")` in `forward()`, "
        "in a training or sampling loop, or in a helper they call."
    )
    message = "Create the tensor on the device: pass device= to the factory instead of building it on the CPU and copying it"
    explanation = (
        "`torch.zeros(n).to(device)` allocates and fills the tensor in host memory, then copies it to the "
        "accelerator. The copy comes from ordinary (pageable) memory, so it is synchronous: for a blocking "
        "copy, PyTorch waits on the CUDA stream until every kernel queued before it has run, and the CPU can "
        "no longer queue work ahead of the GPU. In a `forward()` or a training step that costs a host-device "
        "synchronisation per call, on top of the host allocation and the transfer. With `device=` the factory "
        "launches one fill kernel on the device and returns at once, and the code stays capturable by CUDA "
        "graphs (`torch.compile(mode=\"reduce-overhead\")`), which do not allow host-to-device copies. The PyTorch "
        "performance tuning guide gives this advice (`torch.rand(size, device='cuda')` rather than "
        "`torch.rand(size).cuda()`), and the effect can be large: the adaptive kNN-MT project reports its "
        "inference running about 3-4x faster after changing two `torch.zeros(...).to(queries.device)` calls to "
        "`torch.zeros(..., device=queries.device)` (github.com/zhengxxn/adaptive-knn-mt, pull request 9)."
    )
    bad = (
        "import torch\n\n"
        "def forward(self, x):\n"
        "    mask = torch.ones(x.shape[0], x.shape[1]).to(x.device)\n"
        "    noise = torch.randn(x.shape).cuda()\n"
        "    return x * mask + noise\n"
    )
    good = (
        "import torch\n\n"
        "def forward(self, x):\n"
        "    mask = torch.ones(x.shape[0], x.shape[1], device=x.device)\n"
        "    noise = torch.randn(x.shape, device=\"cuda\")\n"
        "    return x * mask + noise\n"
    )
    false_positives = (
        "The extra copy matters only where it is paid again and again, so the rule reports only code on a hot "
        "path: `forward()` or `__call__()` of a class, the body of a training loop or of a loop that runs a "
        "model on each trip (the denoising steps of a sampler), a one-step training function, a function that "
        "builds the tensor to the size or on the device of a batch it is given (`torch.ones(x.shape[0]).to(x.device)`), "
        "and the functions of the file those call. It stays silent on tensors built once: in a module's "
        "`__init__`, at module level (a script's set-up, a notebook cell, a smoke test under "
        "`if __name__ == \"__main__\":`), the first noise of a sampling run, a dummy input to log the graph, "
        "and anything behind a logging interval (`if step % 100 == 0:`). An outer loop is not a step loop because "
        "its body saves or evaluates a model every N trips: the initial recurrent state of an episode "
        "(`hidden = torch.zeros(1, 1, h).cuda()` before the loop over environment steps) is built once per "
        "episode. A size or device taken from configuration (`torch.device(\"cuda\")`, `opt.batch_size`) does not "
        "make a function per-batch, and neither does a tensor of a function without parameters (a self-check "
        "that builds its own inputs). Empty tensors (`torch.zeros(0, d).cuda()`) copy nothing and are not reported. "
        "Only factories (`zeros`, `ones`, `empty`, `full`, `eye`, `arange`, `linspace`, `logspace`, `rand`, "
        "`randn`, `randint`, `randperm`) directly followed by `.to(...)` or `.cuda(...)` are reported, and only "
        "when the target is clearly a device: a device string, `torch.device(...)`, `x.device`, or a name such "
        "as `device`, `dev`, `gpu`, `local_rank`. `.to(other_tensor)` and `.to(some_value)` stay silent, and so "
        "do `torch.tensor(data)` / `torch.from_numpy(array)` (the data has to be copied anyway), "
        "`torch.zeros_like(x)` (it already takes `x`'s device) and random factories given a `generator=` (a CPU "
        "generator chosen for reproducibility cannot draw on the GPU). Code that must produce the same random "
        "numbers as before (seeded tests comparing against stored values) should keep the CPU generator: "
        "`# noqa: TL601`."
    )
    fix_safety = FixSafety.SOMETIMES
    fix_notes = (
        "Moves the device into the factory call as `device=...` (`.cuda()` becomes `device=\"cuda\"`, "
        "`.cuda(0)` becomes `device=\"cuda:0\"`); a `non_blocking=` or `copy=` argument is dropped (there is no "
        "copy left), and a dtype given to `.to()` goes into the factory for `zeros`/`ones`/`empty`/`eye` or stays "
        "as an on-device `.to(dtype)` cast for the others. Safe for `zeros`, `ones`, `empty`, `full`, `eye` and "
        "integer `arange`: the values are the same on every device. Unsafe for random factories (the device's "
        "generator produces other numbers, and the CPU generator's later draws shift), `linspace`/`logspace` and "
        "floating `arange` (the device kernel may round the last bit differently). No fix for "
        "`.cuda(name)` (`.cuda(None)` means the current GPU, `device=None` the CPU), for factories with "
        "`requires_grad=` or `pin_memory=` (the moved tensor is not a leaf; the fixed one would be), or for "
        "`.to()` with other arguments."
    )
    requires = (".to(", ".cuda(")

    def visit_Module(self, node: cst.Module) -> None:
        self._candidates: list[tuple[cst.Call, tuple[cst.BaseExpression, ...], str, Optional[Fix]]] = []

    def leave_Module(self, node: cst.Module) -> None:
        # Decided once the walk is over: whether a function is hot depends on calls further down the file.
        for call, data, message, fix in self._candidates:
            if self.semantic.on_hot_path(call, data):
                self.report(call, message, fix=fix)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
            return
        factory = func.value
        if not isinstance(factory, cst.Call):
            return
        name = FACTORIES.get(self.context.qualname(factory) or "")
        if name is None or has_star_kwargs(factory):
            return  # `**options` may hold device= (sizes passed as `*shape` are fine)
        if any(keyword(factory, k) is not None for k in ("device", "out", "generator")):
            return  # already placed, writing into a given tensor, or drawing from a (CPU) generator on purpose
        if has_star_args(node) or has_star_kwargs(node):
            return
        if func.attr.value == "cuda":
            target = self._cuda_target(node)
        else:
            target = self._to_target(node)
        if target is None:
            return
        device, dtype, fixable = target
        method = func.attr.value
        message = (
            f"`torch.{name}(...).{method}(...)` builds the tensor on the CPU and then copies it: "
            f"create it on the device with `torch.{name}(..., device=...)`"
        )
        fix = None
        if fixable and device is not None and not self._blocks_fix(factory):
            fix = self._fix(node, factory, name, device, dtype)
        # What sizes and places the tensor tells whether it is built for each batch.
        sizes = tuple(a.value for a in factory.args if a.keyword is None)
        if name in _EXACT and name not in ("eye", "arange") and any(self.context.literal(v) == 0 for v in sizes):
            return  # an empty tensor (`torch.zeros(0, d)`, an edge case's placeholder): nothing is copied
        moved_to = tuple(a.value for a in node.args if a.keyword is None or a.keyword.value == "device")
        self._candidates.append((node, sizes + moved_to, message, fix))

    # -- reading the move ------------------------------------------------------------------------
    def _cuda_target(self, node: cst.Call) -> Optional[tuple[Optional[str], Optional[cst.BaseExpression], bool]]:
        """(device source text or None, dtype, fixable) for `.cuda(...)`."""
        allowed = {"non_blocking", "device"}
        if any(a.keyword is not None and a.keyword.value not in allowed for a in node.args):
            return None, None, False
        args = positional(node)
        device_arg = keyword(node, "device")
        if len(args) > 1 or (args and device_arg is not None):
            return None
        given = args[0].value if args else device_arg.value if device_arg is not None else None
        if given is None:
            return '"cuda"', None, True
        value = self.context.literal(given)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return f'"cuda:{value}"', None, True
        return None, None, False  # reported, not fixed: `.cuda(None)` is not `device=None`

    def _to_target(self, node: cst.Call) -> Optional[tuple[Optional[str], Optional[cst.BaseExpression], bool]]:
        """(device source text, dtype, fixable) for `.to(...)` when it is a move to an accelerator, else None."""
        args = positional(node)
        device_arg = keyword(node, "device")
        dtype_arg = keyword(node, "dtype")
        if device_arg is not None:
            if args:
                return None
            device = device_arg.value
            if self.semantic.device_kind(device) == "cpu":
                return None
        else:
            if not args:
                return None
            device = args[0].value
            kind = self.semantic.device_kind(device)
            if kind != "accel":
                return None  # a dtype, another tensor, the CPU, or undecidable
        dtype = dtype_arg.value if dtype_arg is not None else None
        fixable = True
        rest = args[1:] if device_arg is None else args
        if rest:
            if dtype is not None or not is_dtype_expr(self.context, rest[0].value):
                fixable = False
            else:
                dtype = rest[0].value
            if len(rest) > 1:
                fixable = False  # non_blocking / copy given positionally: keep it simple
        if any(a.keyword is not None and a.keyword.value not in ("device", "dtype", "non_blocking", "copy") for a in node.args):
            fixable = False
        return self.context.code(device), dtype, fixable

    # -- fixing ----------------------------------------------------------------------------------
    def _blocks_fix(self, factory: cst.Call) -> bool:
        for blocker in ("requires_grad", "pin_memory", "layout"):
            arg = keyword(factory, blocker)
            if arg is not None and self.context.literal(arg.value) is not False:
                return True
        return False

    def _safe(self, factory: cst.Call, name: str) -> bool:
        if name in _RANDOM or name in _RANGES:
            return False
        if name != "arange":
            return True
        dtype = keyword(factory, "dtype")
        if dtype is not None:
            qual = self.context.qualname(dtype.value) or ""
            if not qual.startswith(("torch.int", "torch.long", "torch.uint", "torch.short")):
                return False
        if has_star_args(factory):
            return False
        values = [a.value for a in factory.args if a.keyword is None or a.keyword.value in ("start", "end", "step")]
        return all(_int_like(self.context, v) for v in values)

    def _fix(
        self, node: cst.Call, factory: cst.Call, name: str, device: str, dtype: Optional[cst.BaseExpression]
    ) -> Fix:
        new = with_keyword(factory, "device", device)
        text = None
        if dtype is not None:
            if name in _CAST_FREE:
                new = with_keyword(new, "dtype", dtype)
            else:
                text = f"{self.context.code(new)}.to({self.context.code(dtype)})"
        replacement = text if text is not None else new
        safe = self._safe(factory, name)
        return Fix(f"Create the tensor on the device with device={device}", [Replace(node, replacement)], safe=safe)
