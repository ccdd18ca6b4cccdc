"""TL207 sync-in-helper-called-in-training-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.rules.sync._common import (
    ADVICE,
    EXPLANATION_COMMON,
    SyncRule,
)
from torchlint.semantic.calls import is_self_attribute


class SyncInHelperCalledInTrainingLoop(SyncRule):
    code = "TL207"
    name = "sync-in-helper-called-in-training-loop"
    summary = (
        "A call, on every step of a training loop, to a function of the same file that reads a device "
        "value on the host (`.item()`, `float(t)`, `.cpu()`, `torch.cuda.synchronize()`)."
    )
    message = "This helper reads a device value on the host on every step: " + ADVICE
    _TEMPLATE = "`{name}()` reads a device value on the host ({how}) on every step: " + ADVICE
    explanation = EXPLANATION_COMMON.format(what="here inside a helper function")
    bad = (
        "def accuracy(logits, labels):\n"
        "    return (logits.argmax(1) == labels).float().mean().item()\n\n"
        "for x, y in loader:\n"
        "    out = model(x)\n"
        "    loss = criterion(out, y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    accs.append(accuracy(out, y))\n"
    )
    good = (
        "def accuracy(logits, labels):\n"
        "    return (logits.argmax(1) == labels).float().mean()  # a tensor: no sync\n\n"
        "for x, y in loader:\n"
        "    out = model(x)\n"
        "    loss = criterion(out, y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    accs.append(accuracy(out.detach(), y))\n"
        "print(torch.stack(accs).mean().item())\n"
    )
    false_positives = (
        "The helper may sync only on some paths, or on CPU values; the rule reads its body without its "
        "branches, except a read of a value it first checks is a tensor (`if isinstance(v, torch.Tensor): v = "
        "v.item()`, a metric logger's `update`), or of a parameter in a helper of another file "
        "(`pred.cpu().numpy()` in `def confusion(label, pred)`): such a helper is reported only where it is handed "
        "a tensor. "
        "A read the program needs on the host is not counted: a helper whose value goes to an environment's "
        "`step()` (`action = agent.select_action(state)` then `env.step(action)`), a read inside the helper whose "
        "value goes to a host structure (`memory.update_priorities(idx, td.cpu().numpy())`), and a read right after "
        "such a read with no device work queued between (the GPU is already idle). A helper that runs a whole "
        "evaluation (its own loop runs a model on each batch) is judged in that loop, per batch, not at the call. "
        "A helper that reads only the tensors it is given, or values it computes from them alone (a meter's "
        "`self.correct += (pred.argmax(1) == y).sum().item()`), is reported where it is handed one, or a name bound to a "
        "tensor on one path and to `None` on the others; a meter held in a dict (`meters[\"acc\"].update(out, y)` after "
        "`meters = {\"acc\": Accuracy()}`) is followed to its class. "
        "One finding per sync: where this call is reported, the read inside the helper is not reported again "
        "(TL201). Silence a deliberate call with `# noqa: TL207`."
    )

    def visit_Module(self, node: cst.Module) -> None:
        self._candidates: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        receiver = func.value if isinstance(func, cst.Attribute) else None
        if isinstance(receiver, cst.Subscript):
            receiver = receiver.value  # `meters["loss"].update(loss)`: an object held in a dict
        if isinstance(func, cst.Name) or isinstance(receiver, cst.Name) or (receiver is not None and is_self_attribute(receiver)):
            if self.semantic.every_step(node) is not None:
                self._candidates.append(node)

    def leave_Module(self, node: cst.Module) -> None:
        helpers = self.semantic.calls
        for call in self._candidates:
            found = helpers.sync_reported_at(call)
            if found is not None:
                self.report(call, self._TEMPLATE.format(name=found[0], how=found[1]))
