"""What the rules of this family share."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import keyword, positional, with_keyword
from torchlint.lint.context import Context
from torchlint.lint.rule import Fix, Replace, Rule

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
NUM_WORKERS_AT = 5

PIN_MEMORY_AT = 7

_FUNCTION_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)

LOOPS = (cst.For, cst.While)


def is_inside(context: Context, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    return any(a is container for a in context.ancestors(node))


def enclosing_loops(context: Context, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The `for`/`while` statements around `node` within its own function, innermost first."""
    loops = []
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, _FUNCTION_SCOPES):
            break
        if isinstance(ancestor, LOOPS):
            loops.append(ancestor)
    return loops


def set_argument(call: cst.Call, name: str, value: str, position: Optional[int] = None) -> cst.Call:
    """`call` with parameter `name` set to `value`: in place when passed by position, else as a keyword."""
    if keyword(call, name) is None and position is not None:
        given = positional(call)
        if position < len(given):
            target = given[position]
            expression = cst.parse_expression(value)
            return call.with_changes(args=[a.with_changes(value=expression) if a is target else a for a in call.args])
    return with_keyword(call, name, value)


def with_keyword_fix(
    context: Context,
    call: cst.Call,
    name: str,
    value: str,
    description: str,
    *,
    position: Optional[int] = None,
    safe: bool = True,
) -> Optional[Fix]:
    return Fix(description, [Replace(call, set_argument(call, name, value, position))], safe=safe)


def snippet(context: Context, node: cst.CSTNode, limit: int = 40) -> str:
    text = " ".join(context.code(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def loaders_to_check(rule: Rule) -> list[cst.Call]:
    """The file's DataLoader constructions, or none in a test module (its loaders serve the tests)."""
    return [] if rule.semantic.is_test_module else list(rule.semantic.loaders.loaders)
