"""Grad mode: whether autograd is on where a forward pass runs.

`collect_grad_facts` walks the file once and records, per function (and for the module's top-level code),
its calls in order, which of them run under `no_grad`/`inference_mode`/`set_grad_enabled(False)` blocks,
its grad decorators, its training signs (backward, optimizer steps, gradient reads), its `eval()`/`train()`
calls and its loops. A function called only from grad-off code is grad-off itself (`covered_names`, to a
fixpoint across the file).

It also answers, for a forward pass, the questions that tell inference from training by what the code does:
where its result goes (`result_reaches`, through the function and, when returned, its callers), how often it
runs (`runs_once`: in no loop, in code the program runs once) and whether every caller, in any file of the
project, already turns autograd off (`callers_grad_off`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import dotted
from torchlint.lint.walk import descendants, semantic_children
from torchlint.semantic import (
    forward_flow, frozen_networks, graph_free, host_sinks, network_items, network_methods, network_values, parameter_free,
    stored_reads,
)
from torchlint.semantic.file_kind import is_test_file
from torchlint.semantic.functions import called_function
from torchlint.semantic.loops import gated, is_forward_call, step_kind
from torchlint.semantic.memo import CycleSafeMemo, question_stack
from torchlint.semantic.modules import is_model_like, is_network_callee, names_a_network_plainly, names_an_action
from torchlint.semantic.objects import MODULE, objects

# Context managers / decorators that turn autograd off (set_grad_enabled with any argument: a value that
# cannot be decided is the train/eval switch `set_grad_enabled(phase == "train")`, which we leave alone).
GRAD_OFF = frozenset({"torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled"})

GRAD_ON = frozenset({"torch.enable_grad"})

_GRAD_WORDS = frozenset({"no_grad", "inference_mode", "set_grad_enabled", "enable_grad"})

# Framework hooks that run under no_grad / in eval mode already (Lightning, MMEngine, ...).
_HOOK_SUFFIXES = ("_step", "_step_end", "_epoch_end", "_batch_end")

# Method names on a module that are not forward passes.
_FORWARD_METHODS = re.compile(r"^forward(_\w+)?$")
# `owner.parameters(` / `owner.named_parameters(`, owner a dotted name that starts the expression
_PARAMETERS_OF = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*?)\s*\.\s*(?:named_)?parameters\s*\(")

# `owner.eval(`, `owner.load_state_dict(`: only a module has an eval mode and a state dict
_MODE_OF = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*?)\s*\.\s*(?:eval|load_state_dict)\s*\(")


# The calls themselves, `.parameters(` and `.eval(`: scanning for them first is much faster on long files.
_PARAMETERS_CALL = re.compile(r"\.\s*(?:named_)?parameters\s*\(")
_MODE_CALL = re.compile(r"\.\s*(?:eval|load_state_dict)\s*\(")


def _owners(pattern: "re.Pattern[str]", call: "re.Pattern[str]", text: str) -> set[str]:
    """The receivers `pattern` finds in `text`, spaces removed (none where `call` finds nothing)."""
    if call.search(text) is None:
        return set()
    return {re.sub(r"\s+", "", owner) for owner in pattern.findall(text)}


# Calls that take gradients (recorded as training when they come from torch.autograd / torch.func).
_GRADIENT_CALLS = frozenset({"grad", "vjp", "jvp", "jacobian", "hessian"})

_HOST_METHODS = frozenset({"item", "tolist", "numpy", "cpu"})

# Libraries whose functions never train on what they are given; calls that only log, plot or save.
_LIBRARY_ROOTS = frozenset(
    {"torch", "numpy", "matplotlib", "torchvision", "PIL", "cv2", "logging", "wandb", "scipy", "sklearn",
     "imageio", "skimage", "math", "json", "pickle", "tqdm"}
)
# Methods that record values for a metric.
_RECORDING_METHODS = frozenset({"update", "add_batch", "accumulate", "record", "observe", "update_state"})


@dataclass
class CallFact:
    node: cst.Call
    callee: Optional[str]  # dotted text of the callee, None when not a Name/Attribute chain
    order: int
    covered: bool  # under a grad-off context inside its scope (or after set_grad_enabled(False))
    loops: tuple[cst.CSTNode, ...]  # enclosing loops (For/While/comprehension) inside the scope, outermost first
    withs: tuple[cst.With, ...]  # enclosing grad-off With statements inside the scope


@dataclass
class ScopeFacts:
    """What one function (or the module's top-level code) does, not counting nested functions and classes."""

    node: Union[cst.FunctionDef, cst.Module]
    name: str
    cls: Optional[cst.ClassDef]
    parent: Optional["ScopeFacts"]
    decorated_grad_off: Optional[cst.Decorator] = None
    decorated_other_grad: bool = False  # enable_grad, jit, or an unknown decorator about grad
    calls: list[CallFact] = field(default_factory=list)
    grad_off: list[int] = field(default_factory=list)  # orders of grad-off constructs (with items, calls)
    grad_off_withs: list[cst.With] = field(default_factory=list)
    set_grad_false: list[int] = field(default_factory=list)  # orders of bare set_grad_enabled(False) calls
    training: list[int] = field(default_factory=list)  # orders of backward/step/autograd.grad/requires_grad
    input_grads: bool = False  # asks for gradients of its own tensors (requires_grad, autograd.grad): attacks, maps
    host: bool = False  # .item()/.cpu()/.numpy()/.tolist()
    evals: list[tuple[cst.Call, str, int]] = field(default_factory=list)  # T.eval() / T.train(False)
    trains: list[tuple[cst.Call, str, int]] = field(default_factory=list)  # T.train() / T.train(True)
    mode_unknown: list[tuple[cst.Call, str, int]] = field(default_factory=list)  # T.train(flag)
    loops: list[tuple[cst.CSTNode, int, int, tuple]] = field(default_factory=list)  # (loop, start, end, iter text)
    yields: bool = False
    end: int = 0
    start: int = 0
    is_async: bool = False

    @property
    def is_method(self) -> bool:
        return self.cls is not None


class FileFacts:
    """What each scope of the file does about autograd (built by `collect_grad_facts`)."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.receivers: dict = {}  # `network_methods.receiver_classes`, remembered by (node, depth)
        self.scopes: list[ScopeFacts] = []
        self.by_node: dict[cst.CSTNode, ScopeFacts] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.parents = context.parents  # complete once the walk is over
        self.orders: dict[cst.CSTNode, int] = {}
        self.is_test_file = is_test_file(context.source.path, context.source.text)
        text = context.source.text
        self.imports_test_framework = "import pytest" in text or "import unittest" in text or "from unittest" in text
        self.frozen: set[str] = set()  # modules whose parameters are frozen somewhere in the file
        self._covered: Optional[set[str]] = None
        self._sites: dict[cst.CSTNode, list] = {}  # call sites of each function, in any file
        stack = question_stack(context)  # answers that rest on other questions of the model
        self._network_calls: CycleSafeMemo[cst.Call, bool] = CycleSafeMemo(False, stack)
        self._method_calls: CycleSafeMemo[cst.Call, bool] = CycleSafeMemo(False, stack)
        self._mode_owners: Optional[set[str]] = None
        self._training_orders: CycleSafeMemo[cst.CSTNode, list[int]] = CycleSafeMemo([], stack)
        self._parameter_owners: Optional[set[str]] = None
        self._function_names: tuple[int, set[str]] = (-1, set())
        self._helpers: CycleSafeMemo[cst.Call, Optional[ScopeFacts]] = CycleSafeMemo(None, stack)
        self._reached: dict[tuple[cst.Call, bool, frozenset], frozenset[str]] = {}  # where a forward's result goes, here
        self._stores: CycleSafeMemo[str, bool] = CycleSafeMemo(True, stack)  # attributes whose values may be trained on
        self._elements: CycleSafeMemo[cst.Call, forward_flow.Elements] = CycleSafeMemo(None, stack)
        self._given: CycleSafeMemo[cst.CSTNode, frozenset[str]] = CycleSafeMemo(frozenset({"stored"}), stack)
        self._values: Optional[set[str]] = None  # names handed around as values
        self._call_facts: Optional[dict[cst.Call, tuple[ScopeFacts, CallFact]]] = None
        # walk state
        self.counter = 0
        top = ScopeFacts(context.module, "<module>", None, None)
        self.scopes.append(top)
        self.by_node[context.module] = top
        self.scope_stack: list[ScopeFacts] = [top]
        self.class_stack: list[Optional[cst.ClassDef]] = [None]
        self.withs: list[tuple[ScopeFacts, cst.With]] = []
        self.loops: list[tuple[ScopeFacts, cst.CSTNode]] = []

    @property
    def covered_names(self) -> set[str]:
        if self._covered is None:
            self._covered = self._covered_names()
        return self._covered

    def is_frozen(self, target: str) -> bool:
        """`target`'s parameters get requires_grad False somewhere (then no graph is built anyway)."""
        last = target.rsplit(".", 1)[-1]
        return target in self.frozen or last in {f.rsplit(".", 1)[-1] for f in self.frozen}

    # -- collection (called from the engine walk) --------------------------------------------------------------
    def tick(self, node: cst.CSTNode) -> int:
        self.counter += 1
        self.orders[node] = self.counter
        return self.counter

    @property
    def scope(self) -> ScopeFacts:
        return self.scope_stack[-1]

    def _covered_now(self) -> bool:
        scope = self.scope
        return bool(self.withs) and self.withs[-1][0] is scope

    def _state(self) -> tuple[bool, tuple, tuple]:
        scope = self.scope
        loops = tuple(loop for owner, loop in self.loops if owner is scope and not runs_at_most_once(loop))
        withs = tuple(w for owner, w in self.withs if owner is scope)
        return bool(withs), loops, withs

    def enter_body(self, func: cst.FunctionDef) -> None:
        order = self.tick(func.body)
        scope = ScopeFacts(func, func.name.value, self.class_stack[-1], self.scope, start=order)
        scope.is_async = func.asynchronous is not None
        self.scopes.append(scope)
        self.by_node[func] = scope
        self._decorators(func, scope)
        self.scope_stack.append(scope)
        self.class_stack.append(None)

    def leave_body(self) -> None:
        self.scope.end = self.counter
        self.scope_stack.pop()
        self.class_stack.pop()

    def enter_class(self, node: cst.ClassDef) -> None:
        self.tick(node)
        self.classes.setdefault(node.name.value, node)

    def enter_class_body(self, node: cst.ClassDef) -> None:
        self.class_stack.append(node)

    def leave_class_body(self) -> None:
        self.class_stack.pop()

    def enter_with(self, node: cst.With) -> None:
        order = self.tick(node)
        if any(self._grad_item(item.item) for item in node.items):
            self.scope.grad_off.append(order)
            self.scope.grad_off_withs.append(node)
            self.withs.append((self.scope, node))

    def leave_with(self, node: cst.With) -> None:
        if self.withs and self.withs[-1][1] is node:
            self.withs.pop()

    def enter_loop(self, node: cst.CSTNode) -> None:
        order = self.tick(node)
        self.scope.loops.append((node, order, order, ()))
        self.loops.append((self.scope, node))
        if isinstance(node, cst.For) and isinstance(node.iter, cst.Call):
            owner = node.iter.func
            if isinstance(owner, cst.Attribute) and owner.attr.value in ("parameters", "named_parameters"):
                body = self.context.code(node.body)
                if re.search(r"requires_grad(_\(\s*False|\s*=\s*False)", body):
                    self.frozen.add(strip_mode_calls(self.context.code(owner.value)))

    def leave_loop(self, node: cst.CSTNode) -> None:
        if self.loops and self.loops[-1][1] is node:
            self.loops.pop()
        scope = self.scope
        for i in range(len(scope.loops) - 1, -1, -1):
            entry = scope.loops[i]
            if entry[0] is node:
                scope.loops[i] = (entry[0], entry[1], self.counter, entry[3])
                break

    def enter_attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "requires_grad" and self._set_false(node):
            return  # `p.requires_grad = False`: a freeze, recorded with its loop
        if node.attr.value in ("requires_grad", "grad", "retain_grad", "register_hook"):
            self.scope.training.append(self.tick(node))
            if node.attr.value == "requires_grad":
                self.scope.input_grads = True

    def _set_false(self, node: cst.Attribute) -> bool:
        """`node` is the target of an assignment of a literal False."""
        target = self.parents.get(node)
        assign = self.parents.get(target) if isinstance(target, cst.AssignTarget) else None
        return isinstance(assign, cst.Assign) and self.context.literal(assign.value) is False

    def enter_yield(self, node: cst.CSTNode) -> None:
        self.scope.yields = True

    def enter_call(self, node: cst.Call) -> None:
        order = self.tick(node)
        covered, loops, withs = self._state()
        self._call(node, self.scope, order, covered, loops, withs, self.context.qualname)

    def finish(self) -> None:
        self.scopes[0].end = self.counter

    def _grad_item(self, expr: cst.BaseExpression) -> bool:
        """`torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(...)` (resolved or by spelling)."""
        if not isinstance(expr, cst.Call):
            return False
        name = self.context.qualname(expr)
        if name in GRAD_OFF:
            if name == "torch.inference_mode" and expr.args and self.context.literal(expr.args[0].value) is False:
                return False
            return True
        text = dotted(expr.func) if isinstance(expr.func, (cst.Name, cst.Attribute)) else None
        return bool(text) and name is None and text.rsplit(".", 1)[-1] in _GRAD_WORDS - {"enable_grad"}

    def _decorators(self, node: cst.FunctionDef, scope: ScopeFacts) -> None:
        for decorator in node.decorators:
            expr = decorator.decorator
            target = expr.func if isinstance(expr, cst.Call) else expr
            name = self.context.qualname(target)
            text = dotted(target) if isinstance(target, (cst.Name, cst.Attribute)) else self.context.code(target)
            if name in GRAD_OFF or (name is None and text and text.rsplit(".", 1)[-1] in ("no_grad", "inference_mode")):
                if name == "torch.set_grad_enabled" or (isinstance(expr, cst.Call) and expr.args and
                                                          self.context.literal(expr.args[0].value) is False):
                    scope.decorated_other_grad = True
                else:
                    scope.decorated_grad_off = decorator
            elif (name or "").startswith("torch.jit") or name in GRAD_ON:
                scope.decorated_other_grad = True
            elif text and re.search(r"grad|inference|jit", text):
                scope.decorated_other_grad = True

    def _call(self, node: cst.Call, scope: ScopeFacts, order: int, covered: bool, loops: tuple, withs: tuple,
              qualname) -> None:
        func = node.func
        callee = dotted(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        last = callee.rsplit(".", 1)[-1] if callee else (func.attr.value if isinstance(func, cst.Attribute) else None)
        if scope.set_grad_false and not covered:
            covered = True
        scope.calls.append(CallFact(node, callee, order, covered, loops, withs))
        if last is None:
            return
        if last in ("backward", "manual_backward") or last.endswith("_backward"):
            scope.training.append(order)
        elif last == "step" and isinstance(func, cst.Attribute):
            if step_kind(self.context, node) in ("optimizer", "scheduler"):  # a scheduler steps only in training
                scope.training.append(order)
        elif last in ("zero_grad", "requires_grad_", "clip_grad_norm_", "clip_grad_value_"):
            if not (last == "requires_grad_" and node.args and self.context.literal(node.args[0].value) is False):
                scope.training.append(order)  # (freezing a network trains nothing)
        elif last in ("grad", "vjp", "jvp", "jacobian", "hessian", "functional_call") and callee:
            name = qualname(func) or ""
            if name.startswith("torch.autograd") or name.startswith("torch.func"):
                scope.training.append(order)
                scope.input_grads = True
        elif last in _HOST_METHODS and isinstance(func, cst.Attribute):
            scope.host = True
        elif last == "enable_grad":
            scope.training.append(order)  # grad deliberately on
        elif last in ("set_grad_enabled", "no_grad", "inference_mode"):
            parent = self.parents.get(node)
            if not isinstance(parent, (cst.WithItem, cst.Decorator)):  # those are recorded with the With / def
                scope.grad_off.append(order)
                if last == "set_grad_enabled" and node.args and self.context.literal(node.args[0].value) is False:
                    scope.set_grad_false.append(order)
        if last == "requires_grad_" and isinstance(func, cst.Attribute):
            if node.args and self.context.literal(node.args[0].value) is False:
                self.frozen.add(strip_mode_calls(self.context.code(func.value)))
                owner = self._chain_owner(node)  # `G = copy.deepcopy(G0).eval().requires_grad_(False)`
                if owner is not None:
                    self.frozen.add(owner)
            else:
                scope.input_grads = True
        if isinstance(func, cst.Attribute) and last in ("eval", "train"):
            target = self.context.code(func.value)
            if isinstance(func.value, cst.Call):  # `model = Net().eval()`: the mode of what the name holds
                target = self._chain_owner(node) or target
            args = node.args
            if last == "eval" and not args:
                scope.evals.append((node, target, order))
            elif last == "train":
                if not args:
                    scope.trains.append((node, target, order))
                else:
                    value = self.context.literal(args[0].value)
                    if value is False:
                        scope.evals.append((node, target, order))
                    elif value is True:
                        scope.trains.append((node, target, order))
                    else:
                        scope.mode_unknown.append((node, target, order))

    def _chain_owner(self, node: cst.Call) -> Optional[str]:
        """The name a chain of calls that return the module itself is assigned to, `node` being one of them
        (`model = Net().eval().to(device)`: `model`)."""
        current: cst.CSTNode = node
        while True:
            parent = self.parents.get(current)
            grand = self.parents.get(parent) if parent is not None else None
            if not (isinstance(parent, cst.Attribute) and parent.attr.value in MODE_CHAIN and
                    isinstance(grand, cst.Call) and grand.func is parent):
                break
            current = grand
        parent = self.parents.get(current)
        if isinstance(parent, cst.Assign) and parent.value is current and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, (cst.Name, cst.Attribute)):
                return self.context.code(target)
        return None

    # -- callers -----------------------------------------------------------------------------------------------
    def _covered_names(self) -> set[str]:
        """Names of functions called somewhere in the file under a grad-off context (to a fixpoint)."""
        covered: set[str] = set()
        for scope in self.scopes:
            for call in scope.calls:
                # torch.no_grad()(fn)
                if isinstance(call.node.func, cst.Call) and self._grad_item(call.node.func):
                    for arg in call.node.args:
                        if isinstance(arg.value, cst.Name):
                            covered.add(arg.value.value)
        changed = True
        while changed:
            changed = False
            for scope in self.scopes:
                scope_off = scope.decorated_grad_off is not None or (
                    isinstance(scope.node, cst.FunctionDef) and scope.name in covered
                )
                for call in scope.calls:
                    if not call.callee:
                        continue
                    if call.covered or scope_off:
                        name = call.callee.rsplit(".", 1)[-1]
                        if name not in covered:
                            covered.add(name)
                            changed = True
        return covered

    # -- forward passes: where their result goes, how often they run ------------------------------------------
    def call_fact(self, node: cst.Call) -> Optional[tuple[ScopeFacts, CallFact]]:
        if self._call_facts is None:
            self._call_facts = {c.node: (s, c) for s in self.scopes for c in s.calls}
        return self._call_facts.get(node)

    def is_network_call(self, call: CallFact) -> bool:
        # methods that call each other ask again
        return self._network_calls.ask(call.node, lambda _: self._is_network_call(call) and not self._weightless(call))

    def _weightless(self, call: CallFact) -> bool:
        """The module `call` runs holds no parameter (`parameter_free`): with autograd on it records no graph."""
        func = call.node.func
        receiver = func.value if isinstance(func, cst.Attribute) and (
            func.attr.value == "forward" or self.method_network(call)
        ) else func
        return parameter_free.receivers_hold_no_parameters(self, receiver)

    def network_of(self, call: CallFact) -> Optional[str]:
        """The network a forward-pass call runs: `net` for `net(x)`, `net.forward(x)` and a method that runs
        it (`net.get_action(x)`, `network_methods`), the callee itself otherwise (`net.encoder(x)`)."""
        callee = call.callee
        if callee is None:
            return None
        if callee.endswith(".forward"):
            return callee[: -len(".forward")]
        if self.method_network(call):
            return callee.rsplit(".", 1)[0]
        return callee

    def method_network(self, call: CallFact) -> bool:
        """`call` is `receiver.method(...)` whose method runs the receiver network (`network_methods`)."""
        func = call.node.func
        if not isinstance(func, cst.Attribute):
            return False
        receiver = func.value
        if _FORWARD_METHODS.match(func.attr.value) and not (func.attr.value != "forward" and _self_attribute(receiver)):
            if func.attr.value == "forward" or not _plain_object(self, receiver):
                return False  # a network's own forward methods; a helper object's `forward_pass(x)` is read
        if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls"):
            return False  # a method of this class: judged as a helper of its own
        return self._method_calls.ask(
            call.node, lambda _: bool(network_methods.runs_network(self, call, self.is_network_receiver))
        )

    def is_network_receiver(self, text: str, expr: cst.BaseExpression) -> bool:
        """`expr` (written `text`) holds a network: a module by its binding, an owner of parameters, of an eval
        mode or of a state dict (`agent.eval()`, `agent.load_state_dict(...)`), or a name that says so plainly."""
        if objects(self.context).kind(expr) == MODULE or self.has_parameters(text):
            return True
        if self._mode_owners is None:
            self._mode_owners = _owners(_MODE_OF, _MODE_CALL, self.context.source.text)
        return text in self._mode_owners or names_a_network_plainly(text)

    def _is_network_call(self, call: CallFact) -> bool:
        """`call` runs a network's forward pass that records a graph (a module by its binding, or a network by
        its name and owner, or a method of one that runs it); not a constructor, an imported function, a
        function of this file or a network whose parameters are frozen."""
        callee = call.callee
        if callee is None and isinstance(call.node.func, cst.Subscript) and call.node.args:
            # `nets[name](x)`, `self.heads[k](x)`: a network held in a container
            func = call.node.func
            return objects(self.context).kind(func) == MODULE or network_items.item_of_networks(self, func)
        if callee is None or not call.node.args or self.context.qualname(call.node.func) is not None:
            return False  # not a name, no input (`dqn.update_target_net()`), or an imported function
        if self.method_network(call):
            return not self.is_frozen(callee.rsplit(".", 1)[0])
        base = callee[: -len(".forward")] if callee.endswith(".forward") else callee
        if base == "self" or self.defines(base.rsplit(".", 1)[-1]) or self.is_frozen(base):
            return False  # a function or class of this file, or a network whose parameters are frozen (no graph)
        if frozen_networks.frozen_where_built(self, call.node.func):
            return False  # built by a loader that freezes what it returns
        if names_an_action(base):
            return False  # `callbacks.set_model(self)`: named for what it does to a network
        func = call.node.func
        if base != callee and isinstance(func, cst.Attribute):  # `net.forward(x)`: is `net` a network?
            return is_network_callee(base) and (objects(self.context).kind(func.value) == MODULE or is_model_like(base))
        if self.has_parameters(base):
            return True
        if network_values.holds_loss(self, func):
            return False  # `criterion(out, y)`: a module, but a loss computed, not a network run
        if is_network_callee(base) and is_forward_call(self.context, call.node):  # the cheap test first
            return True
        if not isinstance(func, cst.Name):
            return False
        # `m(x)`: `m` passed a network, or bound by a loop over networks (`for m in self.members`)
        return network_values.holds_network(self, func) or network_items.item_of_networks(self, func)

    def has_parameters(self, target: str) -> bool:
        """The file takes `target.parameters()` (for an optimizer, a copy, a freeze): `target` is a module."""
        if self._parameter_owners is None:  # every `x.parameters(` of the file, read once
            self._parameter_owners = _owners(_PARAMETERS_OF, _PARAMETERS_CALL, self.context.source.text)
        return target in self._parameter_owners

    @property
    def function_names(self) -> set[str]:
        if self._function_names[0] != len(self.scopes):  # scopes are added while the file is walked
            self._function_names = (len(self.scopes), {s.name for s in self.scopes[1:]})
        return self._function_names[1]

    def defines(self, name: str) -> bool:
        """`name` is a function or a capitalised class of this file: calling it runs no network (`VGG(cfg)` builds
        one). A lower-case class may be shadowed by its instance (`net = net()`), called afterwards."""
        return name in self.function_names or (name[:1].isupper() and name in objects(self.context).classes())

    def local_function(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """`called_function` (which resolves only `name(...)` and `self.name(...)`, to a `def` of that name),
        answered at once for a call whose name no function of this file has."""
        func = call.func
        if isinstance(func, cst.Name):
            name = func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            name = func.attr.value
        else:
            return None
        if name not in self.function_names:
            return None
        return called_function(self.context, call)

    def helper_forward(self, call: CallFact) -> Optional[ScopeFacts]:
        """The function of this file `call` runs when that function runs a network itself, outside no-grad,
        and returns what it computed: `pred, true = self._process_one_batch(...)`."""
        return self._helpers.ask(call.node, lambda _: self._helper_forward(call))

    def _helper_forward(self, call: CallFact) -> Optional[ScopeFacts]:
        function = self.local_function(call.node)
        scope = self.by_node.get(function) if function is not None else None
        if scope is None or scope.training or scope.decorated_grad_off is not None or scope.decorated_other_grad:
            return None  # (it runs with the grad mode of this call: `call.covered` says whether that is off)
        for inner in scope.calls:
            if not inner.covered and self.is_network_call(inner):
                if forward_flow.RETURNED in self.result_reaches(scope, inner.node, follow_callers=False):
                    return scope
        return None

    def result_reaches(
        self, scope: ScopeFacts, node: cst.Call, follow_callers: bool = True, depth: int = 0, strict: bool = False,
        dead: frozenset = frozenset(),
    ) -> set[str]:
        """Where the result of the forward pass `node` in `scope` goes (`forward_flow`): a result returned
        by a function is followed into its callers (in any file); BACKWARD when one of them, or a caller we
        cannot see, may backpropagate through it. `strict`: handing it to a call of unknown code counts as
        storing it; `dead`: blocks of `scope` that do not run."""
        key = (node, strict, dead)
        if key not in self._reached:
            self._reached[key] = frozenset(forward_flow.result_reaches(
                scope.node, node, self._trains, self._opaque_strict if strict else self._opaque, dead, self._kept,
                self.drops_graph, self.returned_elements(node),
            ))
        reached = set(self._reached[key])
        if forward_flow.RETURNED not in reached or not follow_callers or isinstance(scope.node, cst.Module):
            return reached
        reached = reached - {forward_flow.RETURNED}
        if scope.name in ("forward", "__call__"):
            return reached | {forward_flow.BACKWARD}  # called as `module(x)`: its callers are everywhere
        sites = self.call_sites(scope)
        if not sites or depth >= 2:
            return reached | {forward_flow.BACKWARD}  # who uses it is unknown
        for facts, caller, call in sites:
            if call.covered or facts.is_grad_free(caller):
                continue
            reached |= facts.result_reaches(caller, call.node, True, depth + 1)
        return reached

    def drops_graph(self, call: cst.Call) -> bool:
        """`call` builds a value with no graph whatever it is given (`graph_free`): `torch.tensor(x)`, NumPy,
        a distribution's `sample()`."""
        return graph_free.drops_graph(self.context, call)

    def returned_elements(self, node: cst.CSTNode) -> forward_flow.Elements:
        """Which elements of the tuple the forward pass `node` returns carry its graph, read in the method it runs
        (`action, log_prob, value = policy.act(s)`: the sampled action carries none); None when unknown."""
        if not isinstance(node, cst.Call):
            return None
        return self._elements.ask(node, lambda _: self._returned_elements(node))

    def _returned_elements(self, node: cst.Call) -> forward_flow.Elements:
        found = network_methods.method_scope(self, node)
        if found is None:
            return None
        owner, scope = found
        seeds = [
            c.node for c in scope.calls
            if not c.covered and (c.callee in ("self", "self.forward") or owner.is_network_call(c))
        ]
        assert isinstance(scope.node, cst.FunctionDef)
        return forward_flow.returned_elements(scope.node, seeds, owner.drops_graph) if seeds else None

    def _kept(self, target: cst.Attribute) -> bool:
        """What is stored at `target` may be trained on: some read of that attribute carries it on (`stored_reads`)."""
        return self._stores.ask(target.attr.value, lambda name: stored_reads.may_be_trained_on(self, name))

    def helper_feeds_backward(self, helper: ScopeFacts) -> bool:
        """Some caller of `helper` (a function that returns a forward's result) backpropagates through it, or
        may (hands it to code we cannot see, stores it)."""
        return any(
            self.result_reaches(helper, inner.node)
            for inner in helper.calls
            if not inner.covered and self.is_network_call(inner)
        )

    def detached_result(self, call: cst.Call, later: bool = True) -> Optional[cst.Call]:
        """The `.detach()` call applied to the result of `call` through attribute/subscript/method chains, or
        (`later`) to the name it is assigned to, in every read of the statements after it."""
        current: cst.CSTNode = call
        for _ in range(8):
            parent = self.parents.get(current)
            if isinstance(parent, cst.Attribute) and parent.value is current:
                grand = self.parents.get(parent)
                if isinstance(grand, cst.Call) and grand.func is parent:
                    if parent.attr.value == "detach":
                        return grand
                    if parent.attr.value in ("backward", "requires_grad_", "register_hook", "retain_grad"):
                        return None
                    current = grand
                    continue
                current = parent
                continue
            if isinstance(parent, cst.Subscript) and parent.value is current:
                current = parent
                continue
            if later and isinstance(parent, cst.Assign) and parent.value is current:
                return self._detached_later(parent)
            return None
        return None

    def _detached_later(self, assign: cst.Assign) -> Optional[cst.Call]:
        """`y = net(x)` whose name the statements after it in the block read only through `.detach()` (`y =
        y.detach()` on the next line, `loss(out, y.detach())`) until `y` is bound again: the `.detach()` call."""
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return None
        name = assign.targets[0].target.value
        line = self.parents.get(assign)
        block = self.parents.get(line) if line is not None else None
        statements = list(getattr(block, "body", ()))
        if line not in statements:
            return None
        found = None
        for statement in statements[statements.index(line) + 1 :]:
            for node in descendants(statement):
                if isinstance(node, cst.Name) and node.value == name and not self._bound_here(node):
                    attribute = self.parents.get(node)
                    call = self.parents.get(attribute) if isinstance(attribute, cst.Attribute) else None
                    if not (isinstance(call, cst.Call) and call.func is attribute and attribute.attr.value == "detach"):
                        return None  # read another way: the graph may be wanted
                    found = found or call
            if any(isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Name) and n.target.value == name
                   for n in descendants(statement)):
                break  # bound again: later reads are of another value
        return found

    def _bound_here(self, name: cst.Name) -> bool:
        parent = self.parents.get(name)
        return isinstance(parent, cst.AssignTarget) and parent.target is name

    def _sink(self, call: cst.Call) -> bool:
        """A call that only shows, logs or saves what it is given: a library's function or a logger's method."""
        name = self.context.qualname(call.func) or ""
        if name.split(".", 1)[0] in _LIBRARY_ROOTS or name in ("print", "builtins.print"):
            return True
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        return method in host_sinks.LOGS

    def _opaque(self, call: cst.Call) -> bool:
        """A call statement that may train on what it is given where we cannot see: anything but a library's
        function, a logger's or a plot's, a metric's recording method (`metric.update(out, y)`) or a function
        of this file that we can see does not train."""
        if self._sink(call):
            return False
        function = self.local_function(call)
        if function is not None and function in self.by_node:
            return self._may_train(self.by_node[function])
        func = call.func
        if isinstance(func, cst.Attribute) and network_methods.takes_to_host(self, call):
            return False  # `stats.append_torch(features)`: a method of the project that keeps host copies only
        if isinstance(func, cst.Attribute) and self._keeps_untrained(call):
            return False  # `memory.push(s, a, log_prob)`: kept in lists the update reads back detached
        return not (isinstance(func, cst.Attribute) and func.attr.value in _RECORDING_METHODS)

    def _keeps_untrained(self, call: cst.Call) -> bool:
        """`call` runs a method of the project (read in the receiver's class) that trains nothing and sends what it
        is given nowhere a backward pass may reach: into attributes whose every read drops the graph
        (`stored_reads`), host values, logs."""
        found = network_methods.method_scope(self, call)
        if found is None or not isinstance(found[1].node, cst.FunctionDef):
            return False
        owner, scope = found
        return owner._given_stays(scope)

    def _given_stays(self, scope: ScopeFacts) -> bool:
        function = scope.node
        assert isinstance(function, cst.FunctionDef)
        if scope.training or not scope.is_method:
            return False
        names = {p.name.value for p in (*function.params.params, *function.params.kwonly_params)} - {"self"}
        return not self._given.ask(function, lambda _: frozenset(forward_flow.given_reaches(
            function, names, self._trains, self._opaque, self._kept, self.drops_graph
        )))

    def _may_train(self, scope: ScopeFacts, depth: int = 0) -> bool:
        """The function of this file trains, or hands what it is given to code that may (any depth we can
        follow; deeper than that, it may)."""
        if scope.training:
            return True
        if depth >= 2:
            return any(c.node.args for c in scope.calls)
        for inner in scope.calls:
            if not inner.node.args or self._sink(inner.node):
                continue
            function = self.local_function(inner.node)
            if function is not None and function in self.by_node:
                if self.by_node[function] is not scope and self._may_train(self.by_node[function], depth + 1):
                    return True
                continue
            func = inner.node.func
            if isinstance(func, cst.Name) or (
                isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
            ):
                return True
        return False

    def _opaque_strict(self, call: cst.Call) -> bool:
        """Strict: any call of code that is not a library's, a logger's or a plot's may train on what it is given."""
        if self._sink(call):
            return False
        if isinstance(call.func, cst.Attribute) and network_methods.takes_to_host(self, call):
            return False
        if isinstance(call.func, cst.Attribute) and self._keeps_untrained(call):
            return False
        function = self.local_function(call)
        if function is not None and function in self.by_node:
            return self._may_train(self.by_node[function])
        return True

    def values_plotted(self, scope: ScopeFacts, node: cst.Call) -> bool:
        """What the forward pass `node` computes ends in a figure or an image file (it draws a picture)."""
        return forward_flow.values_plotted(scope.node, node)

    def training_orders(self, scope: ScopeFacts) -> list[int]:
        """Where `scope` trains: its own training signs and its calls of functions of this file that train
        (`train_one_epoch(...)`, an attack that asks for input gradients)."""
        return self._training_orders.ask(scope.node, lambda _: self._training_orders_of(scope))

    def _training_orders_of(self, scope: ScopeFacts) -> list[int]:
        through = [call.order for call in scope.calls if self._call_trains(call, scope)]
        return sorted((*scope.training, *through))

    def calls_a_training_step(self, scope: ScopeFacts) -> bool:
        """`scope` calls a function of this file or a method of a project class that runs a backward pass or an
        optimizer step (`self.train_model()`, `update(batch)`, `agent.update()`); one that only takes gradients
        of its own tensors (an attack, a sampler: `torch.autograd.grad`) does not count."""
        return any(self._call_trains(call, scope, gradients=False) for call in scope.calls)

    def _call_trains(self, call: CallFact, scope: ScopeFacts, gradients: bool = True) -> bool:
        """`call` runs a function of this file that trains (`_steps`) or a method of a project class that steps
        its optimizer (`agent.update()`, `ppo.learn(memory)`)."""
        function = self.local_function(call.node)
        inner = self.by_node.get(function) if function is not None else None
        if inner is not None:
            return inner is not scope and self._steps(inner, 0, gradients)
        return function is None and self._object_trains(call.node, scope)

    def _object_trains(self, call: cst.Call, scope: ScopeFacts) -> bool:
        """`call` runs a method of another object, read in its class (of this file or a project module), that
        runs a backward pass or an optimizer step."""
        func = call.func
        if not isinstance(func, cst.Attribute) or (isinstance(func.value, cst.Name) and func.value.value == "self"):
            return False
        found = network_methods.method_scope(self, call)
        return found is not None and found[1] is not scope and found[0]._steps(found[1], 0, gradients=False)

    def _steps(self, scope: ScopeFacts, depth: int, gradients: bool = True) -> bool:
        """The function runs a backward pass, an optimizer step or (`gradients`) `torch.autograd.grad`, itself or
        through the functions of this file it calls (not a mere `requires_grad` flag on the tensors it builds)."""
        for call in scope.calls:
            if step_kind(self.context, call.node) in ("backward", "optimizer"):
                return True
            if gradients and call.order in scope.training and call.callee and call.callee.rsplit(".", 1)[-1] in _GRADIENT_CALLS:
                return True
            if depth < 2:
                function = self.local_function(call.node)
                inner = self.by_node.get(function) if function is not None else None
                if inner is not None and inner is not scope and self._steps(inner, depth + 1, gradients):
                    return True
        return False

    def runs_training(self, call: cst.Call) -> bool:
        """`call` runs a function of this file that trains (a backward pass or an optimizer step)."""
        return self._trains(call)

    def _trains(self, call: cst.Call) -> bool:
        """`call` runs a function of this file that trains (a backward pass or an optimizer step)."""
        function = self.local_function(call)
        scope = self.by_node.get(function) if function is not None else None
        return scope is not None and bool(scope.training)

    def call_sites(self, scope: ScopeFacts) -> list[tuple["FileFacts", ScopeFacts, CallFact]]:
        """Where the function `scope` is called: in this file (by name) and in the project's files that import
        this one. Empty for the module's top level."""
        if isinstance(scope.node, cst.Module):
            return []
        if scope.node in self._sites:
            return self._sites[scope.node]
        method = scope.cls is not None  # called as `x.name(...)`; a function as `name(...)`
        found: list[tuple[FileFacts, ScopeFacts, CallFact]] = [
            (self, s, c)
            for s, c in self.callers(scope.name)
            if isinstance(c.node.func, cst.Attribute) == method
        ]
        self._sites[scope.node] = found  # (before the instance calls: their receivers may lead back here)
        if scope.name == "__call__" and scope.cls is not None:
            found.extend(self._instance_calls(scope.cls))
        for site in _project_call_sites(self.context, scope):
            facts = site.summary.model.grad
            located = facts.call_fact(site.call)
            if located is not None:
                found.append((facts, located[0], located[1]))
        return found

    def _instance_calls(self, cls: cst.ClassDef) -> list[tuple["FileFacts", ScopeFacts, CallFact]]:
        """Calls in this file of objects of `cls` (`predictor(img)`), which run its `__call__`."""
        name = cls.name.value
        if self.context.source.text.count(name) < 2:
            return []  # never built here
        found = []
        for scope in self.scopes:
            for call in scope.calls:
                func = call.node.func
                if not isinstance(func, cst.Name) or func.value == name or func.value in self.function_names:
                    continue
                if any(c is cls for _, c in network_methods.receiver_classes(self, func)):
                    found.append((self, scope, call))
        return found

    def passed_as_value(self, scope: ScopeFacts) -> bool:
        """The function's name is used other than by calling it (a callback, `map(f, xs)`, `target=f`)."""
        if self._values is None:
            self._values = set()
            for node in descendants(self.context.module):
                if isinstance(node, (cst.Call, cst.FunctionDef, cst.ClassDef)):
                    continue
                if isinstance(node, (cst.Arg, cst.Assign, cst.Return, cst.Element, cst.DictElement)):
                    value = node.value
                    if isinstance(value, cst.Name):
                        self._values.add(value.value)
                    elif isinstance(value, cst.Attribute):
                        self._values.add(value.attr.value)
        return scope.name in self._values

    def runs_once(self, scope: ScopeFacts, call: Optional[CallFact] = None, depth: int = 0) -> bool:
        """`call` (or the function `scope` when no call is given) runs once in a run of the program: the call
        is in no loop of its function, and the function is the module's top level (a script, a notebook, a
        `__main__` block) or is called, in this file or in the files that import it, only from code that runs
        once itself. A function nobody is seen calling, or one handed around as a value, may run any number
        of times. A loop that builds the network afresh on every trip repeats whole runs (seeds, folds, trials:
        `for _ in range(50): clf = LogReg(...); <train it>; clf(test_x)`): a forward pass once per trip of it
        runs once per run."""
        if call is not None and call.loops:
            network = self.network_of(call) if depth == 0 else None
            if network is None or not all(self._rebuilds(loop, network) for loop in call.loops):
                return False
        if isinstance(scope.node, cst.Module):
            return True
        if depth >= 4 or scope.yields or self.passed_as_value(scope) or _framework_decorated(scope):
            return False
        sites = self.call_sites(scope)
        return bool(sites) and all(facts.runs_once(caller, site, depth + 1) for facts, caller, site in sites)

    def _rebuilds(self, loop: cst.CSTNode, network: str) -> bool:
        """The body of `loop` assigns `network` a newly built module (`clf = LogReg(64, 2)`, `net = Net().cuda()`)."""
        body = getattr(loop, "body", None)
        if body is None:
            return False
        for node in descendants(body):
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and self.context.code(node.targets[0].target) == network:
                value = node.value
                while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in MODE_CHAIN:
                    value = value.func.value
                if isinstance(value, cst.Call) and (
                    objects(self.context).kind(value) == MODULE or (dotted(value.func) or "").rsplit(".", 1)[-1][:1].isupper()
                ):
                    return True
        return False

    def called_in_loop(self, scope: ScopeFacts, depth: int = 0) -> bool:
        """Some caller of the function (in any file) calls it inside a loop, on every trip (not behind a
        logging interval), itself or through callers of its own (`step` loops over `pick_action`, which
        calls `actor_pick_action`)."""
        for facts, caller, site in self.call_sites(scope):
            if site.loops:
                if not gated(facts.context, site.node, site.loops[-1]):
                    return True
            elif depth < 2 and caller is not scope and facts.called_in_loop(caller, depth + 1):
                return True
        return False

    def callers_grad_off(self, scope: ScopeFacts, depth: int = 0) -> bool:
        """Every call of the function, in this file and in the files that import it, runs with autograd off
        (under no-grad, or in a function whose own callers all turn it off)."""
        if depth >= 3 or isinstance(scope.node, cst.Module):
            return False
        sites = self.call_sites(scope)
        return bool(sites) and all(
            site.covered or facts.is_grad_free(caller) or facts.callers_grad_off(caller, depth + 1)
            for facts, caller, site in sites
        )

    def callers(self, name: str) -> list[tuple[ScopeFacts, CallFact]]:
        found = []
        for scope in self.scopes:
            for call in scope.calls:
                if call.callee and call.callee.rsplit(".", 1)[-1] == name and call.node.func is not None:
                    if isinstance(scope.node, cst.FunctionDef) and scope.node.name.value == name:
                        continue  # recursion
                    found.append((scope, call))
        return found

    def is_grad_free(self, scope: ScopeFacts) -> bool:
        """Autograd is off for the whole function: decorated, or called under no_grad somewhere in the file."""
        return scope.decorated_grad_off is not None or scope.name in self.covered_names

    def framework_hook(self, scope: ScopeFacts) -> bool:
        """A method the framework calls with grad off / in eval mode already (Lightning, MMEngine, ...)."""
        if not scope.is_method:
            return False
        name = scope.name
        if name == "__call__":  # a network's, run as `net(x)` anywhere; a wrapper object's is its entry point
            return scope.cls is None or network_methods.is_network_class(self, scope.cls)
        return name.endswith(_HOOK_SUFFIXES) or name.startswith("on_") or name == "forward"

    def is_test_case(self, scope: ScopeFacts) -> bool:
        if self.is_test_file:
            return True
        if scope.name.startswith("test") and self.imports_test_framework:
            return True
        cls = scope.cls
        if cls is not None and self.imports_test_framework and any(
            "TestCase" in (dotted(b.value) or "") for b in cls.bases
        ):
            return True
        return False

    def is_module_class(self, cls: Optional[cst.ClassDef]) -> bool:
        return objects(self.context).is_module_class(cls)

    def mode_evals(self, scope: ScopeFacts) -> list[tuple[cst.Call, str, int]]:
        """The `.eval()` / `.train(False)` calls of `scope` that put a module in eval mode for the code that
        follows: a statement (`model.eval()`, `model.cuda().eval()`) or a chain assigned back to the module's
        name (`model = model.eval().to(device)`), with the module's name. Not `.eval()` inside the argument of
        another call (`f = torch.jit.freeze(f.eval())`): the name then holds a different object."""
        found = []
        for call_node, target, order in scope.evals:
            current: cst.CSTNode = call_node
            while True:
                parent = self.parents.get(current)
                if isinstance(parent, cst.Attribute) and parent.value is current and parent.attr.value in MODE_CHAIN:
                    outer = self.parents.get(parent)
                    if isinstance(outer, cst.Call) and outer.func is parent:
                        current = outer
                        continue
                break
            parent = self.parents.get(current)
            module = strip_mode_calls(target)
            if isinstance(parent, cst.Expr) and parent.value is current:
                found.append((call_node, module, order))
            elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is current:
                targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
                if all(self.context.code(t) == module for t in targets):
                    found.append((call_node, module, order))
        return found

    def inference_segments(self, scope: ScopeFacts) -> Iterator[tuple[cst.Call, str, int, int]]:
        """(eval call, module, start, stop): stretches of `scope` from a module's `.eval()` to its next
        `.train()` (or the end) with no training, no grad switch and no mode set from a variable inside."""
        for call_node, target, order in self.mode_evals(scope):
            trains = [o for _, t, o in scope.trains if t == target and o > order]
            stop = min(trains) if trains else scope.end + 1
            if any(order < o < stop for o in self.training_orders(scope)) or any(order < o < stop for o in scope.grad_off):
                continue
            if any(order < o < stop for _, _, o in scope.mode_unknown):
                continue
            yield call_node, target, order, stop

    def forward_calls(self, scope: ScopeFacts, target: str) -> Iterator[CallFact]:
        """Calls `target(...)`, `target.forward(...)`, `target.forward_features(...)` and methods of
        `target` that run it (`target.get_action(...)`) in `scope`."""
        for call in scope.calls:
            callee = call.callee
            if callee is None:
                continue
            if callee == target:
                yield call
            elif callee.startswith(target + "."):
                rest = callee[len(target) + 1:]
                if _FORWARD_METHODS.match(rest) or ("." not in rest and self.method_network(call)):
                    yield call

    def eval_forwards(self, scope: ScopeFacts) -> list[tuple[CallFact, str]]:
        """Forward calls of a module after its `.eval()` in the same function (not re-enabled by `.train()`)."""
        found = []
        for call_node, target, order in self.mode_evals(scope):
            trains = [o for _, t, o in scope.trains if t == target and o > order]
            stop = min(trains) if trains else scope.end + 1
            for call in self.forward_calls(scope, target):
                if order < call.order < stop and not call.covered:
                    found.append((call, target))
        return found

    def stepped_before(self, scope: ScopeFacts, order: int) -> bool:
        """A backward pass or an optimizer step runs before `order` in the function, itself or in a method of
        another object it calls that we can read (`agent.update()`)."""
        through = set(self.training_orders(scope)) - set(scope.training)
        for call in scope.calls:
            if call.order >= order:
                break
            if step_kind(self.context, call.node) is not None:
                return True
            if call.order in through and self.local_function(call.node) is None:
                return True  # `agent.update()`: a method of another object that steps its optimizer
        return False

    def statement_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        current: Optional[cst.CSTNode] = node
        while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            current = self.parents.get(current)
        return current

    def top_statement_in(self, node: cst.CSTNode, block: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The statement directly in `block` (an IndentedBlock or the Module) that contains `node`."""
        current = node
        while current is not None:
            parent = self.parents.get(current)
            if parent is block:
                return current
            current = parent
        return None

    def block_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The IndentedBlock or Module whose statement list holds the statement around `node`."""
        current = node
        while current is not None:
            parent = self.parents.get(current)
            if isinstance(parent, (cst.IndentedBlock, cst.Module)) and isinstance(
                current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
            ):
                return parent
            current = parent
        return None

    def indent_of(self, node: cst.CSTNode) -> str:
        """The indentation of the statement `node` (its enclosing blocks' indents)."""
        default = self.context.module.default_indent
        parts = []
        current = self.parents.get(node)
        while current is not None:
            if isinstance(current, cst.IndentedBlock):
                parts.append(current.indent if current.indent is not None else default)
            current = self.parents.get(current)
        return "".join(reversed(parts))


# Methods that return the module itself (`model.eval().to(device)`).
MODE_CHAIN = frozenset({"eval", "train", "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "requires_grad_"})


def runs_at_most_once(loop: cst.CSTNode) -> bool:
    """The loop's body ends in an unconditional `break`/`return`/`raise` and never `continue`s: it runs at most
    once (`for x, y in loader: out = model(x); print(out.shape); break`, a one-batch check), so it repeats
    nothing."""
    body = getattr(loop, "body", None)
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return False
    last = body.body[-1]
    if not isinstance(last, cst.SimpleStatementLine) or not isinstance(last.body[-1], (cst.Break, cst.Return, cst.Raise)):
        return False
    return not any(isinstance(node, cst.Continue) for node in descendants(body))


def strip_mode_calls(text: str) -> str:
    """`model.eval().to(device)` -> `model` (calls that return the module itself)."""
    while True:
        new = re.sub(r"\.(eval|train|to|cuda|cpu|float|half|requires_grad_)\([^()]*\)$", "", text)
        if new == text:
            return text
        text = new


_LOOP_TYPES = (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_BLOCK_TYPES = (cst.IndentedBlock, cst.SimpleStatementSuite)
_LEFT = frozenset((*_LOOP_TYPES, *_BLOCK_TYPES, cst.With))  # kinds whose end the walk reports


def collect_grad_facts(context: Context) -> FileFacts:
    """Walk the file once, in source order, and record what every scope does about autograd."""
    facts = FileFacts(context)
    parents = context.parents
    stack: list[tuple[cst.CSTNode, bool]] = [(context.module, False)]
    pop, push = stack.pop, stack.append
    while stack:
        node, leaving = pop()
        kind = type(node)
        if leaving:  # only the kinds in _LEFT are pushed a second time
            if kind in _BLOCK_TYPES:
                owner = type(parents.get(node))
                if owner is cst.FunctionDef:
                    facts.leave_body()
                elif owner is cst.ClassDef:
                    facts.leave_class_body()
            elif kind is cst.With:
                facts.leave_with(node)  # type: ignore[arg-type]
            else:
                facts.leave_loop(node)
            continue
        if kind is cst.Call:
            facts.enter_call(node)  # type: ignore[arg-type]
        elif kind is cst.Attribute:
            facts.enter_attribute(node)  # type: ignore[arg-type]
        elif kind in _LEFT:
            if kind in _BLOCK_TYPES:
                owner = type(parents.get(node))
                if owner is cst.FunctionDef:
                    facts.enter_body(parents[node])  # type: ignore[arg-type]
                elif owner is cst.ClassDef:
                    facts.enter_class_body(parents[node])  # type: ignore[arg-type]
            elif kind is cst.With:
                facts.enter_with(node)  # type: ignore[arg-type]
            else:
                facts.enter_loop(node)
            push((node, True))
        elif kind is cst.ClassDef:
            facts.enter_class(node)  # type: ignore[arg-type]
        elif kind is cst.Yield:
            facts.enter_yield(node)
        for child in reversed(semantic_children(node)):
            parents[child] = node
            push((child, False))
    facts.finish()
    return facts


def _self_attribute(expr: cst.BaseExpression) -> bool:
    """`self.<attr>`: an object the enclosing class holds."""
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _plain_object(facts: FileFacts, receiver: cst.BaseExpression) -> bool:
    """`receiver` is built from classes that are found and are no networks (`predictor = Predictor(path)`): its
    `forward_batch(x)` is a method like any other, read to see whether it runs a network."""
    classes = network_methods.receiver_classes(facts, receiver)
    return bool(classes) and not any(network_methods.is_network_class(owner, cls) for owner, cls in classes)


def _framework_decorated(scope: ScopeFacts) -> bool:
    """Decorated by something other than the method kinds: a framework (a route, a command, a task) may call it."""
    node = scope.node
    if not isinstance(node, cst.FunctionDef):
        return False
    return any(
        not (isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod", "property"))
        for d in node.decorators
    )


def _project_call_sites(context: Context, scope: ScopeFacts) -> list:
    """Calls of the function `scope` in the project's files that import this one."""
    from torchlint.semantic import project

    path = context.source.path
    if scope.cls is not None and _FORWARD_METHODS.match(scope.name):
        return []  # a network's forward runs wherever the network runs: its callers are everywhere, by any name
    if scope.cls is not None:
        found = list(project.method_call_sites(path, scope.name))
        if not found:  # an override: the calls of the method it overrides, on objects of the base class
            for base in scope.cls.bases:
                origin = project.imported(context, base.value)
                if origin is not None:
                    found.extend(project.method_call_sites(origin[0].path, scope.name))
        return found
    if scope.parent is not None and isinstance(scope.parent.node, cst.Module):
        return list(project.call_sites(path, scope.name))
    return []
