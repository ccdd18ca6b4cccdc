"""TL403 tensor-from-tensors."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument
from torchlint.lint.context import Context
from torchlint.lint.rule import Fix, FixSafety, Replace, Rule
from torchlint.lint.walk import descendants
from torchlint.rules.loops._common import atom
from torchlint.semantic.values import looks_like_tensor


# --------------------------------------------------------------------------------------------------
class TensorFromTensors(Rule):
    code = "TL403"
    name = "tensor-from-tensors"
    family = "Vectorisation and loops"
    summary = (
        "`torch.tensor(...)` applied to tensors: a list of tensors (built by appending, or written out), or an "
        "existing tensor."
    )
    message = (
        "torch.tensor() on a list of tensors converts them one element at a time through Python (a device sync "
        "each on GPU): use torch.stack(values), with .to(dtype/device) if needed"
    )
    explanation = (
        "`torch.tensor` treats its argument as nested Python data: for a list of tensors it reads every "
        "element back as a Python scalar (for CUDA tensors, one device-to-host copy and synchronisation per "
        "element), then builds a new CPU tensor from those numbers, detached from the autograd graph. "
        "`torch.stack` concatenates the tensors where they live in one operation and keeps their dtype and "
        "device. On a CPU the two cost about the same (measured on a 2-core CPU: 0.19 ms against 0.20 ms for "
        "1,000 scalar tensors); the cost is on an accelerator, where each element read is a separate "
        "device-to-host copy that waits for all queued work, so a list of 1,000 losses means 1,000 "
        "synchronisations instead of none. `torch.tensor(t)` on a single tensor copies it too, and torch "
        "itself warns: \"To copy construct from a tensor, it is recommended to use "
        "sourceTensor.detach().clone()\"."
    )
    bad = (
        "def evaluate(model, loader):\n"
        "    losses = []\n"
        "    for x, y in loader:\n"
        "        losses.append(F.cross_entropy(model(x), y))\n"
        "    return torch.tensor(losses).mean()\n\n"
        "def uniform(n):\n"
        "    return torch.tensor(torch.ones(n) / n)\n"
    )
    good = (
        "def evaluate(model, loader):\n"
        "    losses = []\n"
        "    for x, y in loader:\n"
        "        losses.append(F.cross_entropy(model(x), y).detach())\n"
        "    return torch.stack(losses).mean()\n\n"
        "def uniform(n):\n"
        "    return (torch.ones(n) / n).detach().clone()\n"
    )
    false_positives = (
        "The rule fires only when every element is certainly a tensor (a torch call, a tensor method of one, a "
        "name bound once to one). `torch.tensor` moves the result to the CPU and re-infers the dtype, while "
        "`torch.stack` keeps both: add `.cpu()` or `.to(dtype)` where the old behaviour is needed. A list of "
        "Python numbers (`loss.item()` appended) is not reported, nor is a top-level statement of a script or "
        "notebook outside any loop (it runs once: converting the losses for a plot after training)."
    )
    fix_safety = FixSafety.SAFE
    fix_notes = (
        "For `torch.tensor(t)` on one tensor (no other arguments): `t.detach().clone()`, which gives the same "
        "values, dtype, device and `requires_grad=False`; with `dtype=`/`device=` only: "
        "`t.detach().to(..., copy=True)`. A list of tensors is not fixed: `torch.stack` keeps the dtype and "
        "device of the elements where `torch.tensor` re-infers them and builds on the CPU."
    )
    requires = ("tensor(", "Tensor(")

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._appends: dict[cst.CSTNode, dict[str, list[cst.BaseExpression]]] = {}
        self._backward: dict[cst.CSTNode, set[str]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if last not in ("tensor", "Tensor"):
            return
        qualname = self.context.qualname(node)
        if qualname not in ("torch.tensor", "torch.Tensor"):
            return
        data = argument(node, "data", 0)
        if data is None or data.star or self._once_at_module_level(node):
            return
        value = data.value
        if qualname == "torch.Tensor":
            # torch.Tensor(list) has the same problem; torch.Tensor(t) on one tensor is not reported
            if not isinstance(value, cst.Name) or len(node.args) != 1:
                return
            bound = self.context.assigned_value(value)
            if isinstance(bound, (cst.List, cst.Tuple)) and self._appended_tensors(value, bound):
                self.report(node, self.message.replace("torch.tensor()", "torch.Tensor()"))
            return
        if isinstance(value, (cst.List, cst.Tuple)):
            if self._all_tensors(value.elements):
                self.report(node)
            return
        if looks_like_tensor(self.context, value):
            self.report(node, self._single_message(), fix=self._fix(node, value))
            return
        if isinstance(value, cst.Name):
            bound = self.context.assigned_value(value)
            if isinstance(bound, (cst.List, cst.Tuple)) and self._appended_tensors(value, bound):
                self.report(node)

    def _once_at_module_level(self, node: cst.Call) -> bool:
        """A script's or notebook's top-level statement outside any loop runs once (a plot of the losses after
        training): converting element by element there costs nothing worth a finding."""
        return not any(isinstance(a, (cst.FunctionDef, cst.Lambda, cst.For, cst.While)) for a in self.context.ancestors(node))

    def _appended_tensors(self, name: cst.Name, bound: "cst.List | cst.Tuple") -> bool:
        """Every element of the list `name` (written in its literal or appended later) is a tensor."""
        appended = self._appended(name)
        elements = [*(e.value for e in bound.elements if isinstance(e, cst.Element)), *appended]
        return (
            len(elements) == len(bound.elements) + len(appended)
            and bool(elements)
            and all(looks_like_tensor(self.context, e, known=self._backpropagated) for e in elements)
        )

    def _backpropagated(self, name: cst.Name) -> bool:
        """`name.backward()` is called in the same scope: `name` is a tensor."""
        scope: cst.CSTNode = self.context.enclosing(name, cst.FunctionDef) or self.context.module
        self._appended(name)  # fills the scope tables
        return name.value in self._backward.get(scope, set())

    def _all_tensors(self, elements: "tuple[cst.BaseElement, ...] | list[cst.BaseElement]") -> bool:
        return bool(elements) and all(isinstance(e, cst.Element) and looks_like_tensor(self.context, e.value) for e in elements)

    def _appended(self, name: cst.Name) -> list[cst.BaseExpression]:
        """Values appended to the list `name` in its scope (all `name.append(v)` calls); a non-append mutation
        (`extend`, `insert`, `+=`) adds an undecidable element."""
        scope: cst.CSTNode = self.context.enclosing(name, cst.FunctionDef) or self.context.module
        table = self._appends.get(scope)
        if table is None:
            table = self._appends[scope] = {}
            backward = self._backward[scope] = set()
            for node in descendants(scope):
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name):
                    method = node.func.attr.value
                    owner = node.func.value.value
                    if method == "backward":
                        backward.add(owner)
                    elif method == "append" and len(node.args) == 1:
                        table.setdefault(owner, []).append(node.args[0].value)
                    elif method in ("extend", "insert", "__setitem__"):
                        table.setdefault(owner, []).append(cst.Name("UNKNOWN"))
                elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
                    table.setdefault(node.target.value, []).append(cst.Name("UNKNOWN"))
        return table.get(name.value, [])

    def _single_message(self) -> str:
        return (
            "torch.tensor() on an existing tensor copies it through the constructor (torch warns about this): "
            "use t.detach().clone()"
        )

    def _fix(self, call: cst.Call, tensor: cst.BaseExpression) -> Optional[Fix]:
        others = [a for a in call.args if a.value is not tensor]
        receiver = atom(tensor)
        detached = cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("detach")))
        if not others:
            new: cst.BaseExpression = cst.Call(func=cst.Attribute(value=detached, attr=cst.Name("clone")))
            return Fix("Replace with .detach().clone()", [Replace(call, new)])
        if any(a.keyword is None or a.keyword.value not in ("dtype", "device") or a.star for a in others):
            return None
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in others]
        args.append(
            cst.Arg(
                value=cst.Name("True"),
                keyword=cst.Name("copy"),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            )
        )
        new = cst.Call(func=cst.Attribute(value=detached, attr=cst.Name("to")), args=args)
        return Fix("Replace with .detach().to(..., copy=True)", [Replace(call, new)])
