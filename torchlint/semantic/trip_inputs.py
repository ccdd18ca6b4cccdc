"""Trip inputs: the names a loop binds anew on every trip, and whether a call reads one of them.

A call inside a loop that is given such a name runs on new input each trip (`a = agent.act(s)` with
`s = s_` after `env.step`, `f(x)` for `x` in a loader); one given only names bound before the loop runs on the
same input again (`evaluate(model, X_test)` every epoch).
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from torchlint.lint.names import target_names
from torchlint.lint.walk import descendants, semantic_children


def bound_each_trip(loop: cst.CSTNode) -> set[str]:
    """Names the loop binds on every trip: its target and what its body assigns (`s = s_`, `obs, r, done, _ =
    env.step(a)`, inner loops' targets), not inside functions or classes it defines."""
    names = set(target_names(loop.target)) if isinstance(loop, cst.For) else set()
    stack = list(getattr(loop.body, "body", ()))
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, cst.Assign):
            for target in node.targets:
                names.update(target_names(target.target))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For)):
            names.update(target_names(node.target))
        stack.extend(semantic_children(node))
    return names


def reads_any(args: Sequence[cst.Arg], names: set[str]) -> bool:
    """Some argument reads one of `names` (`agent.act(s)`, `get_action(torch.as_tensor(obs))`)."""
    return any(
        isinstance(node, cst.Name) and node.value in names
        for arg in args for node in (arg.value, *descendants(arg.value))
    )
