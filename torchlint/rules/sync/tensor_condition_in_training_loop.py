"""TL204 tensor-condition-in-training-loop."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from torchlint.rules.sync._common import EXPLANATION_COMMON, SyncRule


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
        "without a per-step Python branch. Silence a deliberate one with `# noqa: TL204`."
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
        if self.semantic.every_step(test) is None:  # asked first: it is cheaper than the tensor question
            return
        for part in self._operands(test):
            if self.values.is_tensor(part):
                self.report(test)
                return

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
