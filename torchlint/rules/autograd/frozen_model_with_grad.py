"""TL305 frozen-model-with-grad."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.lint.walk import descendants
from torchlint.rules.autograd._common import FAMILY, GradRule
from torchlint.semantic import frozen_networks, parameter_free
from torchlint.semantic.file_kind import uses_torch
from torchlint.semantic.forward_flow import BACKWARD
from torchlint.semantic.grad_mode import FileFacts
from torchlint.semantic.modules import is_model_like
from torchlint.semantic.objects import assigned_pairs


class FrozenModelWithGrad(GradRule):
    code = "TL305"
    name = "frozen-model-with-grad"
    family = FAMILY
    summary = (
        "A network that is never trained in this file (a target network, teacher, loss network or pretrained "
        "encoder) run with autograd on: its output immediately `.detach()`ed, or fed from a batch into a "
        "training step that backpropagates through it for nothing."
    )
    message = (
        "This network is never optimised here, yet it runs with autograd on and its output is detached: call it "
        "under `with torch.no_grad():` (or freeze it with .requires_grad_(False)) so no graph is built"
    )
    explanation = (
        "Calling a module whose parameters require grad records the autograd graph and keeps every activation "
        "the backward pass would need; `.detach()` on the output then throws all of that away. Running it under "
        "`torch.no_grad()` skips the recording: measured on a 2-core CPU, a ResNet-50-like forward pass at batch "
        "16 ran 2.6x faster under no_grad and peak memory fell from 1,314 MB to 208 MB. Typical cases are the "
        "target network of DQN (`target_net(next_state).max(1)[0].detach()`), a distillation teacher and a "
        "frozen feature extractor for a perceptual loss applied to real images.\n\n"
        "The rule reports `.detach()` applied (directly, or through indexing and method calls) to the result of "
        "calling a network, or to the name that result is assigned to when every later read detaches it "
        "(`t = teacher(x)` then `t = t.detach()`), when the call is not under no-grad, the network (named like "
        "one, or built from an `nn.Module` class of the file or copied from a network with `copy.deepcopy`, "
        "whatever its name; a plain name or an attribute of `self`: a target network held by an agent) is bound in "
        "this file, neither its "
        "`.parameters()` nor those of a part of it (`Adam(model.enc.parameters())`) are used, nothing in the "
        "file freezes "
        "parameters, and the call runs more than once (not one demo batch in a script or notebook). A network "
        "handed to a loss helper as a parameter (`kd_loss(out, teacher, x)`) is judged the same way in the files "
        "of its callers: every caller passes a network its file builds or loads and never trains. In an inference "
        "script that trains nothing the same forward pass is reported here too: its output is detached, so this "
        "rule, not TL301, names it (TL301 still reports the `.eval()` line of the script).\n\n"
        "It also reports a network run on a batch inside a training step when nothing trains it: a pretrained "
        "CNN encoder in front of a captioning decoder that is the only thing the optimizer updates "
        "(`optimizer = Adam(decoder.parameters())`, then `features = encoder(images)` every step). The "
        "decoder's `loss.backward()` then runs back through the whole encoder to compute weight gradients no "
        "optimizer reads. The same holds for a target network an agent keeps (`self.target_net`, built from a "
        "network class and never trained) whose output reaches the loss as the TD target without a detach. "
        "Reported when the network is called by a plain name that the file builds (or an attribute of an object "
        "that is no network itself), the file "
        "builds an optimizer but never takes this network's `.parameters()`, never calls its `.train()`, "
        "never touches `requires_grad` and never hands the network to another constructor or container (where "
        "it could be part of a trained model) or to a helper that builds an optimizer from it; its class, when it can be read in the project, does not freeze "
        "its own parameters nor build an optimizer over them (`self.optimizer = Adam(self.parameters())`); what it is given derives from loop variables (a batch) or from new tensors built "
        "from host values (`torch.FloatTensor(next_states)`) through copies and moves only; and its output reaches "
        "the backward pass.\n\n"
        "Last, it reports the pretrained feature extractor of a perceptual loss whose weights nobody freezes: "
        "a torchvision or timm network built with pretrained weights and put in eval mode "
        "(`vgg19(weights=...).features[:36].eval()`), whose parameters the file never takes, trains or freezes, "
        "run outside no-grad, more than once (one adversarial example made for one image costs nothing), where its "
        "result reaches a backward pass (`mse_loss(vgg(sr), vgg(hr))`). The "
        "gradient has to flow through it to the generator, so `no_grad` is no answer, but every backward pass "
        "also computes its weight gradients, which no optimizer reads: `.requires_grad_(False)` where it is "
        "built removes that work (and keeps `vgg(hr)` from recording a graph)."
    )
    bad = (
        "next_values = target_net(next_states).max(1)[0].detach()\n"
    )
    good = (
        "with torch.no_grad():\n"
        "    next_values = target_net(next_states).max(1)[0]\n"
    )
    false_positives = (
        "A network trained through an optimizer built in another file (from its parameters there), or one whose "
        "parameters are frozen in another file (then no graph is built and the detach is only redundant). A "
        "network fed the output of a trained one is not told to run under `no_grad` (the gradient has to flow "
        "through it back to the generator); it is told to freeze its weights only when it is a pretrained "
        "torchvision/timm network in eval mode that nothing in the file trains or freezes. A module whose class "
        "holds no weights (a spectrogram kept in buffers) records nothing for a batch and is not reported."
    )
    requires = ("detach", ".backward(", "pretrained", "weights=")

    def gate(self, text: str) -> bool:
        signs = (".detach()", ".backward(", "pretrained", "weights=")
        return any(sign in text for sign in signs) and not frozen_networks.FREEZES.search(text) and uses_torch(text)

    def check(self, facts: FileFacts) -> None:
        text = self.context.source.text
        shapes = ".detach()" in text or ".backward(" in text  # else only unfrozen extractors can be found
        bound = _bound_names(self.context.module) if shapes else set()
        instances = frozen_networks.module_instances(facts) if shapes else set()
        for scope in facts.scopes:
            if facts.is_grad_free(scope) or scope.decorated_other_grad:
                continue
            trains = bool(facts.training_orders(scope))
            extractors = self._unfrozen_extractors(facts, scope)
            for call in scope.calls if shapes else ():
                if call.covered or call.callee is None:
                    continue
                callee = call.callee
                if self.context.qualname(call.node.func) is not None:
                    continue
                # a teacher handed to a loss helper: judged in the files of the callers that pass it
                passed_in = _untrained_parameter(facts, call.node.func)
                if not (passed_in or is_model_like(callee) or callee in instances):
                    continue
                last = callee.rsplit(".", 1)[-1]
                if not passed_in and (last not in bound or frozen_networks.parameters_taken(text, last)):
                    continue
                if re.search(rf"\b{re.escape(last)}\b\s*\.\s*(train\s*\(|requires_grad)", text):
                    continue
                detach = facts.detached_result(call.node)
                if detach is None:
                    if trains and callee not in extractors and self._trained_through(facts, scope, call):
                        self.report(
                            call.node,
                            f"`{callee}` is never optimised here, yet it runs on a batch with autograd on inside "
                            f"the training step, so the backward pass runs through it for weight gradients "
                            f"nobody uses: call it under `with torch.no_grad():` (or freeze it with "
                            f".requires_grad_(False))",
                        )
                    continue
                if facts.runs_once(scope, call) or parameter_free.receivers_hold_no_parameters(facts, call.node.func):
                    continue  # run once (one demo batch), or no weights to record a graph for
                if not passed_in and not any(s.training for s in facts.scopes) and _handed_in(
                    self.context, call.node.func
                ):
                    continue  # an evaluation of a network its caller may train: TL301 names the function
                where = "by the callers that pass it in" if passed_in else "here"
                self.report(
                    call.node,
                    f"`{callee}` is never optimised {where}, yet it runs with autograd on and its output is detached: "
                    f"call it under `with torch.no_grad():` so no graph is built",
                )

    def _unfrozen_extractors(self, facts: FileFacts, scope) -> set[str]:
        """Report the pretrained feature extractors of `scope` whose weights still require grad (once each)."""
        found: set[str] = set()
        for call in scope.calls:
            if not call.callee or call.callee in found or not frozen_networks.unfrozen_pretrained(facts, call):
                continue
            found.add(call.callee)  # `mse(vgg(sr), vgg(hr))`: one finding
            if not facts.runs_once(scope, call):  # a backward run once (one attack on one image) costs nothing
                self.report(call.node, f"`{call.callee}` is a pretrained network nobody trains, yet its weights "
                            f"require grad: every backward pass through it computes weight gradients no optimizer "
                            f"reads; freeze it where it is built with `.requires_grad_(False)`")
        return found

    @staticmethod
    def _trained_through(facts: FileFacts, scope, call) -> bool:
        """`call` runs a network the file never trains, on data, and its result reaches the backward pass."""
        func = call.node.func
        name = _plain_or_held(facts, func)
        if name is None or not frozen_networks.untrained(facts, name):
            return False
        if not frozen_networks.input_is_data(facts, call) or frozen_networks.class_freezes(facts, func):
            return False
        if frozen_networks.class_optimises_itself(facts, func):
            return False  # `self.optimizer = Adam(self.parameters())` in its own class
        if parameter_free.receivers_hold_no_parameters(facts, func):
            return False  # no weights: nothing for the backward pass to compute
        return BACKWARD in facts.result_reaches(scope, call.node, follow_callers=False)


def _plain_or_held(facts: FileFacts, func: cst.BaseExpression) -> "str | None":
    """The name of the network `func` calls: a plain name, or `self.<attr>` that an object which is no network
    itself holds (an agent's target network, built from a network class of the project); None otherwise."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and facts.context.code(func) in frozen_networks.module_instances(facts):
        return func.attr.value
    return None


def _untrained_parameter(facts: FileFacts, func: cst.BaseExpression) -> bool:
    """`func` is a parameter that every caller fills with a network it never trains (`frozen_networks`)."""
    return isinstance(func, cst.Name) and facts.context.is_parameter(func) and frozen_networks.untrained_where_passed(
        facts, func
    )


def _handed_in(context, func: cst.BaseExpression) -> bool:
    """The network `func` runs is a parameter of the function (`evaluate(model, loader)`), not built here."""
    while isinstance(func, cst.Attribute):
        func = func.value
    return isinstance(func, cst.Name) and context.is_parameter(func)


def _bound_names(module: cst.Module) -> set[str]:
    """Names (and attribute names) assigned somewhere in the file from a call: `x = Net()`, `self.x = f()`,
    `self.a, self.b = Net(), Net()`."""
    names: set[str] = set()
    for node in descendants(module):
        if not isinstance(node, cst.Assign):
            continue
        for target in node.targets:  # `self.online, self.target = Net(), Net()`: each target with its value
            for t, value in assigned_pairs(target.target, node.value):
                if not isinstance(value, cst.Call):
                    continue
                if isinstance(t, cst.Name):
                    names.add(t.value)
                elif isinstance(t, cst.Attribute):
                    names.add(t.attr.value)
    return names
