"""TL204 tensor-condition-in-training-loop."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from torchlint.rules.sync._common import EXPLANATION_COMMON, SyncRule


_PER_ELEMENT = (
    "A condition on each element of a device tensor waits for the GPU once per element: copy the tensor to the "
    "host once before the loop (`.tolist()`, `.cpu()`), or decide on the device (`torch.where`, a mask)"
)


class TensorConditionInTrainingLoop(SyncRule):
    code = "TL204"
    name = "tensor-condition-in-training-loop"
    summary = (
        "A device tensor used as a condition (`if torch.isnan(loss):`, `assert (x > 0).all()`, "
        "`while err > tol:`) on every step."
    )
    message = (
        "A tensor condition waits for the GPU on every step (Python needs its value): check it every N steps, "
        "or keep the decision on the device (`torch.where`, `torch.nan_to_num`)"
    )
    explanation = EXPLANATION_COMMON.format(what="`if`, `while`, `assert`, `and`/`or`/`not` call `bool(t)`")
    bad = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    if torch.isnan(loss):\n"
        "        raise RuntimeError(\"loss is NaN\")\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    good = (
        "for step, (x, y) in enumerate(loader):\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    if step % 100 == 0 and torch.isnan(loss):\n"
        "        raise RuntimeError(\"loss is NaN\")\n"
    )
    false_positives = (
        "A check that must stop training at once (NaN detection before an optimizer step that would corrupt "
        "the weights) may be worth its cost; `torch.autograd.detect_anomaly` or a GradScaler's inf checks do it "
        "without a per-step Python branch. A condition on every element, in any loop, is reported only when the "
        "function itself puts the tensor on the device (a parameter, or a model's output on an input that is "
        "never moved, may be on the host). Silence a deliberate one with `# noqa: TL204`."
    )

    def visit_If(self, node: cst.If) -> None:
        self._check(node.test, node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node.test, node)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._check(node.test, node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._check(node.test, node)

    def _check(self, test: cst.BaseExpression, where: cst.CSTNode) -> None:
        every_step = self.semantic.every_step(test) is not None
        for part in self._operands(test):
            if every_step and self.values.is_tensor(part):
                self.report(test)
                return
            if self._reads_element(part):
                self.report(test, _PER_ELEMENT)
                return

    def _reads_element(self, part: cst.BaseExpression) -> bool:
        """`scores[i] > 0.5` under `for i in range(len(scores))`, `s > 0.5` under `for s in scores`: one wait
        per element of a device tensor, in any loop (post-processing included)."""
        sides = [part.left, *(c.comparator for c in part.comparisons)] if isinstance(part, cst.Comparison) else [part]
        for side in sides:
            if isinstance(side, (cst.Name, cst.Subscript)):
                collection = self.semantic.element_read(side)
                if collection is not None and self.walks_placed_tensor(collection):
                    return True
        return False

    def _operands(self, test: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
        """The operands Python converts to bool, stopping after an interval test joined by `and`
        (`step % 100 == 0 and torch.isnan(loss)` reads the tensor only every 100 steps)."""
        if isinstance(test, cst.BooleanOperation):
            yield from self._operands(test.left)
            if isinstance(test.operator, cst.And) and self.semantic.is_interval_test(test.left):
                return
            yield from self._operands(test.right)
        elif isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            yield from self._operands(test.expression)
        else:
            yield test
