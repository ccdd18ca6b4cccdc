"""TL202 tensor-to-python-number-in-training-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.calls import positional
from torchlint.rules.sync._common import ADVICE, EXPLANATION_COMMON, SyncRule


_PER_ELEMENT = (
    "`{name}()` of each element of a device tensor waits for the GPU once per element: copy the whole tensor to "
    "the host once before the loop (`.tolist()`, `.cpu()`)"
)


class TensorToPythonNumberInTrainingLoop(SyncRule):
    code = "TL202"
    name = "tensor-to-python-number-in-training-loop"
    summary = "`float(t)`, `int(t)` or `bool(t)` of a device tensor on every step of a training or evaluation loop."
    message = "`float(tensor)` waits for the GPU and copies to the host on every step: " + ADVICE
    explanation = EXPLANATION_COMMON.format(what="`float(t)`, `int(t)` and `bool(t)` call `t.item()`")
    bad = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x.cuda()), y.cuda())\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    losses.append(float(loss))\n"
    )
    good = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x.cuda()), y.cuda())\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    losses.append(loss.detach())\n"
        "losses = torch.stack(losses).tolist()  # one copy after the loop\n"
    )
    false_positives = (
        "A tensor that lives on the CPU does not synchronise; the rule cannot always tell. A number that Python "
        "needs to size something (`n = int(counts.max())` then `x.view(n, -1)` or `range(n)`) is not reported. "
        "A conversion of every element, in any loop, is reported only when the function itself puts the tensor "
        "on the device (`.to(device)`, `.cuda()`, a factory given a device, a model run on a moved input): a "
        "parameter, which callers may hand over already copied to the host, is not. "
        "Silence a deliberate conversion with `# noqa: TL202`."
    )
    requires = ("float(", "int(", "bool(")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Name) or func.value not in ("float", "int", "bool"):
            return
        args = positional(node)
        if len(args) != 1 or len(node.args) != 1 or self.context.lookup(func):
            return  # rebound builtin
        if self.semantic.every_step(node) is None or not self.values.is_tensor(args[0].value):
            collection = self.semantic.element_read(args[0].value)
            if collection is not None and self.walks_placed_tensor(collection):
                self.report(node, _PER_ELEMENT.format(name=func.value))  # `[int(b) for b in boxes]`, in any loop
            return
        if self.semantic.needed_on_host(node) and self.semantic.element_read(args[0].value) is None:
            return  # `n = int(counts.max())` then `x.view(n, -1)`: Python needs the number
        self.report(node, f"`{func.value}(tensor)` waits for the GPU and copies to the host on every step: " + ADVICE)
