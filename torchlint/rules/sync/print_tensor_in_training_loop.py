"""TL203 print-tensor-in-training-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.calls import keyword, positional
from torchlint.lint.names import last_name
from torchlint.rules.sync._common import ADVICE, EXPLANATION_COMMON, SyncRule


class PrintTensorInTrainingLoop(SyncRule):
    code = "TL203"
    name = "print-tensor-in-training-loop"
    summary = (
        "Printing or formatting a device tensor (`print(loss)`, `f\"{loss:.3f}\"`, `\"{}\".format(loss)`, "
        "`\"%.3f\" % loss`, `str(loss)`, `pbar.set_postfix(loss=loss)`, `writer.add_scalar(..., loss)`) on every step."
    )
    message = "Formatting a tensor waits for the GPU and copies it to the host on every step: " + ADVICE
    explanation = EXPLANATION_COMMON.format(
        what="printing or formatting a tensor, and TensorBoard's `add_scalar`, read its values"
    )
    bad = (
        "for step, (x, y) in enumerate(loader):\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    print(f\"step {step}: loss {loss:.4f}\")\n"
    )
    good = (
        "for step, (x, y) in enumerate(loader):\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    if step % 100 == 0:\n"
        "        print(f\"step {step}: loss {loss.item():.4f}\")\n"
    )
    false_positives = (
        "A tensor on the CPU prints without a sync; the rule cannot always tell where a tensor lives. Silence a "
        "deliberate one with `# noqa: TL203`."
    )

    _SINKS = {"print": None, "add_scalar": 1, "add_scalars": 1}

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if self.values.is_tensor(node.expression) and self._every_step(node):
            self.report(node)

    def _every_step(self, node: cst.CSTNode) -> bool:
        """`node` runs on every step, and not only to build the message of an error (`raise ValueError(f"..{x}")`,
        `assert ok, f"..{x}"`), which is formatted once, when the run stops."""
        if self.semantic.every_step(node) is None:
            return False
        child = node
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.Raise) or (isinstance(ancestor, cst.Assert) and child is ancestor.msg):
                return False
            if isinstance(ancestor, cst.BaseStatement) and not isinstance(ancestor, cst.SimpleStatementLine):
                break
            child = ancestor
        return True

    def visit_Call(self, node: cst.Call) -> None:
        name = last_name(node.func)
        where: cst.CSTNode | None = None  # the expression to report when not the tensor itself
        if name == "format" and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.SimpleString):
            values = [v for a in node.args if a.star != "**" for v in (self._items(a.value) if a.star else [a.value])]
            where = node
        elif name == "print" and isinstance(node.func, cst.Name):
            values = [a.value for a in positional(node)]
        elif name in ("str", "repr") and isinstance(node.func, cst.Name) and len(node.args) == 1:
            values = [node.args[0].value] if not self.context.lookup(node.func) else []
        elif name in ("add_scalar",) and isinstance(node.func, cst.Attribute):
            arg = node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else keyword(node, "scalar_value")
            values = [arg.value] if arg is not None else []
        elif name == "set_postfix" and isinstance(node.func, cst.Attribute):
            # pbar.set_postfix(loss=loss) or set_postfix({"loss": loss}): the progress bar formats each value
            values = [a.value for a in node.args if a.keyword is not None]
            for arg in positional(node):
                if isinstance(arg.value, cst.Dict):
                    values.extend(e.value for e in arg.value.elements if isinstance(e, cst.DictElement))
        else:
            return
        if not values or not self._every_step(node):
            return
        for value in values:
            if self.values.is_tensor(value):
                self.report(where if where is not None else value)  # `value` is an argument of `node`
                return

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        # "%.3f" % loss
        if not isinstance(node.operator, cst.Modulo) or not isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString)):
            return
        right = node.right
        named = isinstance(right, cst.Name) and isinstance(self.context.assigned_value(right), cst.Tuple)
        if named:
            right = self.context.assigned_value(right)  # losses = (d_loss, g_loss); "%.3f %.3f" % losses
        # `"%.3f %.3f" % (*losses,)`: the unpacked elements of a tensor are tensors, and those of a list of them
        elements = right.elements if isinstance(right, cst.Tuple) else [cst.Element(right)]
        items = [v for e in elements for v in (self._items(e.value) if isinstance(e, cst.StarredElement) else [e.value])]
        if len(items) == 1 and isinstance(items[0], cst.Call) and last_name(items[0].func) in ("tuple", "list"):
            call = items[0]  # `"%.3f %.3f" % tuple(losses)`
            if isinstance(call.func, cst.Name) and len(call.args) == 1 and not self.context.lookup(call.func):
                items = self._items(call.args[0].value)
        tensors = [i for i in items if self.values.is_tensor(i)]
        if tensors and self._every_step(node):
            inside = any(a is node for a in self.context.ancestors(tensors[0]))
            self.report(tensors[0] if inside and not named else node.right)

    def _items(self, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
        """What unpacking `expr` gives: the elements of a list or tuple, also through the name it is assigned
        to (`parts = [loss, reg]`), else `expr` itself (the rows of a tensor are tensors)."""
        if isinstance(expr, cst.Name) and isinstance(self.context.assigned_value(expr), (cst.List, cst.Tuple)):
            expr = self.context.assigned_value(expr)  # type: ignore[assignment]
        if isinstance(expr, (cst.List, cst.Tuple)):
            return [e.value for e in expr.elements if not isinstance(e, cst.StarredElement)]
        return [expr]
