"""Does a value read to the host go where only the host can use it?

Some per-step reads are the algorithm's, not waste: a reinforcement-learning loop must hand its actions to
an environment that steps on the host (`envs.step(actions.cpu().numpy())`), and prioritised replay keeps
its sum tree on the host (`memory.update_priorities(idxs, loss.detach().cpu().numpy())`). Nothing can keep
such a value on the device, so a rule that asks for it to stay there is wrong.

`feeds_host_consumer(context, read)` is true when the value of `read` (a `.cpu()`, `.item()`, `.numpy()`
call, through the methods chained on it) is an argument of such a call, directly or through the one name it
is assigned to in the same function.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.names import last_name
from torchlint.lint.walk import scope_nodes
from torchlint.semantic import loops

if TYPE_CHECKING:
    from torchlint.lint.context import Context

# Methods of host-side structures fed per step: a replay buffer's priorities (`update_priorities`).
_HOST_STRUCTURE = re.compile(r"^update_priorit(?:y|ies)$")


def feeds_host_consumer(context: "Context", read: cst.Call) -> bool:
    """The value of `read` is an argument of an environment's step or a host structure's update, directly or
    through the one name it is assigned to in the same function."""
    value = whole_value(context, read)
    parent = context.parent(value)
    if isinstance(parent, cst.Arg):
        call = context.parent(parent)
        return isinstance(call, cst.Call) and _consumes_on_host(context, call)
    name = _assigned_name(context, value)
    if name is None:
        return False
    function = context.enclosing_function(read)
    scope = function.body if function is not None else context.module
    for node in scope_nodes(scope):
        if isinstance(node, cst.Call) and _consumes_on_host(context, node):
            if any(_names(arg.value, name) for arg in node.args):
                return True
    return False


def _consumes_on_host(context: "Context", call: cst.Call) -> bool:
    """`envs.step(actions)` (any `.step()` that is not an optimizer's or a scheduler's), or
    `memory.update_priorities(idxs, priorities)`."""
    name = last_name(call.func)
    if not isinstance(call.func, cst.Attribute) or name is None:
        return False
    if name == "step":
        return loops.step_kind(context, call) is None and bool(call.args)
    return bool(_HOST_STRUCTURE.match(name))


def whole_value(context: "Context", read: cst.Call) -> cst.BaseExpression:
    """`actions.cpu().numpy()[0]` for the `.cpu()` call in it: the read and the methods and indexes chained on it."""
    current: cst.BaseExpression = read
    while True:
        parent = context.parent(current)
        if isinstance(parent, cst.Subscript) and parent.value is current:
            current = parent
            continue
        if isinstance(parent, cst.Attribute) and parent.value is current:
            call = context.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                current = call
                continue
            current = parent  # `.data`
            continue
        return current


def _assigned_name(context: "Context", value: cst.BaseExpression) -> Optional[str]:
    parent = context.parent(value)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value
    return None


def _names(expr: cst.BaseExpression, name: str) -> bool:
    """`expr` reads the name (`actions`, `actions[0]`, `np.clip(actions, -1, 1)`)."""
    return any(isinstance(n, cst.Name) and n.value == name for n in (expr, *scope_nodes(expr)))
