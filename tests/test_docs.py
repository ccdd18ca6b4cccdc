"""The reference pages under rules/ and the README's rule table are generated from the rule classes."""

from __future__ import annotations


import pytest

from lint_testing import ROOT
from torchlint.docs import expected_files
from torchlint.lint.rule import FixSafety, all_rules


def test_generated_files_are_up_to_date() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, content in expected_files(ROOT).items()
        if not path.exists() or path.read_text(encoding="utf-8") != content
    ]
    pages = {path.name for path in expected_files(ROOT) if path.parent.name == "rules"}
    extra = sorted(p.name for p in (ROOT / "rules").glob("TL*.md") if p.name not in pages)
    assert not stale and not extra, f"run `python -m torchlint.docs` (stale: {stale}, no such rule: {extra})"


def test_a_file_that_does_not_parse_has_a_page_too() -> None:
    assert (ROOT / "rules" / "TL000.md").read_text(encoding="utf-8").startswith("# TL000 syntax-error")


@pytest.mark.parametrize("code", sorted(all_rules()))
def test_rule_metadata_is_complete(code: str) -> None:
    rule = all_rules()[code]
    for attr in ("name", "family", "summary", "message", "explanation", "bad", "good"):
        assert getattr(rule, attr, "").strip(), f"{code} has no {attr}"
    assert "\n" not in rule.message.strip(), f"{code}: the message must be one line"
    assert rule.name == rule.name.lower() and " " not in rule.name
    if rule.fix_safety is not FixSafety.NONE:
        assert rule.fix_notes.strip(), f"{code} has a fix but no fix_notes"
