"""Ask the semantic model a question about each `probe(expr)` in a snippet, through a throwaway rule."""

from __future__ import annotations

from typing import Any, Callable

import libcst as cst

from torchlint.lint.api import lint_source
from torchlint.lint.rule import _REGISTRY, Rule
from torchlint.semantic.model import SemanticModel

Question = Callable[[SemanticModel, cst.Call, cst.BaseExpression], Any]


def ask(source: str, question: Question) -> list[str]:
    """The answer to `question(model, probe_call, first_argument)` for every `probe(...)`, as text."""

    class _Probe(Rule, register=False):
        code = "TL998"
        name = "semantic-probe"
        family = "Suppressions"
        summary = message = explanation = bad = good = "probe"

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "probe":
                argument = node.args[0].value if node.args else node
                self.report(node, str(question(self.semantic, node, argument)))

    _REGISTRY["TL998"] = _Probe
    try:
        result = lint_source(source, select=["TL998"])
    finally:
        _REGISTRY.pop("TL998", None)
    assert result.error is None and not result.notes, (result.error, result.notes)
    return [f.message for f in sorted(result.findings, key=lambda f: f.sort_key)]
