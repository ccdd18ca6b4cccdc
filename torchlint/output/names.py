"""Rule names by code, for the formats that show them (loads the rules only when asked)."""

from __future__ import annotations

from torchlint.lint.finding import SYNTAX_ERROR, SYNTAX_ERROR_NAME


def rule_name(code: str) -> str:
    if code == SYNTAX_ERROR:
        return SYNTAX_ERROR_NAME
    from torchlint.lint.rule import all_rules

    rule = all_rules().get(code)
    return rule.name if rule is not None else ""
