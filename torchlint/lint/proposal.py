"""What a rule proposes to change: the fix types rules hand to the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence, Union

if TYPE_CHECKING:
    import libcst as cst


@dataclass(frozen=True)
class Replace:
    """Replace `node` with `new` (a node or source text)."""

    node: cst.CSTNode
    new: Union[cst.CSTNode, str]


@dataclass(frozen=True)
class InsertBefore:
    """Insert source text right before `node` (for a statement: on its own line, same indentation)."""

    node: cst.CSTNode
    text: str


@dataclass(frozen=True)
class Fix:
    """What a rule proposes: node-level changes plus `import` statements the new code needs."""

    description: str
    changes: Sequence[Union[Replace, InsertBefore]]
    safe: bool = True
    imports: Sequence[str] = ()  # module names that must be bound by `import NAME`
