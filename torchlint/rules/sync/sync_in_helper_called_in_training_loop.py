"""TL207 sync-in-helper-called-in-training-loop."""

from __future__ import annotations


from typing import Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import scope_nodes
from torchlint.rules.sync._common import ADVICE, CLOCK_CALLS, EXPLANATION_COMMON, SyncRule
from torchlint.semantic import loops
from torchlint.semantic.loops import per_step
from torchlint.semantic.values import T, UNK, value_kinds


class _Helpers:
    """Functions and methods defined in this file that read a device value on the host."""

    def __init__(self, context: "Context") -> None:
        self.context = context
        self.functions: dict[str, cst.FunctionDef] = {}
        self.methods: dict[tuple[cst.ClassDef, str], cst.FunctionDef] = {}
        for stmt in context.module.body:
            if isinstance(stmt, cst.FunctionDef):
                self.functions[stmt.name.value] = stmt
            elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                for inner in stmt.body.body:
                    if isinstance(inner, cst.FunctionDef):
                        self.methods[(stmt, inner.name.value)] = inner
        self._syncs: dict[tuple[cst.FunctionDef, bool], Optional[str]] = {}

    def callee(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        func = call.func
        if isinstance(func, cst.Name):
            if self.context.qualname(func) is not None:
                return None
            found = self.functions.get(func.value)
            if found is None:
                return None
            bindings = self.context.lookup(func)
            if not bindings or len(bindings) != 1 or bindings[0].node is not found:
                return None
            return found
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = self.context.enclosing(call, cst.ClassDef)
            if cls is None:
                return None
            return self.methods.get((cls, func.attr.value))  # type: ignore[arg-type]
        return None

    def sync_in(self, function: cst.FunctionDef, training: bool) -> Optional[str]:
        """How `function` syncs (e.g. "`.item()`"), or None. Copies of results to the host
        (`.cpu()`, `.tolist()`) count only when called from a training loop, as for TL201."""
        key = (function, training)
        if key in self._syncs:
            return self._syncs[key]
        self._syncs[key] = None
        values = value_kinds(self.context)
        found = None
        calls = [n for n in scope_nodes(function.body) if isinstance(n, cst.Call)]
        timed = any(last_name(c.func) in CLOCK_CALLS for c in calls)
        for node in calls:
            func = node.func
            name = last_name(func)
            if isinstance(func, cst.Attribute) and name in ("item", "tolist", "cpu") and not node.args:
                if name != "item" and not training:
                    continue
                kind = values.kind(func.value)
                if kind == T or (name == "item" and kind == UNK):
                    found = f"`.{name}()`"
                    break
            elif isinstance(func, cst.Name) and name in ("float", "int", "bool") and len(node.args) == 1:
                if values.is_tensor(node.args[0].value):
                    found = f"`{name}()` of a tensor"
                    break
            elif name == "synchronize" and self.context.qualname(node) == "torch.cuda.synchronize" and not timed:
                found = "`torch.cuda.synchronize()`"
                break
        self._syncs[key] = found
        return found


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
        "branches. Silence a deliberate call with `# noqa: TL207`."
    )

    def visit_Module(self, node: cst.Module) -> None:
        self._candidates: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) or (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
        ):
            if per_step(self.context, node) is not None:
                self._candidates.append(node)

    def leave_Module(self, node: cst.Module) -> None:
        if not self._candidates:
            return
        helpers = _Helpers(self.context)
        if not helpers.functions and not helpers.methods:
            return
        for call in self._candidates:
            function = helpers.callee(call)
            if function is None or self.context.enclosing_function(call) is function:
                continue
            loop = loops.hot_loop(self.context, call)
            training = loop is not None and loops.is_training_loop(self.context, loop)
            how = helpers.sync_in(function, training)
            if how is not None:
                self.report(call, self._TEMPLATE.format(name=function.name.value, how=how))
