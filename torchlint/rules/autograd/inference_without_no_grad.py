"""TL301 inference-without-no-grad."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.lint.rule import FixSafety
from torchlint.rules.autograd._common import (
    FAMILY,
    GradRule,
    decorator_fix,
    wrap_fix,
    wrap_loops_fix,
)
from torchlint.semantic import inference
from torchlint.semantic.file_kind import uses_torch
from torchlint.semantic.grad_mode import FileFacts, ScopeFacts

_TL301_GATE = re.compile(
    r"\.eval\(\s*\)|\.train\(|def\s+\w*(?i:eval|val|test|pred|infer|sampl|generat|translat)"
    r"|\.(numpy|item|tolist|detach)\(|\.data\b|save_image|imsave|imwrite"  # where a forward's result may end
    r"|^for\s",  # a script's top-level loop
    re.M,
)


class InferenceWithoutNoGrad(GradRule):
    code = "TL301"
    name = "inference-without-no-grad"
    family = FAMILY
    summary = (
        "Inference with autograd still on: a function that calls `model.eval()` and then runs the model, an "
        "`evaluate`/`validate`/`test`/`predict`-style function that runs it in a loop, or any forward pass that "
        "runs repeatedly and whose result never reaches a backward pass (it ends in host values, metrics, logs)."
    )
    message = (
        "Forward passes run with autograd on, recording a graph that is never used: decorate the function with "
        "@torch.no_grad() (or wrap the forward passes in `with torch.no_grad():`)"
    )
    explanation = (
        "Outside `torch.no_grad()` / `torch.inference_mode()`, every forward pass records the autograd graph and "
        "keeps the activations each operation needs for a backward pass that never comes. Evaluation then runs "
        "slower and holds far more memory, which also caps the batch size. Measured on a 2-core CPU with plain-torch "
        "models in eval mode: a ResNet-50-like network at batch 16 ran 2.6x slower with grad on than under "
        "`torch.no_grad()` (0.39x the speed), and peak memory grew from 98 MB to 338 MB (3.4x) for a "
        "ResNet-18-like network and from 208 MB to 1,314 MB (6.3x) for the ResNet-50-like one.\n\n"
        "The rule reports a function that puts a module in eval mode (a `model.eval()` or `model.train(False)` "
        "statement, or `model = model.eval().to(device)`; not `torch.jit.freeze(f.eval())`, whose result is "
        "another object) and then calls it, or a function named as an evaluation entry point (`evaluate`, "
        "`validate`, `test`, `predict`, `infer`, and, with a loop, `sample`/`generate`) that calls a network in a "
        "loop or turns its outputs into Python values, when the function has no no-grad context, no `@torch.no_grad()` "
        "decorator, no backward pass or optimizer step, and no caller in the same file that runs it under no-grad (unless another call runs it with autograd on: evaluated under no-grad every epoch, then bare on the test set after training). In a "
        "function that also trains, it reports a `model.eval()` followed by an evaluation loop that runs the "
        "model before the next `model.train()`, or a `model.eval()` after the backward pass or optimizer step "
        "followed by a forward pass that no backward pass follows (a full-batch validation pass every epoch, "
        "as in graph networks); at module level (scripts, notebooks), a `model.eval()` followed "
        "by calls of the model. Files are checked when they use PyTorch: they import it, write `torch.` (a "
        "snippet, or torch brought in by a star import), or call `.cuda()` without importing another framework.\n\n"
        "Whatever the names, a forward pass is also judged by where its result goes: one whose result only "
        "reaches host values (`.numpy()`, `.item()`, `.tolist()`), detached copies, metrics and logs, and is "
        "never returned to code that backpropagates through it (callers are followed into the files that import "
        "this one) is inference — an RL `select_action` run every environment step, an evaluation helper, a "
        "validation pass of an experiment class, a periodic test pass between training steps, GAN samples saved "
        "every epoch. A network run through a method of its own class counts like a call of the network: "
        "`q_network.get_action(obs)`, `self.policy.sample(state)`, `decoder.decode_step(...)` (the method is read "
        "in the class, in this file or a project module, and must run the module itself; a class that cannot be "
        "found needs a network receiver and a method named for inference: `predict`, `sample`, `act`, `decode`). "
        "The receiver's class is found through what builds it: `model = create_model(opt)`, a helper of another "
        "file that returns one of several classes; a parameter, from what its callers pass; `model.module` of a "
        "data-parallel wrapper; `self.extractor`, a helper object the class holds (`self.extractor.forward_pass(x)`"
        " in a Score-CAM loop); a module of `torch.jit.load`/`torch.hub.load`, in a dict or a cache (`nets[name](x)`, "
        "`get_detector(url)` returning `cache[url]`); an item of a container that holds only networks (an ensemble's "
        "`self.members[i](x)`, `for m in models: m(x)`, a dict or list of networks or an `nn.ModuleList`); "
        "`model = Net().eval()` is in eval mode; a module global written in capitals (`MODEL`, `SEG_NET`, loaded by a "
        "server's `__main__` block and run by the handler of every request) is named like `model`. Whatever a network is called (`m`, `clf`, `big`), a parameter "
        "holds one when every caller, in any file and up to two calls up, passes a network (not a loss module), "
        "and a name assigned a whole model loaded with `torch.load` (or by a helper that returns one) holds one "
        "when it is called. Features handed to a "
        "project method that keeps host copies only (`stats.append_torch(f)`) end there. A method that hands back no "
        "graph (an agent's `select_action` returning NumPy values, a network's `encode_features` returning arrays) "
        "is reported once, at its `def`, and not again at every call; one that returns its output is judged where it "
        "is called, element by element when it returns a tuple (`action, log_prob, value = policy.act(state)`: an "
        "action drawn with a distribution's `sample()` carries no graph, nor does a `torch.tensor(...)` copy or a "
        "NumPy value). A result stored on an object (a rollout buffer's `self.buffer.logprobs.append(log_prob)`) "
        "counts as trained on only when some read of that attribute in the file carries it on: PPO reads the "
        "stored log probabilities back through `.detach()` and recomputes the ones it trains on, so the graph of "
        "every step is thrown away (reported), while A2C stacks them into its loss (left alone). A method of a "
        "project class that only keeps what it is given that way (`memory.push(state, log_prob, value)`) is read "
        "the same way; a function that calls a training method or function (`agent.update()`, `self.train_model()`, "
        "`update(batch)`) trains, so its acting and evaluation-episode forward passes are reported at the call, "
        "not by decorating the function. The `__call__` of a wrapper object that is no network itself (`predictor = Predictor(path)`, then "
        "`predictor(img)` in a loop) is judged like any method, its calls being the calls of its objects. "
        "A shared `run_epoch(..., train=True)` whose backward pass sits under `if train:` evaluates when called "
        "with `train=False`: that call (or a function that only makes such calls) is reported. A function "
        "whose every caller, in any file, already runs it under no-grad is left alone."
    )
    bad = (
        "def evaluate(model, loader):\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    for images, labels in loader:\n"
        "        correct += (model(images).argmax(1) == labels).sum().item()\n"
        "    return correct / len(loader.dataset)\n"
    )
    good = (
        "@torch.no_grad()\n"
        "def evaluate(model, loader):\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    for images, labels in loader:\n"
        "        correct += (model(images).argmax(1) == labels).sum().item()\n"
        "    return correct / len(loader.dataset)\n"
    )
    false_positives = (
        "Code that needs gradients without calling `.backward()` itself (outputs returned to a caller outside the "
        "project that trains on them; a `predict` whose callers in the project backpropagate is left alone), and "
        "functions run under `torch.no_grad()` by callers the rule cannot see (outside the linted project, or "
        "beyond the 16 importing files it reads; callers in the project's files are followed, so a sampling "
        "function every script calls under no-grad is left alone). The rule stays silent for Lightning "
        "/ MMEngine hooks (`validation_step`, `test_step`, `predict_step`, ...), which the framework already runs "
        "without grad, for Hugging Face `model.generate(...)` and methods of other libraries' models "
        "(`YOLO(...).predict`), for functions that ask for gradients of their own tensors (`requires_grad`, "
        "`torch.autograd.grad`: adversarial attacks, saliency maps, Grad-CAM, MAML inner loops) and their callers "
        "(a `no_grad` there would break the attack), and for tests. A network found by its name must look like one "
        "by its owner too: `netG(z)`, `self.generator(z)` and `net.encoder(x)` count, `writer.generator(...)` and "
        "`tokenizer.decoder(...)` do not, nor do `generate_*_string`-style functions that build source text.\n\n"
        "A network frozen where it is built (`sampler.eval().requires_grad_(False)`, a loader that calls `.requires_grad_"
        "(False)` on what it returns; not on a part: `model.backbone`) or a module whose class holds no weights (a "
        "spectrogram transform that keeps only buffers) records no graph and is left alone.\n\n"
        "Cost is judged too, and these are left alone on purpose: a forward pass in a constructor (a shape probe "
        "while a network is built, unless it loops over a data loader); a forward pass that runs once in the program "
        "(not in a loop, in code run once from module level or a `__main__` block and never from a loop: a demo "
        "on one image, a test pass after training, a loop ending in an unconditional `break` (a one-batch shape "
        "check), one test forward of a probe built afresh on every trip of a loop over seeds or folds); a picture "
        "drawn a few times (one grid of samples behind a logging interval, a handful of images plotted in a loop "
        "over `range(5)`), where recording the graph costs far less than drawing; and, in a program that never "
        "uses an accelerator, a single evaluation forward on a batch held in memory between training steps or "
        "plots (a CPU toy on a few hundred points: the graph is cheap there and the change would not be "
        "noticed). A forward pass in a loop over data or decoding steps is reported even on the CPU when the "
        "network is known by what it is, not only by its name (one Score-CAM forward per channel; an action picked by a function that a loop calls on every environment step with the new state, unless a caller backpropagates through what it returns), but not a handful of "
        "literal steps (`for i in range(5)`: greedy decoding of a toy sentence), nor a loop over the layers "
        "of one network (`for layer in self.features: x = layer(x)`, or by index: `x = self.flows[k](x)` for `k` in "
        "`range(n_flows)`), which is a single forward pass. One-off "
        "single-batch plotting is left alone on purpose: its graph costs less than drawing the figure."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Adds `@torch.no_grad()` right above the `def` (below the other decorators), or for an evaluation loop "
        "or a validation forward pass inside a training function (where a decorator would turn off the "
        "training step too) or a module-level script wraps the statements that run the model in "
        "`with torch.no_grad():` (no fix when those statements also train), adding `import torch` when needed. Unsafe: tensors returned by the function "
        "no longer carry gradients, which breaks a caller that backpropagates through them."
    )
    requires = ("torch", ".cuda(")

    def gate(self, text: str) -> bool:
        # an eval-mode switch or an evaluation-like function name; else nothing to analyse
        return bool(_TL301_GATE.search(text)) and uses_torch(text)

    def check(self, facts: FileFacts) -> None:
        if facts.is_test_file:
            return
        torch_name = self.context.local_name_for("torch")
        for scope in facts.scopes:
            if isinstance(scope.node, cst.Module):
                self._module_level(facts, scope, torch_name)
            else:
                self._function(facts, scope, torch_name)

    # -- functions -------------------------------------------------------------------------------------------
    def _function(self, facts: FileFacts, scope: ScopeFacts, torch_name: str) -> None:
        if scope.decorated_grad_off is not None or scope.decorated_other_grad or facts.framework_hook(scope):
            return
        if facts.is_test_case(scope) or inference.covered_by_callers(facts, scope):
            return
        if self._switched(facts, scope, torch_name):
            return
        if facts.training_orders(scope):  # it trains, itself or through a function it calls
            judged = self._segments(facts, scope, torch_name)
            self._unused_forwards(facts, scope, torch_name, judged)
            return
        if scope.mode_unknown:
            return
        evaluated = [e for e in facts.eval_forwards(scope) if not facts.is_frozen(e[1])]
        forwards = [call for call, _ in evaluated]
        what = f"`{evaluated[0][1]}`" if evaluated else None
        if not evaluated:
            named = inference.named_entry_point(facts, scope)
            if named is not None:
                what, forwards = f"`{named[0]}`", named[1]
            else:
                flow = inference.by_flow(facts, scope, self.semantic.uses_accelerator)
                if flow is None:
                    return
                what, forwards = flow
        if inference.feeds_training(facts, scope, forwards) or inference.returned_to_training(facts, scope, forwards):
            return  # whatever the names say, a result is trained on (here or by a caller) or stored
        if inference.not_worth_a_change(facts, scope, forwards) or facts.callers_grad_off(scope):
            return
        fix = decorator_fix(self.context, facts, scope, torch_name)
        message = (
            f"`{scope.name}` runs {what} with autograd on, recording a graph nobody uses (up to 2.6x slower, "
            f"3-6x the memory): decorate it with @{torch_name}.no_grad()"
        )
        self.report(scope.node.name, message, fix=fix)  # type: ignore[union-attr]

    def _switched(self, facts: FileFacts, scope: ScopeFacts, torch_name: str) -> bool:
        """Report calls of a function whose training a flag switches off (`run_epoch(..., train=False)`): at the
        `def` when nothing else in it trains (True), else at each call."""
        switched = inference.switched_off_calls(facts, scope)
        if not switched:
            return False
        cost = "so its forward passes record a graph nobody uses (up to 2.6x slower, 3-6x the memory)"
        if isinstance(scope.node, cst.FunctionDef) and not inference.trains_elsewhere(facts, scope, {c.node for c, _ in switched}):
            if not facts.callers_grad_off(scope):
                message = f"`{scope.name}` runs `{switched[0][1].name}` with its training switched off, {cost}: " \
                          f"decorate it with @{torch_name}.no_grad()"
                self.report(scope.node.name, message, fix=decorator_fix(self.context, facts, scope, torch_name))
            return True
        for call, function in switched:
            message = f"`{function.name}` is called with its training switched off, {cost}: run the call under " \
                      f"`with {torch_name}.no_grad():`"
            self.report(call.node, message, fix=wrap_fix(self.context, facts, scope, [call], torch_name, call.node))
        return False

    # -- an evaluation loop inside a training function ------------------------------------------------------
    def _segments(self, facts: FileFacts, scope: ScopeFacts, torch_name: str) -> set[cst.Call]:
        """Report evaluation after `model.eval()` in a training function; return the forward calls judged."""
        judged: set[cst.Call] = set()
        for call_node, target, order, stop in facts.inference_segments(scope):
            loops = []
            single = []
            for call in facts.forward_calls(scope, target):
                if not (order < call.order < stop) or call.covered:
                    continue
                judged.add(call.node)
                outer = [loop for loop in call.loops if facts.orders[loop] > order]
                if not outer:
                    single.append(call)
                    continue
                loops.append(outer[0])
            if not loops:
                if single and inference.single_pass_negligible(facts, scope, single, self.semantic.uses_accelerator):
                    continue
                if single and facts.stepped_before(scope, order) and not facts.is_frozen(target):
                    # `loss.backward(); optimizer.step(); model.eval(); out = model(val_x)`: a validation
                    # forward pass after the training step that no backward pass follows
                    message = (
                        f"`{target}` is put in eval mode after the training step and then run with autograd on, "
                        f"recording a graph nobody uses (up to 2.6x slower, 3-6x the memory): run the validation "
                        f"forward pass under `with {torch_name}.no_grad():`"
                    )
                    fix = wrap_fix(self.context, facts, scope, single, torch_name, single[0].node) or wrap_fix(
                        self.context, facts, scope, single, torch_name, call_node
                    )
                    self.report(call_node, message, fix=fix)
                continue
            fix = wrap_loops_fix(self.context, facts, loops, torch_name)
            message = (
                f"`{target}` is put in eval mode and then run in a loop with autograd on, recording a graph nobody "
                f"uses (up to 2.6x slower, 3-6x the memory): wrap the evaluation loop in "
                f"`with {torch_name}.no_grad():`"
            )
            self.report(call_node, message, fix=fix)
        return judged

    # -- a forward pass whose result no backward pass reaches -------------------------------------------------
    def _unused_forwards(self, facts: FileFacts, scope: ScopeFacts, torch_name: str, judged: set[cst.Call]) -> None:
        for call in inference.unused_forwards(facts, scope, judged, self.semantic.uses_accelerator):
            message = (
                f"The result of `{call.callee or self.context.code(call.node.func)}(...)` never reaches a backward pass, yet it runs with autograd on, "
                f"recording a graph nobody uses (up to 2.6x slower, 3-6x the memory): run it under "
                f"`with {torch_name}.no_grad():`"
            )
            anchor = call.loops[0] if call.loops and not scope.training else call.node  # a script's loop
            self.report(call.node, message, fix=wrap_fix(self.context, facts, scope, [call], torch_name, anchor))

    # -- module level ----------------------------------------------------------------------------------------
    def _module_level(self, facts: FileFacts, scope: ScopeFacts, torch_name: str) -> None:
        self._switched(facts, scope, torch_name)
        judged: set[cst.Call] = set()
        for call_node, target, order, stop in facts.inference_segments(scope):
            forwards = [c for c in facts.forward_calls(scope, target) if order < c.order < stop and not c.covered]
            if not forwards:
                continue
            judged.update(c.node for c in forwards)
            looped = any(facts.orders[loop] > order for c in forwards for loop in c.loops)
            if not looped and inference.single_pass_negligible(facts, scope, forwards, self.semantic.uses_accelerator):
                continue
            message = (
                f"`{target}` is put in eval mode and then run with autograd on, recording a graph nobody uses "
                f"(up to 2.6x slower, 3-6x the memory): run it under `with {torch_name}.no_grad():`"
            )
            self.report(call_node, message, fix=wrap_fix(self.context, facts, scope, forwards, torch_name, call_node))
        self._unused_forwards(facts, scope, torch_name, judged)
