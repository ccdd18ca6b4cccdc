"""TL206 data-dependent-shape-in-training-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.names import last_name
from torchlint.rules.sync._common import EXPLANATION_COMMON, SyncRule


class DataDependentShapeInTrainingLoop(SyncRule):
    code = "TL206"
    name = "data-dependent-shape-in-training-loop"
    summary = (
        "An operation whose output size depends on tensor values (`x[mask]`, `nonzero()`, `torch.where(cond)`, "
        "`masked_select`, `unique`) on every step of a training loop."
    )
    message = (
        "The output size depends on the data, so the host waits for the GPU to learn it on every step: keep "
        "shapes static (`(x * mask).sum() / mask.sum()`, `torch.where(mask, x, 0)`)"
    )
    explanation = EXPLANATION_COMMON.format(
        what="an output whose size depends on values: the host must read the count to allocate it"
    )
    bad = (
        "for x, y in loader:\n"
        "    out = model(x)\n"
        "    valid = y != -100\n"
        "    loss = criterion(out[valid], y[valid])\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    good = (
        "for x, y in loader:\n"
        "    out = model(x)\n"
        "    loss = criterion(out, y)  # ignore_index=-100 masks inside the kernel\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    false_positives = (
        "Some algorithms need a data-dependent selection (sampling positives for a detector's loss); the sync "
        "is then the price of the algorithm. Silence it with `# noqa: TL206`."
    )
    default_enabled = False
    _SELECTING = ("nonzero", "masked_select", "unique", "argwhere", "unique_consecutive")

    def visit_Call(self, node: cst.Call) -> None:
        name = last_name(node.func)
        if name not in (*self._SELECTING, "where"):
            return
        qual = self.context.qualname(node)
        if qual is not None:
            if not qual.startswith("torch.") or qual.rsplit(".", 1)[-1] not in (*self._SELECTING, "where"):
                return
            tensor_args = [a.value for a in node.args if a.keyword is None]
            if name == "where" and len(node.args) != 1:
                return
            if not tensor_args or not self.values.is_tensor(tensor_args[0]):
                return
        elif isinstance(node.func, cst.Attribute):
            if name == "where" or not self.values.is_tensor(node.func.value):
                return
        else:
            return
        self._report_in_training(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return
        index = node.slice[0].slice.value
        if not self._is_mask(index):
            return
        if not self.values.is_tensor(node.value):
            return
        self._report_in_training(node)

    def _is_mask(self, index: cst.BaseExpression) -> bool:
        expr = index
        if isinstance(expr, cst.Name):
            value = self.context.assigned_value(expr)
            if value is None:
                return False
            expr = value
        if isinstance(expr, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
                return False
        elif isinstance(expr, cst.Call) and last_name(expr.func) in ("isnan", "isinf", "isfinite", "bool", "eq", "ne", "gt", "lt", "ge", "le", "logical_and", "logical_or", "logical_not"):
            pass
        elif isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            pass
        else:
            return False
        return self.values.is_tensor(expr)

    def _report_in_training(self, node: cst.CSTNode) -> None:
        statement = self.context.enclosing_statement(node)
        if statement is not None and statement is getattr(self, "_last_statement", None):
            return  # one finding per statement
        loop = self.semantic.per_step(node)
        if loop is not None and self.semantic.is_training_loop(loop):
            self._last_statement = statement
            self.report(node)
