"""TL205 cuda-synchronize-in-training-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.names import last_name
from torchlint.rules.sync._common import EXPLANATION_COMMON, SyncRule
from torchlint.semantic.calls import CLOCK_CALLS


_TIMED = (
    "`torch.cuda.synchronize()` to time every step stalls the host each step: record CUDA events "
    "(`torch.cuda.Event(enable_timing=True)`) and read them once, or synchronise only on the steps you log"
)


class CudaSynchronizeInTrainingLoop(SyncRule):
    code = "TL205"
    name = "cuda-synchronize-in-training-loop"
    summary = "`torch.cuda.synchronize()` on every step of a training or evaluation loop."
    message = (
        "`torch.cuda.synchronize()` on every step stalls the host until the GPU is idle: remove it, "
        "or synchronise only on the steps you time or log"
    )
    explanation = EXPLANATION_COMMON.format(what="`torch.cuda.synchronize()` does nothing else")
    bad = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    torch.cuda.synchronize()\n"
    )
    good = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    false_positives = (
        "Timing each step with a host clock needs a sync to measure the GPU's work, but the sync still stalls "
        "every step: in a loop that reads a clock (`time.time()`, `time.perf_counter()`) the rule says so and "
        "suggests CUDA events (`torch.cuda.Event(enable_timing=True)`, read once at the end) or timing only the "
        "steps you log. A benchmark that must time each step on its own can silence it with `# noqa: TL205`."
    )
    requires = ("synchronize",)

    def visit_Call(self, node: cst.Call) -> None:
        if last_name(node.func) != "synchronize":
            return
        qual = self.context.qualname(node)
        if qual not in ("torch.cuda.synchronize", "torch.accelerator.synchronize", "torch.mps.synchronize", "torch.xpu.synchronize"):
            return
        loop = self.semantic.every_step(node)
        if loop is None:
            return
        self.report(node, _TIMED if self._timed(loop) else None)

    def _timed(self, loop: cst.CSTNode) -> bool:
        for call in self.semantic.calls_in(loop):
            name = last_name(call.func)
            if name in CLOCK_CALLS:
                return True
        return False
