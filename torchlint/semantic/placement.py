"""Placement: where tensors live, and whether the program uses an accelerator at all.

A program that never puts data on a GPU (or another accelerator) runs everything synchronously on the
host, so host reads cost nothing and loading in the main process competes with nothing asynchronous.
Also: which expressions name a device, and whether a device is the CPU or an accelerator.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Optional

import libcst as cst

from torchlint.lint.calls import positional
from torchlint.lint.context import UNKNOWN, Context
from torchlint.lint.names import dotted, last_name
from torchlint.lint.walk import descendants
from torchlint.semantic import project
from torchlint.semantic.devices import (
    accelerator_in,
    is_device_list_name,
    is_device_name,
)
from torchlint.semantic.modules import is_module_like_receiver

_DTYPE_NAMES = frozenset(
    {
        "float", "float32", "float64", "double", "float16", "half", "bfloat16", "int", "int8", "int16", "int32",
        "int64", "long", "short", "uint8", "bool", "complex64", "complex128", "cfloat", "cdouble",
        "float8_e4m3fn", "float8_e5m2",
    }
)  # fmt: skip

_DTYPE_NAME = re.compile(r"^(?:\w+_)?dtype$")


def is_dtype_expr(context, node: cst.BaseExpression) -> bool:
    """`torch.float16`, `x.dtype`, a name called `dtype`."""
    qual = context.qualname(node)
    if qual is not None:
        head, _, last = qual.rpartition(".")
        return head == "torch" and last in _DTYPE_NAMES
    if isinstance(node, cst.Attribute):
        return bool(_DTYPE_NAME.match(node.attr.value))
    if isinstance(node, cst.Name):
        return bool(_DTYPE_NAME.match(node.value))
    return False


def device_kind(context, node: cst.BaseExpression, _depth: int = 0) -> Optional[str]:
    """"accel" when `node` is clearly an accelerator device, "cpu" when clearly the CPU, else None."""
    if _depth > 4:
        return None
    if isinstance(node, (cst.SimpleString, cst.Integer)):
        value = context.literal(node)
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return "accel"  # a CUDA device index
        if isinstance(value, str):
            if value == "cpu":
                return "cpu"
            return "accel" if accelerator_in(value) else None
        return None
    if isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        if isinstance(first, cst.FormattedStringText) and accelerator_in(first.value):
            return "accel"
        return None
    if isinstance(node, cst.Call):
        if context.qualname(node) == "torch.device" and node.args:
            # torch.device(anything but "cpu") names a device by construction
            return device_kind(context, node.args[0].value, _depth + 1) or "accel"
        return None
    if isinstance(node, cst.IfExp):
        kinds = {device_kind(context, node.body, _depth + 1), device_kind(context, node.orelse, _depth + 1)}
        if None in kinds:
            return None
        return "cpu" if kinds == {"cpu"} else "accel"
    if isinstance(node, cst.Subscript):
        base = node.value
        name = base.attr.value if isinstance(base, cst.Attribute) else base.value if isinstance(base, cst.Name) else None
        return "accel" if name is not None and is_device_list_name(name) else None
    if isinstance(node, cst.Attribute):
        if is_device_name(node.attr.value):
            return "accel"
        return None
    if isinstance(node, cst.Name):
        value = context.literal(node)
        if value is not UNKNOWN:
            if isinstance(value, str):
                return "cpu" if value == "cpu" else ("accel" if accelerator_in(value) else None)
            if isinstance(value, int) and not isinstance(value, bool):
                return "accel"
            return None
        assigned = context.assigned_value(node)
        if assigned is not None:
            kind = device_kind(context, assigned, _depth + 1)
            if kind is not None:
                return kind
        return "accel" if is_device_name(node.value) else None
    return None


def is_cpu_literal(context: "Context", expr: cst.BaseExpression) -> bool:
    value = context.literal(expr)
    if isinstance(value, str):
        return value.startswith("cpu")
    if isinstance(expr, cst.Call) and context.qualname(expr) == "torch.device":
        args = positional(expr)
        return bool(args) and is_cpu_literal(context, args[0].value)
    return False


def is_device_argument(context: "Context", expr: cst.BaseExpression) -> bool:
    """`device`, `args.device`, `"cuda"`, `torch.device("cuda", 0)`, `x.device`, `rank`: not a dtype."""
    qual = context.qualname(expr)
    if qual is not None:
        if qual.startswith("torch.") and qual != "torch.device":
            return False  # torch.float16 and friends
    value = context.literal(expr)
    if isinstance(value, str):
        return accelerator_in(value) is not None
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    if isinstance(expr, cst.Call):
        return qual == "torch.device" or (last_name(expr.func) or "") in ("device", "get_device", "current_device")
    name = last_name(expr)
    if name is None:
        return False
    return is_device_name(name)


def on_accelerator(context: "Context") -> bool:
    """Whether the file shows any sign of an accelerator (shared per file): on a CPU-only run nothing is
    asynchronous, so reading a value on the host costs nothing."""
    return context.shared(_OnAccelerator).value


class _OnAccelerator:
    def __init__(self, context: "Context") -> None:
        own = uses_accelerator(context.source.text)
        shows = own or _imports_accelerated(context) or _project_helper_moves(context)
        self.value = shows and not _moves_only_models(context) and not (own and _places_on_cpu_only(context))


def imported_by_accelerated(context: "Context") -> bool:
    """A module with no sign of an accelerator of its own that a project file putting data on one imports,
    directly or through up to two other modules (`algo/ppo.py`, whose `update()` the GPU training script
    calls; `layers.py`, imported by `model.py`, imported by it): its loops run on that program's device. A
    file that moves only its models (and so runs on the CPU) is not one."""
    source = context.source
    if uses_accelerator(source.text) or _moves_only_models(context):
        return False
    seen = {source.path}
    level = [source.path]
    for _ in range(_IMPORTER_LEVELS):
        level = [p for path in level for p in project.importers(path)[: project.MAX_CALLER_FILES] if p not in seen]
        level = list(dict.fromkeys(level))[:_MAX_IMPORTERS_ASKED]
        if any(_file_uses_accelerator(path) for path in level):
            return True
        seen.update(level)
    return False


_IMPORTER_LEVELS = 3  # a layer, its model, a package's `__init__.py` that re-exports it, the script

_MAX_IMPORTERS_ASKED = 24  # files per level: a widely shared utility module is imported by many


def _imports_accelerated(context: "Context") -> bool:
    """The file imports a project module that puts data on an accelerator (`from utils import
    DatasetIterater`, whose batches go `.to(self.device)`; `import world`, which picks `torch.device("cuda")`):
    the program runs on one, and this file's loops run its steps."""
    source = context.source
    return any(_file_uses_accelerator(path) for path in project.imported_modules(source.path, source.text))


# Triple-quoted strings: a docstring that mentions `DataParallel` puts nothing on a device.
_DOCSTRING = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'')


@lru_cache(maxsize=1024)
def _text_uses_accelerator(path: str, mtime: int, size: int) -> bool:
    text = project.read_text(path)
    return text is not None and uses_accelerator(_DOCSTRING.sub("", text))


def _file_uses_accelerator(path: str) -> bool:
    try:
        stat = os.stat(path)
    except OSError:
        return False
    return _text_uses_accelerator(path, stat.st_mtime_ns, stat.st_size)


def _project_helper_moves(context: "Context") -> bool:
    """The file calls a function of another project file that puts data on an accelerator
    (`from utils import gpu` ... `gpu(x, use_cuda)`)."""
    asked: set[str] = set()
    for node in descendants(context.module):
        if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)):
            callee = dotted(node.func)
            if callee in asked or len(asked) >= _MAX_HELPERS_ASKED:
                continue
            found = project.imported(context, node.func)
            if found is not None:
                asked.add(callee)  # type: ignore[arg-type]
                module, name = found
                function = module.function_summary(name)
                if function is not None and function.moves_to_accelerator:
                    return True
    return False


_MAX_HELPERS_ASKED = 16  # distinct project functions looked into: the answer is rarely far down the list

# Spellings of code that places data itself (data parallelism, accelerate, Lightning Fabric, launchers).
_FRAMEWORK_PLACES = r"DataParallel|[Aa]ccelerat|Fabric|local_rank|\.prepare\("


def _moves_only_models(context: "Context") -> bool:
    """The file puts its models on the device (`net.to(device)`, `model.cuda()`) but never any data: no
    other `.to(...)`/`.cuda()`, no `device=` keyword, no device handed to any other call, no
    `DataParallel` (which scatters host batches itself). Its batches stay on the host, so the script runs
    on the CPU (on a GPU its first forward pass would fail) and a host read costs nothing."""
    text = context.source.text
    if re.search(_FRAMEWORK_PLACES + r"|cuda\.\w*Tensor", text):
        return False
    moved_model = False
    for node in descendants(context.module):
        kind = type(node)  # exact types: see `walk.is_a`
        if kind is cst.Arg:
            if node.keyword is not None and node.keyword.value == "device":
                return False
            continue
        if kind is not cst.Call:
            continue
        func = node.func
        name = last_name(func)
        if isinstance(func, cst.Attribute) and name in ("to", "cuda"):
            if not is_module_like_receiver(context, func.value):
                return False
            moved_model = True
            continue
        if context.qualname(func) == "torch.device":
            continue
        if name is not None and is_device_name(name) and not name.startswith(("get_", "is_")):
            return False  # to_device(batch, device), move_to_device(...)
        for arg in node.args:
            value = arg.value
            last = last_name(value)
            if last is not None and is_device_name(last) and context.qualname(value) is None:
                return False  # train(model, loader, device): a helper that may move the batches
    return moved_model


def _places_on_cpu_only(context: "Context") -> bool:
    """Every device the file moves anything to is the CPU (`device = torch.device("cpu")  # or cuda`, then
    `.to(device)` and `device=device` throughout): the program runs on the host, however GPU-ready it reads."""
    text = context.source.text
    if re.search(_FRAMEWORK_PLACES + r"|cuda\.(?!is_available|device_count|get_device)", text):
        return False
    placed = False
    for node in descendants(context.module):
        kind = type(node)  # exact types: see `walk.is_a`
        if kind is cst.Arg and node.keyword is not None and node.keyword.value == "device":
            if device_kind(context, node.value) != "cpu":
                return False
            placed = True
        elif kind is cst.Call and isinstance(node.func, cst.Attribute) and node.func.attr.value in ("to", "cuda"):
            if node.func.attr.value == "cuda":
                return False
            first = node.args[0].value if node.args and node.args[0].keyword is None else None
            if first is None or not is_device_argument(context, first) and not is_cpu_literal(context, first):
                continue  # `.to(torch.float16)`, `.to(other)`: no device named
            if device_kind(context, first) != "cpu":
                return False
            placed = True
    return placed


_COMMENT_LINE = re.compile(r"^[ \t]*#.*$", re.MULTILINE)

_TRAILING_COMMENT = re.compile(r"#[^'\"\n]*$", re.MULTILINE)

# Evidence that code runs on an accelerator. Merely asking (`torch.cuda.is_available()`, listing
# `torch.cuda.device(i)`) or naming a device is not enough: something must be placed on one.
_DEVICE_NAME_PATTERN = r"(?:[\w.]*\.)?(?:\w*device\w*|\w*DEVICE\w*|dev|gpu|gpus|gpu_id|gpu_ids\[\w*\]|cuda|rank|local_rank)"

_ACCELERATOR = re.compile(
    r"\.cuda\("  # x.cuda(), model.cuda(0)
    r"|\.to\(\s*(?:" + _DEVICE_NAME_PATTERN + r"\s*[,)]"  # .to(device), .to(args.device, non_blocking=True), .to(rank)
    r"|f?[\"'](?:cuda|mps|xpu|npu|hpu)"  # .to("cuda:0")
    r"|torch\.device\(|device\s*=|[\w.]+\.device\b)"  # .to(torch.device(...)), .to(device=...), .to(x.device)
    r"|[(,]\s*device\s*=(?!=)"  # torch.zeros(n, device=device), Tensor.to(..., device=...)
    r"|torch\.device\(\s*f?[\"'](?:cuda|mps|xpu|npu|hpu)"  # torch.device("cuda" if ... else "cpu")
    r"|\b[Aa]ccelerator\b"  # HF accelerate, Lightning's accelerator=
    r"|\blocal_rank\b"
    r"|\bcuda\.(?:set_device|synchronize|amp|FloatTensor|LongTensor|current_device)\b"
    r"|\bDistributedDataParallel\b|\bDataParallel\b|\bgpus\s*=",
)


def uses_accelerator(text: str) -> bool:
    """Whether the code (comments aside) puts something on a GPU or another accelerator: a `.cuda()`
    call, `.to(device)` (a device-like name, `"cuda"`, `torch.device(...)`, `x.device`), a `device=`
    keyword, `torch.device("cuda")`, an `Accelerator`/`accelerator`, `local_rank`, `DataParallel`,
    `torch.cuda.set_device`/`synchronize`/`amp`.

    A script with every `.to(device)` commented out, an MNIST tutorial that never leaves the CPU, or one
    that only prints `torch.cuda.is_available()` pays nothing for an `.item()` and little for loading data
    in the main process.
    """
    code = _TRAILING_COMMENT.sub("", _COMMENT_LINE.sub("", text))
    return bool(_ACCELERATOR.search(code))
