"""Inference: which forward passes of a file run with autograd on for nothing, and whether that costs enough
to matter.

Built on the grad facts (`grad_mode.FileFacts`): a function is inference when it puts a network in eval mode
and runs it, when it is an evaluation entry point by name (`evaluate`, `predict`, `sample` with a loop), or,
whatever its name, when the results of its forward passes never reach a backward pass (`forward_flow`,
followed through returns into callers in any file) and something makes it run repeatedly. Cost decides
the rest: a forward pass run once in the program, a picture drawn a few times, or, in a program with no
accelerator, one evaluation forward on a batch held in memory, is not worth a change.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.semantic import forward_flow, frozen_networks, network_methods, switched_training, trip_inputs
from torchlint.semantic.forward_flow import BACKWARD, RETURNED
from torchlint.semantic.grad_mode import CallFact, FileFacts, ScopeFacts
from torchlint.semantic.loops import gated, is_loader_expr
from torchlint.semantic.objects import MODULE, objects
from torchlint.semantic.modules import (
    eval_name_strength,
    is_model_like,
    is_network_callee,
    words,
)
from torchlint.semantic.trip_counts import literal_trips

# Words of a generate_* / sample_* function name that say it builds text or code, not samples from a network.
_SOURCE_WORDS = frozenset({"string", "str", "repro", "source", "stub", "template", "docstring", "header"})


def covered_by_callers(facts: FileFacts, scope: ScopeFacts) -> bool:
    """The function runs with autograd off where it is called: a call of its name runs under no-grad in this
    file, and no call of it found in the project runs it with autograd on. One also called bare (evaluated
    under no-grad every epoch, then again on the test set after training with autograd on) is judged."""
    if scope.name not in facts.covered_names:
        return False
    return not facts.call_sites(scope) or facts.callers_grad_off(scope)


def runs_once(facts: FileFacts, scope: ScopeFacts, forwards: list[CallFact]) -> bool:
    """The forward passes run once in the program (a demo on one image, a test pass after training): the
    graph they record costs too little to matter. A constructor's forwards count as once too, unless they
    loop over a data loader: shape probes on a dummy input while the object is built, block by block."""
    if scope.is_method and scope.name == "__init__" and not any(
        isinstance(loop, cst.For) and is_loader_expr(facts.context, loop.iter) for call in forwards for loop in call.loops
    ):
        return True
    return all(facts.runs_once(scope, call) for call in forwards)


def not_worth_a_change(facts: FileFacts, scope: ScopeFacts, forwards: list[CallFact]) -> bool:
    """The forward passes of an evaluation function cost too little to report: they never run, run once in the
    program, or are a warm-up beside a loop that already runs under no-grad."""
    live = [call for call in forwards if not never_runs(facts.context, call.node)]
    return not live or runs_once(facts, scope, live) or warm_up_only(facts, scope, live)


def feeds_training(facts: FileFacts, scope: ScopeFacts, forwards: list[CallFact]) -> bool:
    """A result of one of the forward passes reaches a backward pass in the function, is stored on an object
    or is handed to code out of sight that may train on it."""
    return any(facts.result_reaches(scope, call.node, follow_callers=False) - {RETURNED} for call in forwards)


def single_pass_negligible(facts: FileFacts, scope: ScopeFacts, forwards: list[CallFact], accelerator: bool) -> bool:
    """One forward pass per evaluation (no loop over data of its own) that costs too little to matter: it runs
    once in the program, or the program never uses an accelerator (a toy on a few points between plots)."""
    return not accelerator or runs_once(facts, scope, forwards)


def named_entry_point(facts: FileFacts, scope: ScopeFacts) -> Optional[tuple[str, list[CallFact]]]:
    """(network, forward calls) when `scope` is an evaluation entry point by name (`evaluate`, `predict`, a
    `sample`/`generate` with a loop) that runs a network outside no-grad, or None."""
    strength = eval_name_strength(scope.name)
    if not strength:
        return None
    if scope.is_method and facts.is_module_class(scope.cls):
        return None  # part of a model: its caller decides about grad
    func = scope.node
    assert isinstance(func, cst.FunctionDef)
    if strength == 1 and any(w in _SOURCE_WORDS for w in words(scope.name)):
        return None  # `generate_repro_string`: builds text or code
    context = facts.context
    evals = None
    for call in scope.calls:
        callee = call.callee
        if not callee or call.covered:
            continue
        if facts.method_network(call):  # `model.predict(...)`, `agent.get_action(...)`
            base = callee.rsplit(".", 1)[0]
            if facts.is_frozen(base):
                continue
        else:
            base = callee[: -len(".forward")] if callee.endswith(".forward") else callee
            if base == "self" or not is_model_like(base) or facts.defines(base.rsplit(".", 1)[-1]):
                continue
            if not is_network_callee(base):
                continue  # `writer.generator(...)`, `tokenizer.decoder(...)`
            if context.qualname(call.node.func) is not None or facts.is_frozen(base):
                continue  # an imported function (a model constructor), not a forward pass
            if _callable_default(context, func, base.split(".")[0]):
                continue
        if call.loops:
            return base, _forwards(facts, scope, call)
        if strength == 2:
            if evals is None:
                evals = bool(facts.mode_evals(scope))
            if scope.host or evals:
                return base, _forwards(facts, scope, call)
    return None


def by_flow(facts: FileFacts, scope: ScopeFacts, accelerator: bool) -> Optional[tuple[str, list[CallFact]]]:
    """(what, forward calls) when the function runs networks (itself or through a helper of this file whose
    result is trained on elsewhere) whose results never reach a backward pass, followed through its return
    value into its callers, and something makes them run repeatedly: a loop here, or a caller that calls
    the function in a loop. In a program that never uses an accelerator only a loop here counts: one forward
    per call (a prediction on a batch held in memory) is a CPU toy, nothing worth a change, unless a caller runs
    it on new input every trip of a loop (an action picked every environment step)."""
    forwards: list[CallFact] = []
    what = None
    for call in scope.calls:
        if call.covered:
            continue
        if facts.is_network_call(call):
            if facts.method_network(call) and network_methods.judged_where_defined(facts, call):
                continue  # an agent's `select_action(state)`: judged at its own `def`
            name = call.callee or facts.context.code(call.node.func)
        else:
            helper = facts.helper_forward(call)
            if helper is None or not facts.helper_feeds_backward(helper):
                continue  # not a forward pass, or a helper judged on its own
            name = f"{helper.name}()"
        if facts.result_reaches(scope, call.node, follow_callers=False) - {RETURNED}:
            return None  # trained on here, or stored
        if draws_a_few_pictures(facts, scope, call):
            continue
        forwards.append(call)
        what = what or name
    looped = any(_repeating_loops(call) for call in forwards)
    if not forwards:
        return None
    if scope.is_method and not looped and _called_on_objects(facts, scope) and any(
        RETURNED in facts.result_reaches(scope, c.node, False) for c in forwards
    ):
        return None  # a method that hands back its output to other objects' code (a network's `sample`, an
        # extractor's `forward_pass`): judged where it is called
    if not accelerator and not any(
        _known_network(facts, call) and not _few_literal_items(facts.context, loop)
        for call in forwards for loop in _repeating_loops(call)
    ) and not (not looped and _stepped_on_new_input(facts, scope, forwards)):
        return None  # on the CPU, five greedy decoding steps of a toy sentence cost nothing worth a change
    if not looped and not facts.called_in_loop(scope):
        return None
    if any(facts.result_reaches(scope, call.node) for call in forwards):
        return None  # returned to code that may train on it
    return f"`{what}`", forwards


def _stepped_on_new_input(facts: FileFacts, scope: ScopeFacts, forwards: list[CallFact]) -> bool:
    """On the CPU too, networks known by what they are that a caller runs on every trip of a loop, each time on
    input the loop makes anew (an agent's action picked every environment step from the state `env.step`
    returned): a forward pass per step, not one evaluation of a batch held in memory between epochs."""
    known = all(_known_network(facts, call) or facts.helper_forward(call) is not None for call in forwards)
    return known and _called_on_new_input(facts, scope) and not _trained_through(facts, scope)


def _trained_through(facts: FileFacts, scope: ScopeFacts) -> bool:
    """A caller backpropagates through what the function returns (a loss it builds from the values and log
    probabilities it is given, beside a detached bootstrap value): part of training, whatever its forwards."""
    function = scope.node
    assert isinstance(function, cst.FunctionDef)
    given = {param.name.value for param in function.params.params} - {"self", "cls"}
    if not forward_flow.returns_given(function, given):
        return False  # hands back host values only (an action, a score): whatever callers do with them
    return any(
        BACKWARD in caller_facts.result_reaches(caller, site.node) for caller_facts, caller, site in facts.call_sites(scope)
    )


def _called_on_new_input(facts: FileFacts, scope: ScopeFacts, depth: int = 0) -> bool:
    """A caller (in any file) calls the function on every trip of a loop of many trips, given a name the loop
    binds anew on each trip; or calls it from a function that is called so itself (two calls up)."""
    for caller_facts, caller, site in facts.call_sites(scope):
        if site.loops:
            loop = site.loops[-1]
            context = caller_facts.context
            if not gated(context, site.node, loop) and not _few_literal_items(context, loop) and (
                trip_inputs.reads_any(site.node.args, trip_inputs.bound_each_trip(loop))
            ):
                return True
        elif depth < 2 and caller is not scope and not isinstance(caller.node, cst.Module):
            if _called_on_new_input(caller_facts, caller, depth + 1):
                return True
    return False


def _known_network(facts: FileFacts, call: CallFact) -> bool:
    """The call runs a network known by what it is (a module by its binding, a method read in its class), not
    only by its name: on the CPU, where a name is all that makes `flatten_model(m)` look like one."""
    return facts.method_network(call) or objects(facts.context).kind(call.node.func) == MODULE


def _called_on_objects(facts: FileFacts, scope: ScopeFacts) -> bool:
    """The method is called only on objects (`net.sample(x)`, `self.extractor.forward_pass(x)`), never as a
    helper of its own class (`self._predict_batch(x)`, judged at its `def`)."""
    sites = facts.call_sites(scope)
    return all(
        isinstance(call.node.func, cst.Attribute)
        and not (isinstance(call.node.func.value, cst.Name) and call.node.func.value.value == "self")
        for _, _, call in sites
    )


def _repeating_loops(call: CallFact) -> list[cst.CSTNode]:
    """The loops around `call` that repeat its forward pass: not a loop whose own target is the network called
    or picks it out of its container (`for layer in self.features: x = layer(x)`, `for k in range(n_flows):
    x = self.flows[k](x)` run one forward pass, layer by layer)."""
    callee = call.node.func
    if isinstance(callee, cst.Name):
        names = {callee.value}
    elif isinstance(callee, cst.Subscript):
        names = {
            element.slice.value.value for element in callee.slice
            if isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.Name)
        }
    else:
        return list(call.loops)
    return [
        loop for loop in call.loops if not (isinstance(loop, cst.For) and any(_binds(loop.target, n) for n in names))
    ]


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(element.value, name) for element in target.elements)
    return False


def unused_forwards(facts: FileFacts, scope: ScopeFacts, judged: set[cst.Call], accelerator: bool) -> list[CallFact]:
    """In code that trains (or a module-level script), the networks run with autograd on whose results never
    reach a backward pass, are not returned, stored or handed to code out of sight, and that run repeatedly:
    a periodic test pass on the GPU between training steps, an inference loop of a script. `judged`: calls
    already judged as part of an evaluation after `.eval()`."""
    training = bool(facts.training_orders(scope))
    if scope.input_grads:
        return []  # gradients of its own tensors (an attack, a saliency map): which forward needs grad is subtle
    if training and not _steps_in_sight(facts, scope):
        return []  # training signs here (`zero_grad`, a gradient flag), but the step runs where we cannot see it
    found = []
    steps = set(facts.training_orders(scope))
    for call in scope.calls:
        if call.covered or call.node in judged or call.order in steps or not facts.is_network_call(call):
            continue  # (a call that trains, `agent.update(batch)`, is no forward pass to wrap)
        if facts.method_network(call) and network_methods.judged_where_defined(facts, call):
            continue  # an agent's `select_action(state)`: judged at its own `def`
        if not training and not call.loops:
            continue
        if training and not accelerator and not _evaluation_loop(facts, scope, call):
            continue  # a CPU toy: a test forward between plots costs nothing worth a change; a test loop does
        if _left_to_tl305(facts, call):
            continue  # `target_net(s).max(1)[0].detach()`: TL305's finding (a network never trained here)
        if facts.result_reaches(scope, call.node, follow_callers=False, strict=True):
            continue
        if facts.runs_once(scope, call) or draws_a_few_pictures(facts, scope, call):
            continue
        if never_runs(facts.context, call.node):
            continue
        found.append(call)
    return found


def _steps_in_sight(facts: FileFacts, scope: ScopeFacts) -> bool:
    """A backward pass or an optimizer step runs in the function or in one it calls that we can read: a method
    of its own class (`self.train_model()`), a function of this file (`update(batch)`), a method of another
    object (`agent.update()`). Where each forward's result goes then tells whether it is trained on."""
    return facts.stepped_before(scope, scope.end + 1) or facts.calls_a_training_step(scope)


def _left_to_tl305(facts: FileFacts, call: CallFact) -> bool:
    """The result is detached and the network is never trained here: TL305 reports it. A result detached on a
    later line counts only for a network this file builds (`teacher = Net()`), as TL305 requires; a parameter's
    (`fake = net_G(z)`, then `net_D(fake.detach())`) stays this rule's finding."""
    network = facts.network_of(call) or ""
    if facts.has_parameters(network):
        return False  # trained here
    if facts.detached_result(call.node, later=False) is not None:
        return True
    return facts.detached_result(call.node) is not None and frozen_networks.built_here(facts, network)


def _evaluation_loop(facts: FileFacts, scope: ScopeFacts, call: CallFact) -> bool:
    """The forward pass runs in a loop over a data loader that trains nothing (a test loop of a notebook)."""
    if not call.loops or not isinstance(call.loops[-1], cst.For) or not is_loader_expr(facts.context, call.loops[-1].iter):
        return False
    span = next(((start, end) for loop, start, end, _ in scope.loops if loop is call.loops[-1]), None)
    return span is not None and not any(span[0] <= o <= span[1] for o in facts.training_orders(scope))


def switched_off_calls(facts: FileFacts, scope: ScopeFacts) -> list[tuple[CallFact, ScopeFacts]]:
    """Calls in `scope` of a function that trains only under a flag the call turns off
    (`run_epoch(..., train=False)`), each with the function it runs (`switched_training`)."""
    found = []
    for call in scope.calls:
        function = switched_training.evaluating_call(facts, scope, call)
        if function is not None:
            found.append((call, function))
    return found


def trains_elsewhere(facts: FileFacts, scope: ScopeFacts, besides: set[cst.Call]) -> bool:
    """`scope` trains, or calls (other than `besides`) a function of this file that trains."""
    return bool(scope.training) or any(c.node not in besides and facts.runs_training(c.node) for c in scope.calls)


def returned_to_training(facts: FileFacts, scope: ScopeFacts, forwards: list[CallFact]) -> bool:
    """A forward pass's result is returned, and a caller we can see backpropagates through it
    (`out = predict(model, x); loss = criterion(out, y); loss.backward()`)."""
    returned = [c for c in forwards if RETURNED in facts.result_reaches(scope, c.node, follow_callers=False)]
    if not returned or not facts.call_sites(scope):
        return False
    return any(BACKWARD in facts.result_reaches(scope, c.node) for c in returned)


def draws_a_few_pictures(facts: FileFacts, scope: ScopeFacts, call: CallFact) -> bool:
    """The forward pass draws a picture (its values end in a figure or an image file) a few times: behind a
    logging interval of the training loop, or in a loop over a handful of literal items (`range(5)`)."""
    if not call.loops or not facts.values_plotted(scope, call.node):
        return False
    if scope.training and gated(facts.context, call.node, call.loops[-1]):
        return True
    # a handful of pictures, unless the function drawing them is itself called in a loop (a latent walk per seed)
    return all(_few_literal_items(facts.context, loop) for loop in call.loops) and not facts.called_in_loop(scope)


def never_runs(context: Context, node: cst.CSTNode) -> bool:
    """`node` sits in the `else`/`elif` of an `if True:`, or after a `return`/`raise` of its block (a `test()`
    switched off by a bare `return` on its first line): code that never runs."""
    child = node
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, cst.If) and child is ancestor.orelse and context.literal(ancestor.test) is True:
            return True
        if isinstance(ancestor, cst.IndentedBlock) and child in ancestor.body:
            for before in ancestor.body[: ancestor.body.index(child)]:
                if isinstance(before, cst.SimpleStatementLine) and any(
                    isinstance(small, (cst.Return, cst.Raise)) for small in before.body
                ):
                    return True
        child = ancestor
    return False


def warm_up_only(facts: FileFacts, scope: ScopeFacts, forwards: list[CallFact]) -> bool:
    """The forward passes left with grad on run outside loops while the function's loop runs its networks under
    no-grad: a warm-up or a trace on a dummy input (`model(torch.ones(1, 3, h, w))` before a TensorRT build)."""
    if any(call.loops for call in forwards):
        return False
    return any(c.covered and c.loops and facts.is_network_call(c) for c in scope.calls)


def _few_literal_items(context: Context, loop: cst.CSTNode) -> bool:
    """`for i in range(5)`, `for net in (a, b)`: a loop over at most ten items written in the code."""
    trips = literal_trips(context, loop)
    return trips is not None and trips <= 10


def _forwards(facts: FileFacts, scope: ScopeFacts, found: CallFact) -> list[CallFact]:
    """The forward passes `scope` runs with grad on: `found` and every other network call outside no-grad."""
    return [c for c in scope.calls if c is found or (not c.covered and facts.is_network_call(c))]


def _callable_default(context: Context, func: cst.FunctionDef, name: str) -> bool:
    """`name` is a parameter whose default is a function (`decoder=decode_tokens`): not a network."""
    for param in (*func.params.params, *func.params.kwonly_params, *func.params.posonly_params):
        if param.name.value == name:
            return param.default is not None and isinstance(param.default, (cst.Name, cst.Attribute)) and (
                context.code(param.default) != "None"
            )
    return False
