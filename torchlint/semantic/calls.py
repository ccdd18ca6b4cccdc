"""Per-function summaries: what a function defined in the file does, for the code that calls it."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import scope_nodes
from torchlint.semantic.values import UNK, T, ValueKinds

# Calls that read a clock or a CUDA event: a sync next to them is there to time the step.
CLOCK_CALLS = frozenset(
    {"time", "perf_counter", "monotonic", "perf_counter_ns", "time_ns", "record", "elapsed_time", "time_sync", "tic", "toc"}
)


class FunctionSummaries:
    """What the functions and methods defined in this file do, as far as their callers care."""

    def __init__(self, context: "Context", values: ValueKinds) -> None:
        self.context = context
        self.values = values
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
        values = self.values
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

