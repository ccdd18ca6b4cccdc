"""Switched training: one function that trains or evaluates as a flag argument says, called with the flag off.

`run_epoch(model, loader, optimizer, train=True)` / `self.iteration(epoch, loader, train=False)`: the
backward pass and the optimizer step sit under `if train:`, the forward passes run either way. Called with
`train=False` (or `mode="val"` against `if mode == "train":`), the function evaluates: its forward passes
record a graph that no backward pass reads, unless the call itself runs under no-grad. The flag is read from
the call's literal arguments (or the parameter's default); every training statement must sit in a branch the
flag rules out, and the function must switch no grad mode of its own (`torch.set_grad_enabled(train)`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

from torchlint.lint.context import UNKNOWN
from torchlint.lint.walk import descendants
from torchlint.semantic.forward_flow import RETURNED

if TYPE_CHECKING:
    from torchlint.semantic.grad_mode import CallFact, FileFacts, ScopeFacts


def evaluating_call(facts: "FileFacts", caller: "ScopeFacts", call: "CallFact") -> Optional["ScopeFacts"]:
    """The function of this file `call` (in `caller`) runs when it trains only under a flag this call turns off, runs
    networks with autograd on, and none of their results reaches a backward pass, is stored or is returned
    to code that may train on it; else None."""
    if call.covered:
        return None
    function = facts.local_function(call.node)
    scope = facts.by_node.get(function) if function is not None else None
    if scope is None or not scope.training or scope.grad_off or scope.set_grad_false:
        return None
    if scope.decorated_grad_off is not None or scope.decorated_other_grad:
        return None
    values = _flag_values(facts, function, call.node)  # type: ignore[arg-type]
    if not values:
        return None
    dead = dead_blocks(facts, scope, values)
    nodes = {order: node for node, order in facts.orders.items() if scope.start <= order <= scope.end}
    if any(not _inside(facts, nodes.get(order), dead, function) for order in scope.training):  # type: ignore[arg-type]
        return None  # some training runs whatever the flag says
    forwards = [c for c in scope.calls if not c.covered and facts.is_network_call(c) and not _inside(facts, c.node, dead, function)]
    if not forwards or not (call.loops or any(c.loops for c in forwards)):
        return None  # no forward pass, or one forward pass once: too little to matter
    for forward in forwards:
        reached = facts.result_reaches(scope, forward.node, follow_callers=False, dead=frozenset(dead))
        if reached - {RETURNED}:
            return None
        if RETURNED in reached and facts.result_reaches(caller, call.node):
            return None
    return scope


def dead_blocks(facts: "FileFacts", scope: "ScopeFacts", values: dict[str, Any]) -> set[cst.CSTNode]:
    """The branches of `scope` (an `if`'s body or its `else`) that the flag values rule out."""
    dead: set[cst.CSTNode] = set()
    for node in descendants(scope.node):
        if isinstance(node, cst.If):
            truth = _truth(facts, node.test, values)
            if truth is False:
                dead.add(node.body)
            elif truth is True and node.orelse is not None:
                dead.add(node.orelse)
    return dead


def _inside(facts: "FileFacts", node: Optional[cst.CSTNode], dead: set[cst.CSTNode], function: cst.FunctionDef) -> bool:
    """`node` sits in one of the `dead` blocks of `function`."""
    current = node
    while current is not None and current is not function:
        if current in dead:
            return True
        current = facts.parents.get(current)
    return False


def _flag_values(facts: "FileFacts", function: cst.FunctionDef, call: cst.Call) -> dict[str, Any]:
    """The literal values (True, False, a string, None) the call gives the function's parameters, defaults
    included where the call leaves them out."""
    params = list(function.params.posonly_params) + list(function.params.params)
    if params and params[0].name.value in ("self", "cls") and isinstance(call.func, cst.Attribute):
        params = params[1:]
    values: dict[str, Any] = {}
    for param in (*params, *function.params.kwonly_params):
        if param.default is not None:
            values[param.name.value] = facts.context.literal(param.default)
    position = 0
    for arg in call.args:
        if arg.star:
            return {}  # `*args`, `**kwargs`: which parameter gets what cannot be told
        if arg.keyword is not None:
            values[arg.keyword.value] = facts.context.literal(arg.value)
        elif position < len(params):
            values[params[position].name.value] = facts.context.literal(arg.value)
            position += 1
    return {name: value for name, value in values.items() if value is not UNKNOWN and isinstance(value, (bool, str, type(None)))}


def _truth(facts: "FileFacts", test: cst.BaseExpression, values: dict[str, Any]) -> Optional[bool]:
    """The value of an `if` test from the flag values: a flag, `not flag`, `flag == "train"`, `and`/`or`."""
    if isinstance(test, cst.Name):
        return bool(values[test.value]) if test.value in values else None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _truth(facts, test.expression, values)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = _truth(facts, test.left, values), _truth(facts, test.right, values)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else (True if left and right else None)
        return True if True in (left, right) else (False if left is False and right is False else None)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        if test.left.value not in values:
            return None
        value = values[test.left.value]
        target = test.comparisons[0]
        other = facts.context.literal(target.comparator)
        if other is UNKNOWN:
            return None
        if isinstance(target.operator, (cst.Equal, cst.Is)):
            return value == other
        if isinstance(target.operator, (cst.NotEqual, cst.IsNot)):
            return value != other
    return None
