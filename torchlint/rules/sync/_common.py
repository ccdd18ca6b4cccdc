"""What the rules of this family share."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.rule import FixSafety, Rule
from torchlint.semantic.placed_values import shown_on_device
from torchlint.semantic.values import ValueKinds

FAMILY = "Host-device synchronisation"


ADVICE = "keep the running value on the device (`running += loss.detach()`) and read it every N steps"


class SyncRule(Rule):
    family = FAMILY
    fix_safety = FixSafety.NONE

    @property
    def values(self) -> ValueKinds:
        return self.semantic.values

    def walks_device_tensor(self, collection: cst.BaseExpression) -> bool:
        """A per-element read walks a device tensor: one the code shows to be one, not a parameter, whose
        place its callers decide (a forward's `lengths` a caller moved to the host)."""
        if isinstance(collection, cst.Name) and self.context.is_parameter(collection):
            return False
        return self.values.is_tensor(collection)

    def walks_placed_tensor(self, collection: cst.BaseExpression) -> bool:
        """A read of every element, in any loop, walks a tensor its own function puts on the device
        (`placed_values`): a model's output on an input never moved, or a parameter, may be on the host."""
        return self.values.is_tensor(collection) and shown_on_device(self.context, self.values, collection)

    def report(self, node: cst.CSTNode, message: Optional[str] = None, **kwargs: object) -> None:
        # a CPU-only program pays nothing for a host read; a module a GPU script imports runs on its device.
        # A test suite's loops check behaviour, not speed.
        if self.semantic.on_accelerator_at(node) and not self.semantic.is_test_module:
            super().report(node, message, **kwargs)  # type: ignore[arg-type]


EXPLANATION_COMMON = (
    "CUDA kernels run asynchronously: the Python loop normally races ahead of the GPU, queueing the next "
    "step's work while the current one computes. Reading a device value on the host ({what}) makes the CPU wait "
    "until every queued kernel has finished and the value has been copied back; only then does Python go on to "
    "queue more work. Done every step, the GPU idles while the host prepares the next step, and the pipeline "
    "never fills again. The cost is the GPU's idle time per step, so it is largest for small models and short "
    "steps, where the queue is what keeps the GPU busy. PyTorch's Performance Tuning Guide (\"Avoid unnecessary "
    "CPU-GPU synchronization\") lists exactly these operations: `print(cuda_tensor)`, `cuda_tensor.item()`, "
    "`cuda_tensor.cpu()`, `cuda_tensor.nonzero()`, and Python control flow on CUDA results such as "
    "`if (cuda_tensor != 0).all()`. On a CPU-only run nothing is asynchronous and none of this costs anything, "
    "so the rule stays silent in a file that puts nothing on an accelerator (no `.cuda()`, `.to(device)`, "
    "`device=`, `torch.device(\"cuda\")`, `Accelerator`, outside comments; listing GPUs or calling "
    "`torch.cuda.is_available()` is not enough) unless a project file that does imports it, directly or through up to two other modules (its `__main__` block "
    "aside), and in one that moves only its model and never a batch (the script then runs on the CPU). A test "
    "suite's loops check behaviour, not speed: the rules stay silent there."
)


def chained_from(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`images[i]` in `images[i].detach().data`: what the methods and `.data` chained on it start from."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value
        else:
            return expr
