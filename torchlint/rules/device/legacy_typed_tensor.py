"""TL603 legacy-typed-tensor."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.lint.calls import keyword, positional
from torchlint.lint.rule import FixSafety, Rule

_TYPED = frozenset(
    {"FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor", "ShortTensor",
     "IntTensor", "LongTensor", "BoolTensor"}
)  # fmt: skip

_DTYPE_OF = {
    "FloatTensor": "torch.float32",
    "DoubleTensor": "torch.float64",
    "HalfTensor": "torch.float16",
    "BFloat16Tensor": "torch.bfloat16",
    "ByteTensor": "torch.uint8",
    "CharTensor": "torch.int8",
    "ShortTensor": "torch.int16",
    "IntTensor": "torch.int32",
    "LongTensor": "torch.int64",
    "BoolTensor": "torch.bool",
}

_TYPED_STRING = re.compile(r"^torch\.cuda\.(\w+Tensor)$")


class LegacyTypedTensor(Rule):
    code = "TL603"
    name = "legacy-typed-tensor"
    family = "Device placement and transfers"
    summary = (
        "Legacy CUDA tensor types used to build or move tensors: `torch.cuda.FloatTensor(data)`, "
        "`x.type(torch.cuda.FloatTensor)`, and aliases such as `Tensor = torch.cuda.FloatTensor`."
    )
    message = (
        "Legacy CUDA tensor type: use torch.as_tensor(data, dtype=..., device=...) to build a tensor, "
        "or x.to(device, dtype, non_blocking=True) to move one"
    )
    explanation = (
        "`torch.cuda.FloatTensor(...)` and its siblings are the pre-0.4 typed constructors. Given data, they "
        "build the tensor on the host and copy it to the GPU with a blocking copy; `x.type(torch.cuda."
        "FloatTensor)` is a host-to-device copy and a cast hidden behind a type name, blocking by default. Old training "
        "scripts do this on every batch (`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`, "
        "then `imgs.type(Tensor)`), so each step waits for the copy, which cannot overlap with compute the way "
        "`x.to(device, non_blocking=True)` from pinned memory (`DataLoader(pin_memory=True)`) can. The "
        "constructors also hard-code CUDA and a dtype in one name, interpret a lone integer as a size "
        "(`torch.cuda.LongTensor(5)` is five uninitialised values, not `[5]`), and since PyTorch 2.1 warn: "
        "\"The torch.cuda.*DtypeTensor constructors are no longer recommended. It's best to use methods such "
        "as torch.tensor(data, dtype=*, device='cuda') to create tensors.\""
    )
    bad = (
        "import torch\n\n"
        "Tensor = torch.cuda.FloatTensor\n\n"
        "for imgs, targets in loader:\n"
        "    imgs = imgs.type(Tensor)\n"
        "    labels = torch.cuda.LongTensor(targets)\n"
    )
    good = (
        "import torch\n\n"
        "device = torch.device(\"cuda\")\n\n"
        "for imgs, targets in loader:  # DataLoader(..., pin_memory=True)\n"
        "    imgs = imgs.to(device, torch.float32, non_blocking=True)\n"
        "    labels = torch.as_tensor(targets, dtype=torch.int64, device=device)\n"
    )
    false_positives = (
        "`isinstance(x, torch.cuda.FloatTensor)` and type annotations are not reported, and neither is a "
        "constructor given sizes (`torch.cuda.LongTensor(max_len)`, `torch.cuda.FloatTensor(b, c)`): it allocates "
        "on the GPU directly, like `torch.empty(..., device=\"cuda\")`, and copies nothing; modernising it is "
        "about the legacy API, not speed; a size taken from a tensor (`x.shape`, `torch.Size(...)`) counts as one. "
        "Only code that runs once per step, batch or sample is reported (a training or evaluation loop, a "
        "`forward()`, and the functions they call): a constant built once in `__init__`, or statistics "
        "gathered once after an evaluation loop, cost one copy per run. A finding reached through an alias (`Tensor = torch.cuda.FloatTensor`) "
        "names the type and the line of the alias. Off by default: judged on real code, most of what it finds "
        "copies data that must reach the GPU anyway, or casts a tensor already there, so the legacy spelling "
        "rarely costs time; enable it (`--extend-select TL603`) to modernise a code base."
    )
    fix_safety = FixSafety.NONE
    default_enabled = False  # judged on real code: few of its findings are measurably slow
    fix_notes = (
        "No autofix: the legacy constructor reads a lone integer as a size and a sequence as data, and "
        "`.type(torch.cuda.FloatTensor)` keeps a tensor already on another GPU where it is, while "
        "`.to(\"cuda\")` moves it to the current one; no rewrite is equivalent in every case."
    )
    requires = ("Tensor",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._positions = None  # computed only when a finding rests on an alias
        self._candidates: list[tuple[cst.Call, str]] = []

    def leave_Module(self, node: cst.Module) -> None:
        # Decided once the walk is over: whether a function is hot depends on calls further down the file.
        for call, message in self._candidates:
            if self.semantic.on_hot_path(call):
                self.report(call, message)

    def _typed(self, node: cst.BaseExpression, _depth: int = 0) -> Optional[str]:
        """The legacy CUDA type named by `node` ("FloatTensor"), following a single-assignment alias."""
        found = self._typed_and_alias(node, _depth)
        return found[0] if found is not None else None

    def _typed_and_alias(
        self, node: cst.BaseExpression, _depth: int = 0
    ) -> Optional[tuple[str, Optional[cst.CSTNode]]]:
        """(the legacy CUDA type, the assignment of the alias it was reached through, if any)."""
        if _depth > 3:
            return None
        if isinstance(node, (cst.Name, cst.Attribute)):
            qual = self.context.qualname(node)
            if qual is not None:
                head, _, last = qual.rpartition(".")
                return (last, None) if head == "torch.cuda" and last in _TYPED else None
            if isinstance(node, cst.Name):
                value = self.context.assigned_value(node)
                if value is not None:
                    found = self._typed_and_alias(value, _depth + 1)
                    if found is not None:
                        bindings = self.context.lookup(node) or []
                        return found[0], found[1] or (bindings[0].node if bindings else None)
            return None
        if isinstance(node, cst.IfExp):
            return self._typed_and_alias(node.body, _depth + 1) or self._typed_and_alias(node.orelse, _depth + 1)
        if isinstance(node, cst.SimpleString):
            value = self.context.literal(node)
            match = _TYPED_STRING.match(value) if isinstance(value, str) else None
            return (match.group(1), None) if match and match.group(1) in _TYPED else None
        return None

    def _through_alias(self, name: cst.BaseExpression, typed: str, alias: Optional[cst.CSTNode]) -> str:
        """"`Tensor` is `torch.cuda.FloatTensor` (line 3): " for a finding that rests on an alias."""
        if alias is None:
            return ""
        if self._positions is None:
            self._positions = MetadataWrapper(self.context.module, unsafe_skip_copy=True).resolve(PositionProvider)
        line = self._positions[alias].start.line
        return f"`{self.context.code(name)}` is `torch.cuda.{typed}` (assigned on line {line}): "

    def _shape_only(self, call: cst.Call) -> bool:
        """`torch.cuda.LongTensor(n)`, `torch.cuda.FloatTensor(b, c)`: sizes, not data. It allocates on the GPU
        directly (like `torch.empty`): nothing is built on the host or copied."""
        args = [a for a in call.args if a.keyword is None]
        if not args or any(a.keyword is not None for a in call.args):
            return False
        if len(args) > 1 or args[0].star == "*":
            return all(not isinstance(a.value, (cst.List, cst.Tuple, cst.ListComp)) for a in args)
        return _is_size(self.context, args[0].value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "type":
            args = positional(node)
            target = args[0].value if args else None
            if target is None:
                arg = keyword(node, "dtype")
                target = arg.value if arg is not None else None
            found = self._typed_and_alias(target) if target is not None else None
            if found is not None:
                typed, alias = found
                self._candidates.append((
                    node,
                    self._through_alias(target, typed, alias)  # type: ignore[arg-type]
                    + f"`.type(torch.cuda.{typed})` is a blocking copy to the GPU plus a cast: "
                    f"use `.to(device, {_DTYPE_OF[typed]}, non_blocking=True)` (with pinned host memory)",
                ))
            return
        if isinstance(func, (cst.Name, cst.Attribute)):
            last = func.value if isinstance(func, cst.Name) else func.attr.value
            if "Tensor" not in last and self.context.qualname(func) is None:
                return
            found = self._typed_and_alias(func)
            if found is not None and not self._shape_only(node):
                typed, alias = found
                self._candidates.append((
                    node,
                    self._through_alias(func, typed, alias)
                    + f"Legacy constructor `torch.cuda.{typed}`: use `torch.as_tensor(data, dtype={_DTYPE_OF[typed]}, "
                    f"device=device)` for data, or `torch.empty(size, dtype={_DTYPE_OF[typed]}, device=device)` for a shape",
                ))


_SIZE_CALLS = frozenset({"len", "int", "item", "size", "numel", "dim"})


def _is_size(context, node: cst.BaseExpression, _depth: int = 0) -> bool:
    """An integer size: a literal, `len(x)`, `int(n)`, `t.item()`, `x.size(0)`, arithmetic of those, or a name
    assigned one."""
    if _depth > 4:
        return False
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Call):
        func = node.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        return name in _SIZE_CALLS or context.qualname(node) == "torch.Size"
    if isinstance(node, cst.Attribute) and node.attr.value == "shape":
        return True  # `x.shape`: a size
    if isinstance(node, cst.BinaryOperation):
        return _is_size(context, node.left, _depth + 1) and _is_size(context, node.right, _depth + 1)
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute):
        return node.value.attr.value == "shape"
    if isinstance(node, cst.Name):
        value = context.assigned_value(node)
        return value is not None and _is_size(context, value, _depth + 1)
    return False
