"""Stored reads: whether a value stored on an object (`self.buffer.logprobs.append(logprob)`,
`self.last_value = value`) is ever read back into a backward pass.

A rollout keeps what each environment step produced in lists of a buffer, then the update reads them back.
PPO reads them as data (`torch.stack(self.buffer.logprobs).detach()`) and recomputes the log probabilities
with the graph it trains on, so the graph recorded at every step is thrown away; A2C and REINFORCE stack the
stored log probabilities into the loss and backpropagate through them. The stored value is followed from every
read of the same attribute name in the file (`forward_flow`, through returns into callers): it is never
trained on when no read carries it anywhere (only detached copies, host values, logs). An attribute the file
never reads is read elsewhere, out of sight: it may be trained on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.lint.walk import descendants

if TYPE_CHECKING:
    from torchlint.semantic.grad_mode import FileFacts


def may_be_trained_on(facts: "FileFacts", name: str) -> bool:
    """What is stored at `X.<name>` may reach a backward pass: some read of `<name>` in the file carries it on
    (into a loss, a return, another store), or the file never reads it back."""
    reads = [node for node in facts.context.shared(_AttributeIndex).by_name.get(name, ()) if not _stored_into(facts, node)]
    if not reads:
        return True  # read out of sight, if at all
    for read in reads:
        function = facts.context.enclosing_function(read)
        scope = facts.by_node.get(function if function is not None else facts.context.module)
        if scope is None or facts.result_reaches(scope, read):  # type: ignore[arg-type]
            return True
    return False


# Methods that add to a container: `X.<name>.append(v)` stores `v`, it reads nothing back.
_ADDERS = frozenset({"append", "extend", "insert", "appendleft"})


def _stored_into(facts: "FileFacts", node: cst.Attribute) -> bool:
    """`X.<name> = ...`, `X.<name>, y = ...`, `X.<name>.append(...)`: a store, not a read (`X.<name> += ...`
    reads it too)."""
    parent = facts.parents.get(node)
    if isinstance(parent, cst.Attribute) and parent.attr.value in _ADDERS and isinstance(facts.parents.get(parent), cst.Call):
        return True
    while isinstance(parent, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        parent = facts.parents.get(parent)
    return isinstance(parent, (cst.AssignTarget, cst.AnnAssign))


class _AttributeIndex:
    """The attribute nodes of a file, by attribute name."""

    def __init__(self, context) -> None:
        self.by_name: dict[str, list[cst.Attribute]] = {}
        for node in descendants(context.module):
            if isinstance(node, cst.Attribute):
                self.by_name.setdefault(node.attr.value, []).append(node)
