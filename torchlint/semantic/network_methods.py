"""Network methods: a network run through a method of its class other than `forward`.

RL agents, samplers and decoders put the forward pass in a method of their own: `q_network.get_action(obs)`,
`self.policy.sample(state)`, `decoder.decode_step(emb, (h, c))`, `model.predict(users, items)`. Such a call
runs the network when the receiver's class (a class of this file, or of a project module it imports) defines
the method, through its bases in the same file, and the method runs the module itself (`self(x)`,
`self.forward(x)`, a sub-module `self.net(x)`, or another such method) outside no-grad and trains nothing.
When the class cannot be found (a parameter, a class of a library), the receiver must be a network and the
method must be named for inference (`predict`, `sample`, `act`, `get_action`, `decode_step`); methods of
`nn.Module` itself (`load_state_dict`, `to`, `apply`, ...) and library methods that turn grad off inside
(`generate`) never count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import libcst as cst

from torchlint.lint.walk import descendants
from torchlint.semantic import call_arguments, project
from torchlint.semantic.functions import method_named, returns_of
from torchlint.semantic.modules import words
from torchlint.semantic.objects import MODULE, objects

if TYPE_CHECKING:
    from torchlint.lint.context import Context
    from torchlint.semantic.grad_mode import CallFact, FileFacts, ScopeFacts

# Words of a method name that say it runs the network for an answer (when its definition cannot be read); not
# `encode`, which libraries (sentence embedders) also use for methods that turn grad off inside.
_INFERENCE_WORDS = frozenset(
    {"predict", "act", "action", "actions", "sample", "infer", "inference", "decode", "detect",
     "classify", "caption", "translate", "greedy", "beam"}
)
# Methods that return the object they are called on (`QNetwork(env).to(device)`).
_SAME_OBJECT = frozenset({"to", "cuda", "cpu", "eval", "train", "float", "half", "double", "bfloat16"})
_MAX_DEPTH = 2  # a method calling a method calling the network


def runs_network(
    facts: "FileFacts", call: "CallFact", is_network: Callable[[str, cst.BaseExpression], bool]
) -> Optional[bool]:
    """Whether `call`, `<receiver>.<method>(...)` with arguments, runs the receiver's forward pass (None when
    it is not such a call). The method's definition decides when it is found; else the receiver must be a
    network (`is_network(text, expr)`, not built by a library) and the method named for inference."""
    func = call.node.func
    if not isinstance(func, cst.Attribute) or not call.node.args:
        return None
    name = func.attr.value
    found = None
    for owner, cls in receiver_classes(facts, func.value):
        method = method_of(owner, cls, name)
        if method is None:
            continue
        scope = owner.by_node.get(method)
        if scope is not None and _runs_itself(owner, scope, 0):
            return True
        found = False
    if found is not None:
        return found
    if _built_by_library(facts.context, func.value):
        return False  # `YOLO("yolov8n.pt").predict(...)`: the library decides about grad inside
    receiver = facts.context.code(func.value)
    return inference_named(name) and is_network(receiver, func.value)


def method_scope(facts: "FileFacts", call: cst.Call) -> Optional[tuple["FileFacts", "ScopeFacts"]]:
    """The method `call` runs (`receiver.method(...)` read in the receiver's class, or a function of this file),
    with the grad facts of its file; None when it cannot be found or more than one may run."""
    func = call.func
    function = facts.local_function(call)
    if function is not None:
        scope = facts.by_node.get(function)
        return (facts, scope) if scope is not None else None
    if not isinstance(func, cst.Attribute):
        return None
    found = []
    for owner, cls in receiver_classes(facts, func.value):
        method = method_of(owner, cls, func.attr.value)
        scope = owner.by_node.get(method) if method is not None else None
        if scope is not None and (owner, scope) not in found:
            found.append((owner, scope))
    return found[0] if len(found) == 1 else None


def judged_where_defined(facts: "FileFacts", call: "CallFact") -> bool:
    """`call` runs a method that hands back no graph (an agent's `select_action`, a network's
    `encode_features` that returns NumPy arrays): the method is judged at its own `def`, not again at every
    call."""
    func = call.node.func
    if not isinstance(func, cst.Attribute):
        return False
    for owner, cls in receiver_classes(facts, func.value):
        method = method_of(owner, cls, func.attr.value)
        scope = owner.by_node.get(method) if method is not None else None
        if scope is None:
            continue
        inner = [c for c in scope.calls if not c.covered and owner.is_network_call(c)]
        if inner and not any("returned" in owner.result_reaches(scope, c.node, follow_callers=False) for c in inner):
            return True  # (a method that runs `self(x)` or `self.forward(x)` is judged where it is called)
    return False


def takes_to_host(facts: "FileFacts", call: cst.Call) -> bool:
    """`call` is `receiver.method(value, ...)` whose method, read in the receiver's class (of this file or a
    project module), trains nothing, copies what it is given to the host (`.cpu()`, `.numpy()`, `.item()`) and
    never keeps a parameter as it came on the object (`self.items.append(x)`, where a graph would live on):
    a statistics accumulator, a metric written by the project."""
    func = call.func
    if not isinstance(func, cst.Attribute) or not call.args:
        return False
    if isinstance(func.value, cst.Name) and any(b.kind == "param" for b in facts.context.lookup(func.value) or ()):
        return False  # a parameter: what its callers pass is not followed here (it costs more than it finds)
    found = False
    for owner, cls in receiver_classes(facts, func.value):
        method = method_of(owner, cls, func.attr.value)
        scope = owner.by_node.get(method) if method is not None else None
        if scope is None or owner.training_orders(scope) or not scope.host or _keeps_parameter(method):
            return False
        found = True
    return found


def _keeps_parameter(method: cst.FunctionDef) -> bool:
    """The method stores one of its parameters, as it came, on an object (`self.x = x`, `self.xs.append(x)`)."""
    params = {p.name.value for p in (*method.params.params, *method.params.kwonly_params)} - {"self"}
    for node in descendants(method.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value in params:
            if any(isinstance(t.target, (cst.Attribute, cst.Subscript)) for t in node.targets):
                return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            receiver = node.func.value
            on_object = isinstance(receiver, cst.Attribute) or (isinstance(receiver, cst.Name) and receiver.value == "self")
            if on_object and any(isinstance(a.value, cst.Name) and a.value.value in params for a in node.args):
                return True
    return False


def is_network_class(facts: "FileFacts", cls: cst.ClassDef) -> bool:
    """`cls` is a network: an `nn.Module` subclass by its bases, or a class that defines `forward`."""
    if objects(facts.context).class_kind(cls) == MODULE:
        return True
    return method_named(cls, "forward") is not None


def inference_named(method: str) -> bool:
    """`get_action`, `predict`, `decode_step`, `sample`: a method name that says it runs a network."""
    return any(w in _INFERENCE_WORDS for w in words(method))


def receiver_classes(
    facts: "FileFacts", expr: cst.BaseExpression, depth: int = 0
) -> list[tuple["FileFacts", cst.ClassDef]]:
    """The classes (with the grad facts of the file that defines each) `expr` is built from: a name or a
    `self.<attr>` assigned `Cls(...)` (through `.to(device)`-style chains and `.module` of a data-parallel
    wrapper), a class of this file or one imported from a project module; a value returned by a helper of the
    project (`model = create_model(opt)`), a deep copy of such an object, or a parameter whose callers pass one
    (or whose default is a class: `actor_critic=core.MLPActorCritic`)."""
    # Asked for the receiver of most method calls by several rules: remembered per file, node and depth.
    memo = facts.receivers
    key = (expr, depth)
    if key not in memo:
        memo[key] = _receiver_classes(facts, expr, depth)
    return memo[key]


def _receiver_classes(facts: "FileFacts", expr: cst.BaseExpression, depth: int) -> list[tuple["FileFacts", cst.ClassDef]]:
    context = facts.context
    while isinstance(expr, cst.Attribute) and expr.attr.value == "module":
        expr = expr.value  # `model.module.encode(x)`: the network inside `nn.DataParallel(model)`
    values: list[tuple["FileFacts", cst.BaseExpression]] = []
    passed: list[tuple["FileFacts", cst.BaseExpression]] = []
    if isinstance(expr, cst.Name):
        for binding in context.lookup(expr) or ():
            if binding.kind == "assign" and binding.value is not None:
                values.append((facts, binding.value))
            elif binding.kind == "param" and isinstance(binding.node, cst.Param):
                if binding.node.annotation is not None:
                    annotation = binding.node.annotation.annotation  # `decoder: Decoder`: as if built by `Decoder()`
                    if isinstance(annotation, cst.Name):
                        values.append((facts, cst.Call(func=annotation)))
                elif depth == 0:  # one hop into the callers: deeper chains cost more than they find
                    from torchlint.semantic.model import semantic_model

                    for there, argument in call_arguments.passed_for(context, binding.node):
                        passed.append((semantic_model(there).grad, argument))
    elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        cls = context.enclosing(expr, cst.ClassDef)
        if cls is not None:
            values = [(facts, v) for v in objects(context).self_assignments(cls).get(expr.attr.value, ())]  # type: ignore[misc]
    elif isinstance(expr, cst.Attribute) and depth < _MAX_DEPTH:  # `ppo.memory`: what the holder's class assigns
        for owner, cls in receiver_classes(facts, expr.value, depth + 1):
            values += [(owner, v) for v in objects(owner.context).self_assignments(cls).get(expr.attr.value, ())]
    found: list[tuple["FileFacts", cst.ClassDef]] = []
    for owner, argument in passed:  # an argument a caller passes: resolved where it is written
        found.extend(c for c in receiver_classes(owner, argument, depth + 1) if c not in found)
    for where, value in values:  # (each value resolved in the file that writes it)
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _SAME_OBJECT:
            value = value.func.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
            found.extend(c for c in _built_by(where, value.func, depth) if c not in found)
        elif isinstance(value, cst.Call) and value.args and where.context.qualname(value.func) == "copy.deepcopy" and depth < _MAX_DEPTH:
            # `self.target = copy.deepcopy(self.online)`: an instance of the copied network's class
            found.extend(c for c in receiver_classes(where, value.args[0].value, depth + 1) if c not in found)
    return found


def _built_by(facts: "FileFacts", func: cst.Name, depth: int) -> list[tuple["FileFacts", cst.ClassDef]]:
    """The classes a call of `func` builds: the class itself, or what a project helper of that name returns."""
    context = facts.context
    local = objects(context).classes().get(func.value)
    if local is not None:
        return [(facts, local)]
    default = _class_default(context, func)
    if default is not None:  # `def ddpg(env_fn, actor_critic=core.MLPActorCritic)`, then `ac = actor_critic(...)`
        return _class_named(facts, default, depth)
    definition: Optional[cst.CSTNode] = None
    owner = facts
    origin = project.imported(context, func, (func.value,))
    if origin is not None:
        definition, owner = origin[0].definition(origin[1]), origin[0].model.grad
    else:
        bindings = context.lookup(func) or ()
        if len(bindings) == 1 and isinstance(bindings[0].node, cst.FunctionDef):
            definition = bindings[0].node
    if isinstance(definition, cst.ClassDef):
        return [(owner, definition)]
    if isinstance(definition, cst.FunctionDef) and depth < _MAX_DEPTH:
        found: list[tuple["FileFacts", cst.ClassDef]] = []
        for returned in returns_of(definition):
            if returned.value is not None:
                found.extend(c for c in receiver_classes(owner, returned.value, depth + 1) if c not in found)
        return found
    return []


def _class_default(context: "Context", func: cst.Name) -> Optional[cst.BaseExpression]:
    """The default of the parameter `func` names, when it is a class written by name (`actor_critic=core.MLPActorCritic`)."""
    bindings = context.lookup(func) or ()
    if len(bindings) != 1 or bindings[0].kind != "param" or not isinstance(bindings[0].node, cst.Param):
        return None
    default = bindings[0].node.default
    return default if isinstance(default, (cst.Name, cst.Attribute)) else None


def _class_named(facts: "FileFacts", expr: cst.BaseExpression, depth: int) -> list[tuple["FileFacts", cst.ClassDef]]:
    """The class `expr` names: a class or helper of this file, or one of a project module (`core.MLPActorCritic`)."""
    if isinstance(expr, cst.Name):
        return _built_by(facts, expr, depth + 1) if depth < _MAX_DEPTH else []
    origin = project.imported(facts.context, expr)
    definition = origin[0].definition(origin[1]) if origin is not None else None
    return [(origin[0].model.grad, definition)] if origin is not None and isinstance(definition, cst.ClassDef) else []


def _built_by_library(context: "Context", expr: cst.BaseExpression) -> bool:
    """`expr` is a name bound to an object a library other than torch builds (`model = YOLO(path)`)."""
    if not isinstance(expr, cst.Name):
        return False
    for binding in context.lookup(expr) or ():
        value = binding.value if binding.kind == "assign" else None
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _SAME_OBJECT:
            value = value.func.value
        if isinstance(value, cst.Call):
            qual = context.qualname(value)
            if qual is not None and not qual.startswith("torch"):
                return True
    return False


def method_of(facts: "FileFacts", cls: cst.ClassDef, name: str, depth: int = 0) -> Optional[cst.FunctionDef]:
    """The method `name` of `cls` or of its bases defined in the same file."""
    method = method_named(cls, name)
    if method is not None or depth >= 3:
        return method
    classes = objects(facts.context).classes()
    for base in cls.bases:
        if isinstance(base.value, cst.Name) and base.value.value in classes:
            found = method_of(facts, classes[base.value.value], name, depth + 1)
            if found is not None:
                return found
    return None


def _runs_itself(facts: "FileFacts", scope: "ScopeFacts", depth: int) -> bool:
    """The method runs its own module (`self(x)`, `self.forward(x)`, a sub-module, another such method)
    outside no-grad and trains nothing."""
    if facts.training_orders(scope) or scope.decorated_grad_off is not None or scope.decorated_other_grad:
        return False  # (it trains itself, or through the methods it calls: `update()` calling `self.a_train(...)`)
    for inner in scope.calls:
        callee = inner.callee
        if inner.covered or not callee or not inner.node.args:
            continue
        if callee in ("self", "self.forward"):
            return True
        if callee.endswith(".forward"):
            callee = callee[: -len(".forward")]  # `self.netG.forward(x)`: the sub-module `self.netG` runs
        if not callee.startswith("self."):
            continue
        if facts.is_network_call(inner):
            return True  # `self.net(x)`, `self.model.classifier(x)`
        if callee.count(".") != 1:
            continue
        method = method_of(facts, scope.cls, callee[5:]) if scope.cls is not None else None
        if method is not None and depth < _MAX_DEPTH and method in facts.by_node and method is not scope.node:
            if _runs_itself(facts, facts.by_node[method], depth + 1):
                return True
    return False
