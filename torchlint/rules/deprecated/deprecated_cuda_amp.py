"""TL801 deprecated-cuda-amp."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import has_star_args, keyword, positional, with_keyword
from torchlint.lint.names import last_name
from torchlint.lint.rule import Fix, FixSafety, Replace, Rule
from torchlint.lint.torch_requirement import allows_older_than, version_text
from torchlint.lint.walk import descendants

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

# The oldest torch that has each replacement.
_NEEDS = {"autocast": (2, 0), "GradScaler": (2, 3), "custom_fwd": (2, 4), "custom_bwd": (2, 4)}

# Names in an `if` test that pick code by torch version (`hasattr(torch, "amp")`, `TORCH_VERSION >= ...`).
_VERSION_WORDS = ("version", "hasattr")

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
        "A version switch is left alone: an old spelling in the `except` handler of a `try` that uses "
        "`torch.amp` (or in the `try` whose handler does), or in a branch of an `if` that tests the torch "
        "version or `hasattr(torch, \"amp\")`, runs only on a torch too old for the new one and is not "
        "reported. Only calls and decorators are reported, not other references "
        "(`isinstance(scaler, torch.cuda.amp.GradScaler)`)."
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
        "new ones with exactly these arguments. The new spellings need a recent torch (`torch.amp.autocast` "
        "2.0, `torch.amp.GradScaler` 2.3, `custom_fwd/custom_bwd(device_type=)` 2.4): when the project declares "
        "an older floor (`[project] dependencies` or optional dependencies, poetry, `setup.cfg`, "
        "`requirements*.txt` at its root), the fix is unsafe and the message says which declaration allows the "
        "older torch."
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
        if qual not in _AUTOCAST and qual not in _SCALER and qual not in _CUSTOM:
            return
        if self._in_version_fallback(node):
            return  # runs only on a torch too old for the new spelling
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
        if name is None or self._in_version_fallback(node):
            return
        torch = self.context.local_name_for("torch")
        new = f"{torch}.amp.{name}(device_type={self._string('cuda')})"
        fix = Fix(f"Use torch.amp.{name}(device_type=\"cuda\")", [Replace(expr, new)], imports=("torch",))
        self.report(expr, self._custom_message(name), fix=fix)

    def report(self, node: cst.CSTNode, message: Optional[str] = None, *, fix: Optional[Fix] = None) -> None:
        """Report; the fix is unsafe when the project declares a torch older than the replacement needs."""
        if fix is not None:
            name = next(n for n in _NEEDS if f".{n}(" in fix.description)
            needed = _NEEDS[name]
            declared = allows_older_than(self.context.source.path, needed)
            if declared is not None:
                why = (
                    f"torch.amp.{name} needs torch {version_text(needed)}, and the project allows "
                    f"torch {version_text(declared.floor)} ({declared.where})"  # type: ignore[arg-type]
                )
                fix = Fix(f"{fix.description} (unsafe: {why})", fix.changes, safe=False, imports=fix.imports)
                message = f"{message}; the fix is unsafe: {why}"
        super().report(node, message, fix=fix)

    def _in_version_fallback(self, node: cst.CSTNode) -> bool:
        """`node` is the old-torch branch of a version switch: an `except` handler of a `try` whose body
        uses `torch.amp`, or a branch of an `if` that tests the torch version or `hasattr(torch, ...)`."""
        child = node
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.Try) and child is not ancestor.body and self._uses_torch_amp(ancestor.body):
                return True
            if isinstance(ancestor, (cst.If, cst.IfExp)) and child is not ancestor.test and self._tests_version(ancestor.test):
                return True
            if isinstance(ancestor, (cst.Try, cst.If)) and child is ancestor.body and self._fallback_uses_torch_amp(ancestor):
                return True  # the old spelling first, the new one as the fallback: leave the switch alone
            child = ancestor
        return False

    def _fallback_uses_torch_amp(self, statement: cst.CSTNode) -> bool:
        if isinstance(statement, cst.Try):
            return any(self._uses_torch_amp(h) for h in statement.handlers)
        return False

    def _uses_torch_amp(self, block: cst.CSTNode) -> bool:
        for node in descendants(block):
            if isinstance(node, (cst.Attribute, cst.Name)):
                qual = self.context.qualname(node) or ""
                if qual.startswith("torch.amp.") or qual in ("torch.autocast", "torch.amp"):
                    return True
        return False

    def _tests_version(self, test: cst.BaseExpression) -> bool:
        for node in (test, *descendants(test)):
            if isinstance(node, (cst.Name, cst.Attribute)):
                name = (last_name(node) or "").lower()
                if any(word in name for word in _VERSION_WORDS):
                    return True
        return False

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
