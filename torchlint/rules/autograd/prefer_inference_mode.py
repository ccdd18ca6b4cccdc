"""TL307 prefer-inference-mode."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.names import dotted
from torchlint.lint.rule import Fix, FixSafety, Replace
from torchlint.lint.walk import scope_nodes
from torchlint.rules.autograd._common import FAMILY, GradRule
from torchlint.semantic.grad_mode import CallFact, FileFacts, ScopeFacts
from torchlint.semantic.modules import eval_name_strength, is_model_like


class PreferInferenceMode(GradRule):
    code = "TL307"
    name = "prefer-inference-mode"
    family = FAMILY
    summary = (
        "`torch.no_grad()` around pure inference whose results leave the function only as Python values, where "
        "`torch.inference_mode()` is a drop-in replacement."
    )
    message = (
        "Pure inference under torch.no_grad(): torch.inference_mode() also skips version counters and view "
        "tracking; use it when the outputs never reach autograd"
    )
    explanation = (
        "`torch.inference_mode()` is `no_grad` plus less bookkeeping: tensors created inside it carry no version "
        "counter and no view metadata. The PyTorch documentation recommends it for code that never needs the "
        "results in autograd. The gain is small and mostly visible with many small operations (Python overhead "
        "per op); on a 2-core CPU with convolutional networks at batch 16 no difference was measurable, which is "
        "why the rule is off by default.\n\n"
        "The rule reports a `with torch.no_grad():` block or `@torch.no_grad()` decorator in an evaluation "
        "function (by name, or one that calls `.eval()`) that does not train, yields nothing, stores nothing on "
        "`self`, and returns nothing or only Python numbers (values built from `.item()`, `.tolist()`, "
        "`float()`, ...). The block must run a network (a call of the model, or a helper it is handed to): a "
        "`no_grad` block that only prepares inputs is left alone."
    )
    bad = (
        "def accuracy(net, batches):\n"
        "    net.eval()\n"
        "    hits = 0\n"
        "    with torch.no_grad():\n"
        "        for images, labels in batches:\n"
        "            hits += (net(images).argmax(1) == labels).sum().item()\n"
        "    return hits\n"
    )
    good = (
        "def accuracy(net, batches):\n"
        "    net.eval()\n"
        "    hits = 0\n"
        "    with torch.inference_mode():\n"
        "        for images, labels in batches:\n"
        "            hits += (net(images).argmax(1) == labels).sum().item()\n"
        "    return hits\n"
    )
    false_positives = (
        "Tensors created under inference mode cannot be saved for backward or updated in place outside it. "
        "A function that hands outputs to another object (a metric, a cache, a list passed in) may let them "
        "reach autograd later; the rule only checks returns, `yield` and assignments to attributes."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Replaces `torch.no_grad` with `torch.inference_mode`. Unsafe: an inference tensor that escapes through "
        "a path the rule cannot see (an object's state, a list passed in) raises an error if it is later used in "
        "autograd or updated in place."
    )
    default_enabled = False
    requires = ("no_grad",)

    _HOST_CALLS = frozenset({"float", "int", "round", "len", "str", "bool", "format", "abs", "max", "min", "sum"})
    _HOST_ATTRS = frozenset({"item", "tolist", "size", "numel", "dim", "format"})

    def gate(self, text: str) -> bool:
        return "no_grad" in text

    def check(self, facts: FileFacts) -> None:
        if facts.is_test_file:
            return
        for scope in facts.scopes[1:]:
            if scope.training or scope.yields or facts.framework_hook(scope) or scope.decorated_other_grad:
                continue
            if not (eval_name_strength(scope.name) == 2 or scope.evals):
                continue
            sites = self._no_grad_sites(scope)
            if not sites or not self._pure(scope):
                continue
            torch_name = self.context.local_name_for("torch")
            for call in sites:
                fix = Fix(
                    "Use torch.inference_mode()",
                    [Replace(call.func, f"{torch_name}.inference_mode")],
                    safe=False,
                    imports=("torch",),
                )
                self.report(call, fix=fix)

    def _no_grad_sites(self, scope: ScopeFacts) -> list[cst.Call]:
        sites = []
        decorator = scope.decorated_grad_off
        if decorator is not None:
            expr = decorator.decorator
            if not isinstance(expr, cst.Call):
                return []  # bare @torch.no_grad: leave it
            if self.context.qualname(expr) == "torch.no_grad" and any(self._runs_network(c) for c in scope.calls):
                sites.append(expr)
        for with_node in scope.grad_off_withs:
            if not any(any(w is with_node for w in call.withs) and self._runs_network(call) for call in scope.calls):
                continue  # no forward pass inside (`with torch.no_grad(): x = Variable(x)`): nothing to infer
            for item in with_node.items:
                if isinstance(item.item, cst.Call) and self.context.qualname(item.item) == "torch.no_grad":
                    sites.append(item.item)
        if len(scope.grad_off) != len(scope.grad_off_withs) and decorator is None:
            return []  # a grad-off construct the rule does not understand (set_grad_enabled calls, ...)
        return sites

    def _runs_network(self, call: CallFact) -> bool:
        """A forward pass: a call of a network (`model(x)`, `self.net.forward(x)`), or a call that is handed
        one (`accuracy(model, loader)`)."""
        if call.callee is not None:
            base = call.callee[: -len(".forward")] if call.callee.endswith(".forward") else call.callee
            if is_model_like(base) and self.context.qualname(call.node.func) is None and not self.semantic.grad.defines(base):
                return True  # (a class of the file, `VGG(cfg)`, builds a network, it runs none)
        for arg in call.node.args:
            value = arg.value
            if isinstance(value, (cst.Name, cst.Attribute)) and is_model_like(dotted(value) or ""):
                return True
        return False

    def _pure(self, scope: ScopeFacts) -> bool:
        func = scope.node
        assert isinstance(func, cst.FunctionDef)
        returns: list[Optional[cst.BaseExpression]] = []
        for child in scope_nodes(func.body):
            if isinstance(child, cst.Return):
                returns.append(child.value)
            elif isinstance(child, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                targets = [t.target for t in child.targets] if isinstance(child, cst.Assign) else [child.target]
                for target in targets:
                    if isinstance(target, (cst.Attribute, cst.Subscript)):
                        root = target
                        while isinstance(root, (cst.Attribute, cst.Subscript)):
                            root = root.value
                        if not (isinstance(root, cst.Name) and self._local(func, root.value)):
                            return False
            elif isinstance(child, (cst.Global, cst.Nonlocal)):
                return False
        return all(value is None or self._host(func, value, 0) for value in returns)

    def _local(self, func: cst.FunctionDef, name: str) -> bool:
        bindings = self.context.bindings(func).get(name)
        return bool(bindings) and all(b.kind == "assign" for b in bindings)

    def _host(self, func: cst.FunctionDef, expr: cst.BaseExpression, depth: int) -> bool:
        if depth > 6:
            return False
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return True
        if isinstance(expr, cst.Name):
            if expr.value in ("None", "True", "False"):
                return True
            bindings = self.context.bindings(func).get(expr.value)
            if not bindings:
                return False
            for binding in bindings:
                node = binding.node
                if binding.kind == "assign" and binding.value is not None:
                    if not self._host(func, binding.value, depth + 1):
                        return False
                elif isinstance(node, cst.AugAssign):
                    if not self._host(func, node.value, depth + 1):
                        return False
                elif isinstance(node, cst.Assign) and isinstance(node.value, cst.Tuple):
                    # `a, b = 0, 0`: every element must be a host value
                    if not all(self._host(func, e.value, depth + 1) for e in node.value.elements):
                        return False
                else:
                    return False
            return True
        if isinstance(expr, cst.BinaryOperation):
            return self._host(func, expr.left, depth + 1) and self._host(func, expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self._host(func, expr.expression, depth + 1)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return all(self._host(func, e.value, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            return all(isinstance(e, cst.DictElement) and self._host(func, e.value, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.Call):
            f = expr.func
            if isinstance(f, cst.Attribute) and f.attr.value in self._HOST_ATTRS:
                return True
            if isinstance(f, cst.Name) and f.value in self._HOST_CALLS and self.context.qualname(f) is None:
                return all(self._host(func, a.value, depth + 1) for a in expr.args) or f.value in ("float", "int", "len", "str", "round", "bool")
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("shape",):
            return True
        if isinstance(expr, cst.Subscript):
            return self._host(func, expr.value, depth + 1) if isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape" else False
        return False
