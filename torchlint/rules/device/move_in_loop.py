"""TL602 move-in-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.calls import keyword, positional
from torchlint.lint.context import Context
from torchlint.lint.rule import FixSafety, Rule
from torchlint.lint.walk import descendants
from torchlint.semantic import loops
from torchlint.semantic.objects import MODULE
from torchlint.semantic.values import CPU


class MoveInLoop(Rule):
    code = "TL602"
    name = "move-in-loop"
    family = "Device placement and transfers"
    summary = (
        "`.to(device)` / `.cuda()` of the model, or of a tensor built before the loop, on every step of a "
        "training loop."
    )
    message = "The same object is moved to the device on every step: move it once, before the loop"
    explanation = (
        "`model.to(device)` walks every parameter and buffer of the model on each call; a tensor built before the "
        "loop and moved inside it is copied host-to-device again on every step (a synchronous copy from pageable "
        "memory), although its value never changes. Either is pure overhead repeated once per step: the batch "
        "must move every step, but the model and constants need to move only once."
    )
    bad = (
        "class_weights = torch.tensor([1.0, 5.0])\n"
        "for x, y in train_loader:\n"
        "    model.to(device)\n"
        "    out = model(x.to(device))\n"
        "    loss = F.cross_entropy(out, y.to(device), weight=class_weights.to(device))\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    good = (
        "class_weights = torch.tensor([1.0, 5.0]).to(device)\n"
        "model.to(device)\n"
        "for x, y in train_loader:\n"
        "    out = model(x.to(device))\n"
        "    loss = F.cross_entropy(out, y.to(device), weight=class_weights)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    false_positives = (
        "A model moved back and forth on purpose (offloading between steps) or a constant deliberately kept "
        "on the host. Silence it with `# noqa: TL602`."
    )
    fix_safety = FixSafety.NONE
    fix_notes = "Moving the call before the loop is a code motion the linter does not do for you."
    requires = (".to(", ".cuda(")

    def __init__(self, context: "Context") -> None:
        super().__init__(context)
        self._nodes_in: dict[cst.CSTNode, set[int]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
            return
        if func.attr.value == "to" and not self._moves_to_device(node):
            return
        loop = self.semantic.per_step(node)
        if loop is None or not self.semantic.is_training_loop(loop):
            return
        receiver = func.value
        if self._is_model(receiver, loop):
            self.report(node, "The model is moved to the device on every step: move it once, before the loop")
        elif self._is_constant(receiver, loop):
            self.report(node, "A tensor built before the loop is copied to the device on every step: move it once, before the loop")

    def _moves_to_device(self, node: cst.Call) -> bool:
        device = keyword(node, "device")
        if device is not None:
            return self.semantic.is_device(device.value)
        args = positional(node)
        return bool(args) and self.semantic.is_device(args[0].value)

    def _is_model(self, receiver: cst.BaseExpression, loop: loops.Loop) -> bool:
        """A module (by its binding, or by its name when nothing binds it) that the loop does not rebind."""
        is_self_attr = isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self"
        if not (is_self_attr or isinstance(receiver, cst.Name)):
            return False
        if isinstance(receiver, cst.Name) and self._bound_in(receiver, loop):
            return False
        return self.semantic.objects.holds(receiver, MODULE)

    def _is_constant(self, receiver: cst.BaseExpression, loop: loops.Loop) -> bool:
        if not isinstance(receiver, cst.Name):
            return False
        bindings = self.context.lookup(receiver)
        if not bindings or len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
            return False
        if self._bound_in(receiver, loop):
            return False
        value = bindings[0].value
        if not isinstance(value, cst.Call):
            return False
        qual = self.context.qualname(value)
        if qual is None or not qual.startswith("torch."):
            return False
        return self.semantic.values.kind(value) == CPU  # one built on the device moves for free

    def _bound_in(self, name: cst.Name, loop: loops.Loop) -> bool:
        bindings = self.context.lookup(name) or []
        inside = self._nodes_in.get(loop)
        if inside is None:
            inside = self._nodes_in[loop] = set(map(id, descendants(loop)))
        return any(binding.node is loop or id(binding.node) in inside for binding in bindings)
