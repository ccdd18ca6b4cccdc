"""What the rules of this family share."""

from __future__ import annotations


from typing import Iterator, Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.rule import Replace, Rule
from torchlint.lint.walk import semantic_children
from torchlint.semantic.grad_mode import FileFacts, file_facts


FAMILY = "Autograd and inference"


class FactsCollector(Rule):
    """Base of the rules that share `FileFacts`: the first such rule whose text gate passes collects them."""

    def gate(self, text: str) -> bool:
        return True

    def visit_Module(self, node: cst.Module) -> None:
        self._collecting = False
        if getattr(self.context, "_grad_file_facts", None) is not None:
            return
        if not self.gate(self.context.source.text):
            return
        self.context._grad_file_facts = FileFacts(self.context)  # type: ignore[attr-defined]
        self._collecting = True
        self._facts = self.context._grad_file_facts  # type: ignore[attr-defined]

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if self._collecting:
            parent = self.context.parents.get(node)
            if type(parent) is cst.FunctionDef:
                self._facts.enter_body(parent)
            elif type(parent) is cst.ClassDef:
                self._facts.enter_class_body(parent)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if self._collecting:
            parent = self.context.parents.get(node)
            if type(parent) is cst.FunctionDef:
                self._facts.leave_body()
            elif type(parent) is cst.ClassDef:
                self._facts.leave_class_body()

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.visit_IndentedBlock(node)  # type: ignore[arg-type]

    def leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.leave_IndentedBlock(node)  # type: ignore[arg-type]

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self._collecting:
            self._facts.enter_class(node)

    def visit_With(self, node: cst.With) -> None:
        if self._collecting:
            self._facts.enter_with(node)

    def leave_With(self, node: cst.With) -> None:
        if self._collecting:
            self._facts.leave_with(node)

    def visit_For(self, node: cst.For) -> None:
        if self._collecting:
            self._facts.enter_loop(node)

    def leave_For(self, node: cst.For) -> None:
        if self._collecting:
            self._facts.leave_loop(node)

    visit_While = visit_For  # type: ignore[assignment]
    leave_While = leave_For  # type: ignore[assignment]
    visit_ListComp = visit_For  # type: ignore[assignment]
    leave_ListComp = leave_For  # type: ignore[assignment]
    visit_SetComp = visit_For  # type: ignore[assignment]
    leave_SetComp = leave_For  # type: ignore[assignment]
    visit_DictComp = visit_For  # type: ignore[assignment]
    leave_DictComp = leave_For  # type: ignore[assignment]
    visit_GeneratorExp = visit_For  # type: ignore[assignment]
    leave_GeneratorExp = leave_For  # type: ignore[assignment]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._collecting:
            self._facts.enter_attribute(node)

    def visit_Yield(self, node: cst.Yield) -> None:
        if self._collecting:
            self._facts.enter_yield(node)

    def visit_Call(self, node: cst.Call) -> None:
        if self._collecting:
            self._facts.enter_call(node)

    def leave_Module(self, node: cst.Module) -> None:
        facts = file_facts(self.context)
        if facts is not None and self.gate(self.context.source.text):
            facts.finish()  # the walk is over: every rule sees complete facts
            self.check(facts)

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
