"""Frozen networks: a network the program never trains, run with autograd on inside a training step.

A captioning model that trains only its decoder (`optimizer = Adam(decoder.parameters())`) still runs the
pretrained encoder with autograd on: `feats = encoder(images)` records the encoder's graph, and the
decoder's `loss.backward()` runs back through the whole CNN to compute weight gradients no optimizer reads.
Running the encoder under `torch.no_grad()` loses nothing when its input is data (a batch from the loader),
since no gradient has to reach that input.

`untrained` says whether the file shows a network is never trained: the file builds an optimizer (it takes
some `.parameters()`), never takes this network's, never switches it to training mode or touches its
`requires_grad`, never hands it to another constructor or container (where it could be a sub-module of a
trained model), and its class, when it can be read, does not freeze its own parameters.
`input_is_data` says whether what a forward pass is given derives from data alone (loop variables over a
loader, their `.to(device)` copies), not from another network's output, whose gradient may be wanted.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.names import dotted
from torchlint.lint.walk import descendants
from torchlint.semantic import call_arguments, graph_free, network_methods, network_values, project
from torchlint.semantic.forward_flow import BACKWARD
from torchlint.semantic.functions import called_function
from torchlint.semantic.objects import MODULE, assigned_pairs, objects
from torchlint.semantic.values import value_kinds

if TYPE_CHECKING:
    from torchlint.lint.context import Context
    from torchlint.semantic.grad_mode import CallFact, FileFacts

# A freeze of parameters (`p.requires_grad = False`, `net.requires_grad_(False)`), not the keyword of a tensor
# constructor (`Variable(y, requires_grad=False)`, `torch.zeros(n, requires_grad=False)`), which freezes nothing.
FREEZES = re.compile(r"\.\s*requires_grad(_\(\s*(requires_grad\s*=\s*)?False|\s*=\s*False)")
# Calls that copy or move a tensor without making it depend on anything else.
_DATA_METHODS = frozenset({"to", "cuda", "float", "half", "long", "contiguous", "view", "reshape", "permute",
                           "unsqueeze", "squeeze", "clone", "detach"})
# Methods that return the module they are called on (`load(...).to(device)`).
_SAME_OBJECT = frozenset({"to", "cuda", "cpu", "eval", "train", "float", "half", "double", "requires_grad_"})
_DATA_FUNCTIONS = frozenset({"Variable", "torch.autograd.Variable", "torch.autograd.variable.Variable"})


def parameters_taken(text: str, name: str) -> bool:
    """The file takes the parameters of the network `name`, or of a part of it (`Adam(model.enc.parameters())`
    trains the encoder that `model(x, y)` runs): it is trained here, not frozen."""
    return re.search(rf"\b{re.escape(name)}(\s*\.\s*\w+)*?\s*\.\s*(named_)?parameters\s*\(", text) is not None


def untrained(facts: "FileFacts", name: str) -> bool:
    """The network bound to the plain name `name` is never trained by this file (see the module docstring)."""
    text = facts.context.source.text
    if not re.search(r"\.\s*(named_)?parameters\s*\(", text):
        return False  # no optimizer built here: it may be trained where we cannot see
    if facts.has_parameters(name) or parameters_taken(text, name):
        return False  # optimised here, whole or in parts
    if re.search(rf"\b{re.escape(name)}\s*\.\s*(train\s*\(|requires_grad)", text):
        return False
    if FREEZES.search(text) or _handed_to_constructor(facts, name):
        return False
    return True


def built_here(facts: "FileFacts", name: str) -> bool:
    """The plain name `name` is assigned the result of a call somewhere in the file (`teacher = Net().cuda()`),
    not only received as a parameter."""
    for node in descendants(facts.context.module):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            if any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
                return True
    return False


def module_instances(facts: "FileFacts") -> set[str]:
    """The plain names and `self.<attr>`s the file binds to a network it builds, copies or loads, whatever they
    are called: an instance of one of its own `nn.Module` classes (`netContent = _content_model().cuda()`, a VGG
    wrapper for a content loss, even one defined inside a function), a module by its binding (torchvision, a
    class or factory of a project module), an entry of a dict of networks, a whole model loaded from a file
    (`big = torch.load(path)`), or a deep copy of a network (`self.frozen = copy.deepcopy(self.online)`)."""
    found: set[str] = set()
    for node in descendants(facts.context.module):
        if not isinstance(node, cst.Assign):
            continue
        for target in node.targets:  # `self.online, self.target = Net(), Net()`: each target with its value
            for bound, value in assigned_pairs(target.target, node.value):
                if _builds_network(facts, value):
                    found.update(_bound_names(facts, node, bound))
    return found


def _builds_network(facts: "FileFacts", value: cst.BaseExpression) -> bool:
    built = value
    while isinstance(built, cst.Call) and isinstance(built.func, cst.Attribute) and built.func.attr.value in _SAME_OBJECT:
        built = built.func.value  # `Features().cuda().eval()`
    if isinstance(built, cst.Call) and isinstance(built.func, cst.Name):
        if facts.is_module_class(facts.classes.get(built.func.value)):
            return True
    if isinstance(built, cst.Call) and facts.context.qualname(built.func) == "copy.deepcopy" and built.args:
        original = built.args[0].value  # a target network or an EMA copy of the trained one
        text = dotted(original)
        return objects(facts.context).kind(original) == MODULE or (text is not None and facts.has_parameters(text))
    # a torchvision network, a class or factory of a project module, a whole model loaded from a file, an entry
    # of a dict of networks (`clf = nets[arch].to(device)`)
    return isinstance(built, (cst.Call, cst.Subscript)) and (
        objects(facts.context).kind(value) == MODULE or network_values.loads_model(facts, value)
    )


def _bound_names(facts: "FileFacts", node: cst.Assign, t: cst.BaseExpression) -> list[str]:
    """The name the target `t` of an assignment binds, when a call can name it: `net`, and `self.net` of an
    object that is no network itself (an agent holding its target network; a module's sub-module is trained
    with the module)."""
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
        if not facts.is_module_class(facts.context.enclosing(node, cst.ClassDef)):
            return [f"self.{t.attr.value}"]
    return []


def frozen_where_built(facts: "FileFacts", expr: cst.BaseExpression) -> bool:
    """The network the name `expr` holds comes from a function (of this file or a project module) that freezes
    what it builds: `G = load_network_pkl(f)["G_ema"].to(device)` where the loader calls
    `.requires_grad_(False)` on every network it returns. Then no graph is recorded, whatever the grad mode."""
    if not isinstance(expr, cst.Name):
        return False
    context = facts.context
    bindings = context.lookup(expr) or ()
    if not bindings or any(b.kind != "assign" or b.value is None for b in bindings):
        return False
    for binding in bindings:
        value = binding.value
        while isinstance(value, cst.Subscript) or (
            isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _SAME_OBJECT
        ):
            value = value.value if isinstance(value, cst.Subscript) else value.func.value  # type: ignore[union-attr]
        if not isinstance(value, cst.Call) or not _builder_freezes(facts, value):
            return False
    return True


def _builder_freezes(facts: "FileFacts", call: cst.Call) -> bool:
    """The function `call` runs (of this file, or imported from a project module) freezes whole networks."""
    origin = project.imported(facts.context, call.func)
    if origin is not None:
        definition = origin[0].definition(origin[1])
        return isinstance(definition, cst.FunctionDef) and _freezes_whole(definition)
    function = called_function(facts.context, call)
    return function is not None and _freezes_whole(function)


@lru_cache(maxsize=2048)
def _freezes_whole(function: cst.FunctionDef) -> bool:
    """`function` freezes a whole network it holds (`net.eval().requires_grad_(False)`, `for p in
    net.parameters(): p.requires_grad = False`), not a part of one (`model.backbone.requires_grad_(False)`:
    a fine-tuning setup whose head still trains)."""
    for node in descendants(function):
        owner = None
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "requires_grad_":
            if node.args and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == "False":
                owner = node.func.value
        elif isinstance(node, cst.For) and isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Attribute):
            if node.iter.func.attr.value == "parameters" and FREEZES.search(cst.Module([]).code_for_node(node.body)):
                owner = node.iter.func.value
        while isinstance(owner, cst.Call) and isinstance(owner.func, cst.Attribute) and owner.func.attr.value in _SAME_OBJECT:
            owner = owner.func.value
        if owner is not None and not isinstance(owner, cst.Attribute):
            return True
    return False


def unfrozen_pretrained(facts: "FileFacts", call: "CallFact") -> bool:
    """`call` runs a pretrained network this file builds as a fixed feature extractor, put in eval mode and
    never trained or frozen (the VGG of a perceptual loss: `vgg19(weights=...).features[:36].eval()`), and its
    result reaches a backward pass: every backward then computes weight gradients for it that no optimizer
    reads. Only freezing its weights helps (the gradient must still flow through it to what feeds it)."""
    func = call.node.func
    text = facts.context.source.text
    if call.covered or not _pretrained_eval(facts, func) or FREEZES.search(text):
        return False
    name = facts.context.code(func).rsplit(".", 1)[-1]
    if parameters_taken(text, name) or re.search(rf"\b{re.escape(name)}\s*\.\s*train\s*\(", text):
        return False  # handed to an optimizer (whole or in parts), or trained
    if isinstance(func, cst.Name) and _handed_to_constructor(facts, name):
        return False
    found = facts.call_fact(call.node)
    return found is not None and BACKWARD in facts.result_reaches(found[0], call.node)


def _pretrained_eval(facts: "FileFacts", func: cst.BaseExpression) -> bool:
    """`func` (a name, or `self.<attr>`) is bound only to pretrained torchvision/timm networks in eval mode."""
    context = facts.context
    values: list[cst.BaseExpression] = []
    if isinstance(func, cst.Name):
        bindings = context.lookup(func) or ()
        if any(b.kind != "assign" or b.value is None for b in bindings):
            return False
        values = [b.value for b in bindings]  # type: ignore[misc]
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        cls = context.enclosing(func, cst.ClassDef)
        values = list(objects(context).self_assignments(cls).get(func.attr.value, ())) if cls is not None else []
    chains = [_pretrained_chain(context, value) for value in values]
    if not chains or None in chains:
        return False
    if all(chains):
        return True
    owner = context.code(func)  # the file switches it to eval mode elsewhere (a search of the whole text: last)
    return re.search(rf"(?<![\w.]){re.escape(owner)}\s*\.\s*eval\s*\(", context.source.text) is not None


def _pretrained_chain(context: "Context", value: cst.BaseExpression) -> Optional[bool]:
    """None unless `value` builds a pretrained network (through `.features[:36]`-style parts and `.cuda()`-style
    moves); then whether the same expression switches it to eval mode."""
    evaluated = False
    for _ in range(12):
        if isinstance(value, cst.Call):
            if _pretrained_constructor(context, value):
                return evaluated
            if not isinstance(value.func, cst.Attribute):
                return None
            evaluated = evaluated or value.func.attr.value == "eval"
            value = value.func.value
        elif isinstance(value, (cst.Subscript, cst.Attribute)):
            value = value.value
        else:
            return None
    return None


def _pretrained_constructor(context: "Context", call: cst.Call) -> bool:
    """`torchvision.models.vgg19(pretrained=True)`, `vgg16(weights="DEFAULT")`, `timm.create_model(..., pretrained=True)`."""
    qual = context.qualname(call) or ""
    if not (qual.startswith("torchvision.models.") or qual == "timm.create_model"):
        return False
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "pretrained" and context.literal(arg.value) is True:
            return True
        if keyword == "weights" and context.code(arg.value) != "None":
            return True
    return False


def class_freezes(facts: "FileFacts", expr: cst.BaseExpression) -> bool:
    """The class the network `expr` is built from (when it can be read) freezes its parameters itself."""
    for owner, cls in network_methods.receiver_classes(facts, expr):
        if FREEZES.search(owner.context.code(cls)):
            return True
    return False


def class_optimises_itself(facts: "FileFacts", expr: cst.BaseExpression) -> bool:
    """The class the network `expr` is built from (when it can be read) hands its own parameters to something
    (`self.optimizer = optim.Adam(self.parameters(), lr=alpha)`): it is trained, by its own optimizer."""
    return any(_OWN_PARAMETERS.search(owner.context.code(cls)) for owner, cls in network_methods.receiver_classes(facts, expr))


_OWN_PARAMETERS = re.compile(r"\bself\s*\.\s*(named_)?parameters\s*\(")


def input_is_data(facts: "FileFacts", call: "CallFact") -> bool:
    """Every argument of the forward pass `call` derives from loop variables (batches) or new tensors built from
    host values (`torch.FloatTensor(next_states)`) through copies and moves only."""
    args = call.node.args
    return bool(args) and all(_from_data(facts, arg.value, set(), 0) for arg in args)


def _from_data(facts: "FileFacts", expr: cst.BaseExpression, seen: set, depth: int) -> bool:
    """`expr` derives from loop variables through copies and moves only (`seen`: assignments being followed,
    `imgs = imgs.cuda()` refers to itself; `depth`: bindings followed, so `x = Variable(x).cuda()` costs one)."""
    if depth > 6:
        return False
    context = facts.context
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(expr, cst.Subscript):
        return _from_data(facts, expr.value, seen, depth)
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _DATA_METHODS:
            return _from_data(facts, func.value, seen, depth)
        if (context.qualname(func) or context.code(func)) in _DATA_FUNCTIONS and expr.args:
            return _from_data(facts, expr.args[0].value, seen, depth)
        return graph_free.drops_graph(context, expr)  # `torch.FloatTensor(batch.next_state)`: a new leaf tensor
    if not isinstance(expr, cst.Name):
        return False
    bindings = context.lookup(expr) or ()
    if not bindings:
        return False
    reaching = value_kinds(context).reaching_binding(expr, list(bindings))
    if reaching is not None:  # `next_s = torch.FloatTensor(next_s)` after `s, a, r, next_s = memory.sample()`
        bindings = [reaching]
    for binding in bindings:
        if binding.kind == "loop":
            continue  # a loop variable: a batch, or part of one
        if binding.node in seen:
            continue
        value = _element_for(binding.node, expr.value) if isinstance(binding.node, cst.Assign) else None
        if value is None or not _from_data(facts, value, seen | {binding.node}, depth + 1):
            return False
    return True


def _element_for(node: cst.Assign, name: str) -> "cst.BaseExpression | None":
    """The expression `node` assigns to `name`, element by element for a tuple target
    (`imgs, caps = imgs.cuda(), caps.cuda()`)."""
    if len(node.targets) != 1:
        return None
    target, value = node.targets[0].target, node.value
    if isinstance(target, cst.Name):
        return value
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
        for element, item in zip(target.elements, value.elements):
            if isinstance(element.value, cst.Name) and element.value.value == name:
                return item.value
    return None


def _handed_to_constructor(facts: "FileFacts", name: str) -> bool:
    """`name` is passed to a class or a container (`Seq2Seq(encoder, decoder)`, `nn.ModuleList([encoder])`),
    where it may become part of a model that is trained, or to a helper that builds an optimizer from it
    (`build_optimizer(cfg, encoder)`)."""
    for node in descendants(facts.context.module):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if not last[:1].isupper() and not re.search(r"optim|param", last, re.I):
            continue  # a class or a container; or a helper that builds an optimizer from it
        for arg in node.args:
            value = arg.value
            items = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
            if any(isinstance(item, cst.Name) and item.value == name for item in items):
                return True  # the network itself, not one of its attributes (`Decoder(vocab, encoder.dim)`)
    return False


def untrained_where_passed(facts: "FileFacts", name: cst.Name) -> bool:
    """`name` is a parameter (`def kd_loss(out, teacher, x)`) that every caller, in any file, fills with a network
    its own file builds or loads and never trains (`untrained` there): a teacher handed to a loss helper."""
    bindings = facts.context.lookup(name)
    if not bindings or len(bindings) != 1 or bindings[0].kind != "param" or not isinstance(bindings[0].node, cst.Param):
        return False
    from torchlint.semantic.model import semantic_model

    passed = call_arguments.passed_for(facts.context, bindings[0].node)
    return bool(passed) and all(_untrained_network(semantic_model(there).grad, argument) for there, argument in passed)


def _untrained_network(facts: "FileFacts", argument: cst.BaseExpression) -> bool:
    """The argument is a name its file binds to a network it builds or loads and never trains."""
    if not isinstance(argument, cst.Name):
        return False
    return argument.value in module_instances(facts) and untrained(facts, argument.value)
