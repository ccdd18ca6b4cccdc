"""Forward flow: where the result of one forward pass goes inside its function.

A forward pass run with autograd on is wasted work when nothing ever backpropagates through its result.
`result_reaches` follows the result through the statements of its function, in order (a name assigned a
value that does not hold it any more stops carrying it; both arms of an `if` are followed; a loop body is
followed twice), and reports where it ends up:

- `BACKWARD`: a backward pass (`loss.backward()`, `scaler.scale(loss).backward()`, `torch.autograd.grad`,
  a function of this file that trains, given the result);
- `RETURNED`: the function returns or yields it (its callers decide);
- `STORED`: it is stored where other code can reach it (`self.out = ...`, a nested function reads it),
  unless the caller knows that what is stored there is never trained on (`kept`: a rollout buffer whose
  lists are read back only through `.detach()`).

An empty answer means the result only reaches host values, detached copies, metrics, logs and plots.
Reads that drop the graph stop the flow: `.detach()`, `.data`, `.item()`, `.numpy()`, `.tolist()`,
comparisons, `argmax`, shapes and sizes, `int()`/`float()`. Any other expression that contains the result
carries it on: an unknown call given it passes it to its result, so doubt leans towards a backward.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

import libcst as cst

from torchlint.lint.names import dotted
from torchlint.lint.walk import semantic_children
from torchlint.semantic import host_sinks

BACKWARD = "backward"
RETURNED = "returned"
STORED = "stored"
PLOTTED = "plotted"  # (with `values=True`) its values end in a figure or an image file

# Reads whose result carries no graph.
_CUT_METHODS = frozenset(
    {"detach", "numpy", "item", "tolist", "argmax", "argmin", "size", "dim", "numel", "nelement", "data_ptr",
     "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "nonzero", "argsort", "get_device"}
)
_CUT_ATTRIBUTES = frozenset({"data", "shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "grad_fn"})
_CUT_FUNCTIONS = frozenset({"len", "int", "float", "bool", "str", "isinstance", "type", "id", "repr", "hash"})
# Methods that put their argument into the receiver (a local list of outputs).
_COLLECTING = frozenset({"append", "extend", "insert", "add", "update", "put", "appendleft", "setdefault", "push"})
_BACKWARD_FUNCTIONS = frozenset({"backward", "manual_backward", "grad", "vjp"})

_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)

Trains = Callable[[cst.Call], bool]
Kept = Callable[[cst.Attribute], bool]  # what is stored at `X.attr` (assigned, appended) may be trained on
Elements = Optional[tuple[bool, ...]]  # which elements of a returned tuple carry a graph (None: unknown)


class _Flow:
    def __init__(
        self, scope: cst.CSTNode, seed: cst.CSTNode, trains: Trains, opaque: Trains, values: bool = False,
        dead: frozenset = frozenset(), kept: Kept = lambda target: True, drops: Trains = lambda call: False,
        elements: Elements = None,
    ) -> None:
        self.seed = seed
        self.kept = kept
        self.drops = drops  # a call whose result carries no graph whatever it is given (`torch.tensor(x)`)
        self.elements = elements  # which elements of the seed's tuple carry its graph
        self.returned: list[Elements] = []  # per return of a tuple: which of its elements carry the graph
        self.dead = dead  # blocks that never run (an `if train:` body when the flag is off)
        self.path = _path_to(scope, seed)  # the statements (and blocks) that hold the forward pass
        self.values = values  # follow the values themselves, through reads that drop the graph
        self.trains = trains  # a call of a function that trains on what it is given
        self.opaque = opaque  # a call that may train on what it is given, out of sight
        self.reached: set[str] = set()

    # -- expressions ---------------------------------------------------------------------------------
    def live(self, expr: cst.CSTNode, held: set[str]) -> bool:
        """`expr` evaluates to something that still carries the forward's graph."""
        if expr is self.seed:
            return True
        if isinstance(expr, cst.Name):
            return expr.value in held
        if isinstance(expr, _COMPREHENSIONS):
            return self._comprehension_live(expr, held)
        if self.values:
            if isinstance(expr, _SCOPES):
                return False
            if isinstance(expr, cst.Attribute):
                text = dotted(expr)
                return (text is not None and text in held) or self.live(expr.value, held)
            if isinstance(expr, cst.Call):
                return self.live(expr.func, held) or any(self.live(arg.value, held) for arg in expr.args)
            return any(self.live(child, held) for child in semantic_children(expr))
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _CUT_ATTRIBUTES:
                return False
            text = dotted(expr)
            return (text is not None and text in held) or self.live(expr.value, held)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _CUT_METHODS:
                return False
            if isinstance(func, cst.Name) and func.value in _CUT_FUNCTIONS:
                return False
            if self.drops(expr):
                return False
            return self.live(func, held) or any(self.live(arg.value, held) for arg in expr.args)
        if isinstance(expr, cst.Comparison):
            return False
        if isinstance(expr, cst.Subscript):
            return self.live(expr.value, held)
        if isinstance(expr, _SCOPES):
            return False
        return any(self.live(child, held) for child in semantic_children(expr))

    def _comprehension_live(self, expr: cst.CSTNode, held: set[str]) -> bool:
        """A comprehension carries the graph when what it iterates does, or its element reads a name that holds
        it (its own loop names hide outer ones: `[env.sample() for _ in range(n)]` reads no outer `_`)."""
        bound: set[str] = set()
        comp: Optional[cst.CompFor] = expr.for_in  # type: ignore[attr-defined]
        while comp is not None:
            if self.live(comp.iter, held - bound):
                return True
            bound |= _target_names(comp.target)
            comp = comp.inner_for_in
        inner = held - bound
        parts = (expr.key, expr.value) if isinstance(expr, cst.DictComp) else (expr.elt,)  # type: ignore[attr-defined]
        return any(self.live(part, inner) for part in parts)

    def _events(self, node: cst.CSTNode, held: set[str]) -> None:
        """Backward passes, collections and closures reached inside one statement's expressions."""
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, _SCOPES):
                if self._reads_held(current, held):
                    self.reached.add(STORED)
                continue
            if isinstance(current, cst.Call):
                self._call(current, held)
            if isinstance(current, (cst.Yield,)) and current.value is not None and self.live(current.value, held):
                self.reached.add(RETURNED)
            stack.extend(semantic_children(current))

    def _call(self, call: cst.Call, held: set[str]) -> None:
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        given = any(self.live(arg.value, held) for arg in call.args)
        if self.values and given and name in host_sinks.PLOTS:
            self.reached.add(PLOTTED)
        if name == "backward" and isinstance(func, cst.Attribute) and self.live(func.value, held):
            self.reached.add(BACKWARD)
        elif name in _BACKWARD_FUNCTIONS and given:
            self.reached.add(BACKWARD)
        elif given and self.trains(call):
            self.reached.add(BACKWARD)
        elif given and name in _COLLECTING and isinstance(func, cst.Attribute):
            receiver = func.value
            if isinstance(receiver, cst.Name):
                held.add(receiver.value)
            else:
                self._store(receiver)

    def _reads_held(self, scope: cst.CSTNode, held: set[str]) -> bool:
        stack = list(semantic_children(scope))
        while stack:
            current = stack.pop()
            if isinstance(current, cst.Name) and current.value in held:
                return True
            stack.extend(semantic_children(current))
        return False

    # -- statements ----------------------------------------------------------------------------------
    def block(self, statements, held: set[str]) -> set[str]:
        for stmt in statements:
            held = self.statement(stmt, held)
        return held

    def body(self, node: Optional[cst.CSTNode], held: set[str]) -> set[str]:
        if node is None or node in self.dead:
            return held
        if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            return self.block(node.body, held)
        if isinstance(node, (cst.Else, cst.Finally)):
            return self.body(node.body, held)
        if isinstance(node, cst.If):  # an `elif`
            return self.statement(node, held)
        return held

    def statement(self, stmt: cst.CSTNode, held: set[str]) -> set[str]:
        if not held and stmt not in self.path:
            return held  # nothing holds the result yet and the forward pass is not in here
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                held = self.small(small, held)
            return held
        if isinstance(stmt, _SCOPES):
            if self._reads_held(stmt, held):
                self.reached.add(STORED)
            return held
        if isinstance(stmt, cst.If):
            self._events(stmt.test, held)
            taken = self.body(stmt.body, set(held))
            other = self.body(stmt.orelse, set(held))
            return taken | other
        if isinstance(stmt, (cst.For, cst.While)):
            if isinstance(stmt, cst.For):
                self._events(stmt.iter, held)
                if self.live(stmt.iter, held):
                    held = held | _target_names(stmt.target)
            else:
                self._events(stmt.test, held)
            start = set(held)
            once = self.body(stmt.body, set(held))
            after = start | once
            if after != start:  # the next trip starts with more names holding it
                after |= self.body(stmt.body, set(after))
            return self.body(stmt.orelse, after)
        if isinstance(stmt, cst.With):
            for item in stmt.items:
                self._events(item.item, held)
                if item.asname is not None and self.live(item.item, held):
                    held = held | _target_names(item.asname.name)
            return self.body(stmt.body, held)
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            after = self.body(stmt.body, set(held))
            merged = held | after
            for handler in stmt.handlers:
                merged |= self.body(handler.body, set(held | after))
            merged |= self.body(stmt.orelse, set(after))
            return self.body(stmt.finalbody, merged)
        # anything else (match, ...): every expression in it, nothing killed
        self._events(stmt, held)
        return held

    def small(self, small: cst.CSTNode, held: set[str]) -> set[str]:
        self._events(small, held)
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
            func = call.func
            method = func.attr.value if isinstance(func, cst.Attribute) else None
            if method not in _COLLECTING and method != "backward" and self.opaque(call):
                if any(self.live(arg.value, held) for arg in call.args):
                    self.reached.add(STORED)  # handed to code we cannot see, which may train on it
        if isinstance(small, cst.Return):
            if small.value is not None and self.live(small.value, held):
                self.reached.add(RETURNED)
                value = small.value
                self.returned.append(
                    tuple(self.live(e.value, held) for e in value.elements) if isinstance(value, cst.Tuple) else None
                )
            return held
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            value = small.value
            if value is None:
                return held
            carries = self.live(value, held)
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            held = set(held)
            for target in targets:
                if value is self.seed and self._unpacks_elements(target):
                    for element, live in zip(target.elements, self.elements):  # type: ignore[attr-defined, arg-type]
                        self._assign(element.value, live, held, augmented=False)
                    continue
                self._assign(target, carries, held, augmented=isinstance(small, cst.AugAssign))
            return held
        return held

    def _unpacks_elements(self, target: cst.BaseExpression) -> bool:
        """`a, logp, v = seed`: the seed's elements, known one by one, go to names one by one."""
        return (
            self.elements is not None and isinstance(target, (cst.Tuple, cst.List))
            and len(target.elements) == len(self.elements)
            and not any(isinstance(e, cst.StarredElement) for e in target.elements)
        )

    def _assign(self, target: cst.BaseExpression, carries: bool, held: set[str], augmented: bool) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                value = element.value
                self._assign(value.value if isinstance(value, cst.StarredElement) else value, carries, held, augmented)
            return
        if isinstance(target, cst.Name):
            if carries:
                held.add(target.value)
            elif not augmented:
                held.discard(target.value)
            return
        if isinstance(target, cst.Attribute):
            text = dotted(target)
            if carries:
                self._store(target)
                if text:
                    held.add(text)
            elif text and not augmented:
                held.discard(text)
            return
        if isinstance(target, cst.Subscript) and carries:
            base = target.value
            if isinstance(base, cst.Name):
                held.add(base.value)
            else:
                self._store(base)

    def _store(self, target: cst.BaseExpression) -> None:
        """The result is put where other code can read it: stored, unless `kept` knows it is never trained on."""
        if not isinstance(target, cst.Attribute) or self.kept(target):
            self.reached.add(STORED)


def _path_to(scope: cst.CSTNode, seed: cst.CSTNode) -> set[cst.CSTNode]:
    """The nodes from `scope` down to `seed` (its ancestors inside `scope`)."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack = [scope]
    while stack:
        node = stack.pop()
        if node is seed:
            break
        for child in semantic_children(node):
            parents[child] = node
            stack.append(child)
    path = set()
    current: Optional[cst.CSTNode] = seed
    while current is not None:
        path.add(current)
        current = parents.get(current)
    return path


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        names: set[str] = set()
        for element in target.elements:
            value = element.value
            names |= _target_names(value.value if isinstance(value, cst.StarredElement) else value)
        return names
    text = dotted(target) if isinstance(target, cst.Attribute) else None
    return {text} if text else set()


def result_reaches(
    scope: Union[cst.FunctionDef, cst.Module],
    call: cst.Call,
    trains: Trains = lambda call: False,
    opaque: Trains = lambda call: False,
    dead: frozenset = frozenset(),
    kept: Kept = lambda target: True,
    drops: Trains = lambda call: False,
    elements: Elements = None,
) -> set[str]:
    """Where the result of `call` (a forward pass in `scope`, a function or the module's top level) goes:
    a subset of {BACKWARD, RETURNED, STORED}; empty when only host values, metrics and logs see it.
    `trains`: a call of a function known to train on what it is given; `opaque`: a call statement whose
    code may train on what it is given, out of sight (the result then counts as STORED); `dead`: blocks
    (an `if`'s body or `else`) that do not run; `kept`: what is stored at an attribute may be trained on;
    `drops`: a call whose result carries no graph; `elements`: which elements of the tuple `call` returns carry
    its graph (`action, logp, v = policy.act(s)`: the sampled action carries none)."""
    flow = _Flow(scope, call, trains, opaque, dead=dead, kept=kept, drops=drops, elements=elements)
    body = scope.body if isinstance(scope, cst.FunctionDef) else scope
    statements = body.body if isinstance(body, (cst.IndentedBlock, cst.Module, cst.SimpleStatementSuite)) else []
    flow.block(statements, set())
    return flow.reached


def returned_elements(function: cst.FunctionDef, seeds: list[cst.Call], drops: Trains) -> Elements:
    """Which elements of the tuple `function` returns carry the graph of one of its forward passes `seeds`
    (`return action, log_prob, value`: the sampled action carries none), or None when some return is no tuple
    of one length."""
    found: Optional[list[bool]] = None
    body = function.body
    statements = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else []
    for seed in seeds:
        flow = _Flow(function, seed, lambda call: False, lambda call: False, drops=drops)
        flow.block(statements, set())
        for elements in flow.returned:
            if elements is None or (found is not None and len(found) != len(elements)):
                return None
            found = [a or b for a, b in zip(found, elements)] if found is not None else list(elements)
    return tuple(found) if found is not None else None


def given_reaches(
    function: cst.FunctionDef, names: set[str], trains: Trains, opaque: Trains, kept: Kept, drops: Trains
) -> set[str]:
    """Where what `names` (parameters of `function`) hold on entry goes inside it: a method that keeps what it is
    given in lists of its object (`memory.push(state, action, log_prob)`) stores it there, judged by `kept`."""
    flow = _Flow(function, function, trains, opaque, kept=kept, drops=drops)
    body = function.body
    flow.block(body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else [], set(names))
    return flow.reached


def returns_given(function: cst.FunctionDef, names: set[str]) -> bool:
    """`function` returns something computed from what `names` (its parameters) hold on entry, graph and all: a
    loss built from the log probabilities it is given; not an action read off them with `.item()`."""
    flow = _Flow(function, function, lambda call: False, lambda call: False)
    body = function.body
    flow.block(body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else [], set(names))
    return RETURNED in flow.reached


def values_plotted(scope: Union[cst.FunctionDef, cst.Module], call: cst.Call) -> bool:
    """Values computed from the result of `call` (detached, on the host, any form) end in a figure or an
    image file in `scope`: the forward pass draws a picture."""
    flow = _Flow(scope, call, lambda call: False, lambda call: False, values=True)
    body = scope.body if isinstance(scope, cst.FunctionDef) else scope
    statements = body.body if isinstance(body, (cst.IndentedBlock, cst.Module, cst.SimpleStatementSuite)) else []
    flow.block(statements, set())
    return PLOTTED in flow.reached
