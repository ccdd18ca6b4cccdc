"""TL306 inference-without-eval."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.lint.rule import FixSafety
from torchlint.rules.autograd._common import FAMILY, GradRule
from torchlint.semantic.grad_mode import CallFact, FileFacts, ScopeFacts
from torchlint.semantic.modules import eval_name_strength, is_model_like, words

LOADER_WORDS = frozenset({"val", "valid", "validation", "test", "testing", "eval", "dev", "holdout"})


def _loader_like(text: str) -> bool:
    if not text:
        return False
    lowered = re.sub(r"[\"'\[\]().]", " ", text)
    return any(w in LOADER_WORDS for w in words(lowered))


class InferenceWithoutEval(GradRule):
    code = "TL306"
    name = "inference-without-eval"
    family = FAMILY
    summary = (
        "Evaluation under `torch.no_grad()` (an `evaluate`/`validate`/`test`-style function, or a loop over a "
        "validation/test loader) that never puts the network in eval mode."
    )
    message = (
        "The network is evaluated without `model.eval()`: dropout stays active and batch norm uses (and updates) "
        "batch statistics; call model.eval() before the evaluation loop"
    )
    explanation = (
        "`torch.no_grad()` turns off autograd but does not change the module's mode. A model left in training "
        "mode keeps dropout active (random, wrong predictions) and batch norm normalises with the statistics of "
        "each evaluation batch and updates its running averages with evaluation data, so the reported metrics "
        "are wrong and the model itself drifts. Dropout in training mode also costs a random mask per layer "
        "(an extra pass over every activation). `model.eval()` costs nothing; pair it with `model.train()` "
        "before training resumes.\n\n"
        "The rule reports a function whose name marks it as evaluation, or a no-grad loop over a loader named "
        "`val`/`valid`/`test`/`eval`/`dev`, that calls a network under no-grad and never calls `.eval()` or "
        "`.train(...)`, when the network comes from outside the function (a parameter, `self.model`, a global) "
        "and the callers of the function in the same file do not call `.eval()` either."
    )
    bad = (
        "def test(model, loader):\n"
        "    correct = 0\n"
        "    with torch.no_grad():\n"
        "        for x, y in loader:\n"
        "            correct += (model(x).argmax(1) == y).sum().item()\n"
        "    return correct\n\n"
        "for epoch in range(10):\n"
        "    train(model, train_loader)  # calls model.train()\n"
        "    test(model, test_loader)\n"
    )
    good = (
        "def test(model, loader):\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    with torch.no_grad():\n"
        "        for x, y in loader:\n"
        "            correct += (model(x).argmax(1) == y).sum().item()\n"
        "    return correct\n"
    )
    false_positives = (
        "A model without dropout or batch norm behaves the same in both modes (the finding is then about "
        "hygiene only), and Monte-Carlo dropout deliberately evaluates in training mode. The rule stays silent "
        "when the function calls `.train(...)` itself, when the network is built inside the function, when the "
        "function has no caller in the file (the caller elsewhere may call `.eval()`), when any caller calls "
        "`.eval()`, or a caller of a caller up to three levels (`evaluate()` calls `net.eval()`, then an evaluator "
        "object whose methods reach the helper), or the chain of callers ends in a function nothing in the file "
        "calls; when the network is a global bound to what a function of the file returns after switching its "
        "mode (`net = get_model()` with `net.eval()` inside); and for framework hooks (Lightning's "
        "`validation_step` runs in eval mode already)."
    )
    fix_safety = FixSafety.NONE
    requires = ("no_grad", "inference_mode", "set_grad_enabled")

    def gate(self, text: str) -> bool:
        return "no_grad" in text or "inference_mode" in text or "set_grad_enabled" in text

    def check(self, facts: FileFacts) -> None:
        if facts.is_test_file:
            return
        module_scope = facts.scopes[0]
        module_evals = {t for _, t, _ in module_scope.evals}
        for scope in facts.scopes[1:]:
            if facts.framework_hook(scope) or facts.is_test_case(scope) or scope.decorated_other_grad:
                continue
            if scope.is_method and facts.is_module_class(scope.cls):
                continue
            if scope.evals or scope.mode_unknown:
                continue
            self._check(facts, scope, module_evals)

    def _check(self, facts: FileFacts, scope: ScopeFacts, module_evals: set[str]) -> None:
        strength = eval_name_strength(scope.name)
        training = bool(scope.training)
        if training and scope.trains:
            candidates = [c for c in self._forwards(facts, scope) if self._in_eval_loop(facts, scope, c)]
            if not candidates:
                return
        else:
            if scope.trains or training:
                return
            forwards = self._forwards(facts, scope)
            if strength != 2:
                forwards = [c for c in forwards if self._in_eval_loop(facts, scope, c)]
            candidates = forwards
            if not candidates:
                return
        targets = {self._base(c.callee) for c in candidates}
        if targets & module_evals:
            return
        # Where does the network come from? Only report one that reaches the function from outside.
        for target in targets:
            root = target.split(".")[0]
            if root == "self":
                if self._class_evals(facts, scope, target):
                    return
                continue
            if self._bound_locally(scope, root) or self._built_in_eval_mode(facts, root):
                return
        if training:
            # The function itself switched the network to training mode before the no-grad loop.
            first = candidates[0]
            base = self._base(first.callee)
            if not any(t == base and o < first.order for _, t, o in scope.trains):
                return
            with_node = first.withs[-1] if first.withs else None
            where = with_node.items[0].item if with_node is not None else first.node
            self.report(
                where,
                f"Validation loop runs `{base}` under no-grad while it is still in training mode (after "
                f"`{base}.train()`): dropout and batch norm behave as in training; call {base}.eval() before the "
                f"loop and {base}.train() after it",
            )
            return
        if not facts.callers(scope.name) or self._eval_upstream(facts, scope, 0, set()):
            return
        target = self._base(candidates[0].callee)
        self.report(
            scope.node.name,  # type: ignore[union-attr]
            f"`{scope.name}` evaluates `{target}` without `{target}.eval()` (nor does any caller in this file): "
            f"dropout and batch norm stay in training mode; call {target}.eval() first",
        )

    def _eval_upstream(self, facts: FileFacts, scope: ScopeFacts, depth: int, seen: set[int]) -> bool:
        """The network may already be in eval mode when `scope` runs: a caller, or a caller of a caller (up to
        three levels: `evaluate()` calls `net.eval()`, then an evaluator whose methods reach this helper), calls
        `.eval()` or `.train(flag)`, is a framework hook or a constructor, or is itself called from nowhere in
        this file (another file or an instance call runs it, and may have switched the mode)."""
        seen.add(id(scope.node))
        callers = self._callers(facts, scope)
        if not callers:
            return depth > 0
        for caller in callers:
            if caller.evals or caller.mode_unknown or facts.framework_hook(caller):
                return True
            if caller.node is facts.scopes[0].node or self._switches_to_training(facts, caller):
                continue  # a call at module level, or next to training: nothing above it decides the mode
            if caller.name == "__init__":
                return True
            if depth < 3 and id(caller.node) not in seen and self._eval_upstream(facts, caller, depth + 1, seen):
                return True
        return False

    @staticmethod
    def _switches_to_training(facts: FileFacts, caller: ScopeFacts) -> bool:
        """`caller` calls `.train()`, or a function of the file that does (`train(model, loader)` then
        `test(model, loader)` in an epoch loop): the network is in training mode there, whoever called it."""
        if caller.trains:
            return True
        called = {call.callee.rsplit(".", 1)[-1] for call in caller.calls if call.callee}
        return any(other.trains and other.name in called for other in facts.scopes[1:] if other is not caller)

    @staticmethod
    def _callers(facts: FileFacts, scope: ScopeFacts) -> list[ScopeFacts]:
        """The functions of the file that call `scope` by its name, a function of the same name included
        (`def evaluate(): ... evaluator.evaluate()` calls the method, it does not recurse)."""
        return [
            caller
            for caller in facts.scopes
            if caller.node is not scope.node
            and any(call.callee and call.callee.rsplit(".", 1)[-1] == scope.name for call in caller.calls)
        ]

    @staticmethod
    def _base(callee: Optional[str]) -> str:
        callee = callee or ""
        return callee[: -len(".forward")] if callee.endswith(".forward") else callee

    def _forwards(self, facts: FileFacts, scope: ScopeFacts) -> list[CallFact]:
        covered_scope = facts.is_grad_free(scope)
        out = []
        for call in scope.calls:
            if not call.callee or not (call.covered or covered_scope):
                continue
            base = self._base(call.callee)
            if base == "self":
                continue
            if not is_model_like(base) or facts.defines(base.rsplit(".", 1)[-1]):
                continue
            if self.context.qualname(call.node.func) is not None:
                continue
            out.append(call)
        return out

    def _in_eval_loop(self, facts: FileFacts, scope: ScopeFacts, call: CallFact) -> bool:
        for loop in call.loops:
            if isinstance(loop, cst.For) and _loader_like(self.context.code(loop.iter)):
                return True
        return False

    def _bound_locally(self, scope: ScopeFacts, root: str) -> bool:
        func = scope.node
        if not isinstance(func, cst.FunctionDef):
            return True
        bindings = self.context.bindings(func).get(root)
        if not bindings:
            return False  # a global
        return any(b.kind != "param" for b in bindings)

    def _built_in_eval_mode(self, facts: FileFacts, root: str) -> bool:
        """A global network bound to what a function of the file returns, where that function switches the
        mode itself (`net = get_model()` with `net.eval()` inside `get_model`)."""
        for binding in self.context.bindings(self.context.module).get(root) or []:
            value = binding.value
            if binding.kind != "assign" or not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
                continue
            builders = [s for s in facts.scopes[1:] if s.name == value.func.value and s.cls is None]
            if any(b.evals or b.mode_unknown for b in builders):
                return True
        return False

    def _class_evals(self, facts: FileFacts, scope: ScopeFacts, target: str) -> bool:
        """Another method of the class calls `.eval()` on the network (or on self)."""
        for other in facts.scopes:
            if other.cls is scope.cls and other is not scope:
                if other.evals or other.mode_unknown:
                    return True
        return False
