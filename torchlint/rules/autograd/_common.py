"""What the rules of this family share."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.rule import Fix, InsertBefore, Replace, Rule
from torchlint.lint.walk import semantic_children
from torchlint.semantic.grad_mode import CallFact, FileFacts, ScopeFacts

FAMILY = "Autograd and inference"


class GradRule(Rule):
    """Base of the rules that judge what a file does about autograd: they read the semantic model's
    grad facts once the walk is over."""

    def gate(self, text: str) -> bool:
        return True

    def leave_Module(self, node: cst.Module) -> None:
        if self.gate(self.context.source.text):
            self.check(self.semantic.grad)

    def check(self, facts: FileFacts) -> None:
        raise NotImplementedError


def has_multiline_string(node: cst.CSTNode, context: Context) -> bool:
    for child in all_descendants(node):
        if isinstance(child, (cst.SimpleString, cst.FormattedString)) and "\n" in context.code(child):
            return True
    return False


def all_descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = list(semantic_children(node))
    while stack:
        current = stack.pop()
        yield current
        stack.extend(semantic_children(current))


def wrap_statements(statements: list[cst.CSTNode], context: Context, torch_name: str) -> Optional[list[Replace]]:
    """Replacements that put consecutive `statements` (same block) under `with torch.no_grad():`."""
    if not statements or any(has_multiline_string(s, context) for s in statements):
        return None
    indent = context.module.default_indent
    changes = []
    for i, stmt in enumerate(statements):
        code = context.code(stmt.with_changes(leading_lines=()))
        code = code.rstrip("\r\n")
        lines = code.split("\n")
        body = "\n".join((indent + line) if line.strip() else line for line in lines)
        if i == 0:
            body = f"with {torch_name}.no_grad():\n" + body
        changes.append(Replace(stmt, body))
    return changes


def decorator_fix(context: Context, facts: FileFacts, scope: ScopeFacts, torch_name: str) -> Optional[Fix]:
    """Decorate the function `scope` with `@torch.no_grad()`, below its other decorators (not an async one)."""
    func = scope.node
    assert isinstance(func, cst.FunctionDef)
    if scope.is_async:
        return None
    decorator = f"@{torch_name}.no_grad()"
    if func.decorators:
        last = func.decorators[-1].decorator
        indent = facts.indent_of(func)
        change = Replace(last, f"{context.code(last)}{context.source.newline}{indent}{decorator}")
    else:
        change = InsertBefore(func, decorator)  # type: ignore[assignment]
    return Fix(f"Decorate `{scope.name}` with {decorator}", [change], safe=False, imports=("torch",))


def wrap_fix(context: Context, facts: FileFacts, scope: ScopeFacts, forwards: list[CallFact], torch_name: str,
             anchor: cst.CSTNode) -> Optional[Fix]:
    """Wrap the statements of `anchor`'s block from the first to the last forward pass in
    `with torch.no_grad():`, unless they also train or switch grad themselves."""
    block = facts.block_of(anchor)
    if block is None:
        return None
    body = list(block.body)
    indices = []
    for call in forwards:
        stmt = facts.top_statement_in(call.node, block)
        if stmt is None:
            return None
        indices.append(body.index(stmt))
    first, last = min(indices), max(indices)
    statements = body[first : last + 1]
    if any(isinstance(s, (cst.FunctionDef, cst.ClassDef)) for s in statements):
        return None
    inside = [facts.orders[n] for s in statements for n in (s, *all_descendants(s)) if n in facts.orders]
    if inside:
        low, high = min(inside), max(inside)
        wrapped = {c.order for c in forwards}  # (a call of a switched-off trainer is one of them)
        if any(low <= o <= high and o not in wrapped for o in (*facts.training_orders(scope), *scope.grad_off)):
            return None
    changes = wrap_statements(statements, context, torch_name)
    if not changes:
        return None
    return Fix("Run the forward passes under `with torch.no_grad():`", changes, safe=False, imports=("torch",))


def wrap_loops_fix(context: Context, facts: FileFacts, loops: list[cst.CSTNode], torch_name: str) -> Optional[Fix]:
    """Wrap each statement holding one of `loops` (an evaluation loop) in `with torch.no_grad():`."""
    statements: list[cst.CSTNode] = []
    for loop in loops:
        stmt = facts.statement_of(loop)
        if stmt is not None and stmt not in statements:
            statements.append(stmt)
    changes: list[Replace] = []
    for stmt in statements:
        wrapped = wrap_statements([stmt], context, torch_name)
        if wrapped is None:
            return None
        changes.extend(wrapped)
    if not changes:
        return None
    return Fix("Wrap the evaluation loop in `with torch.no_grad():`", changes, safe=False, imports=("torch",))
