"""A rule is found from its code in one step: module, class, page, fixtures and tests all follow from it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from torchlint.lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
FAMILY_FOLDERS = {
    "0": "meta", "1": "data", "2": "sync", "3": "autograd", "4": "loops",
    "5": "memory", "6": "device", "7": "backends", "8": "deprecated",
}  # fmt: skip
RULES = all_rules()


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


@pytest.mark.parametrize("code", sorted(RULES))
def test_rule_lives_where_its_code_and_name_say(code: str) -> None:
    rule = RULES[code]
    folder = FAMILY_FOLDERS[code[2]]
    module = sys.modules[rule.__module__]
    assert rule.__module__ == f"torchlint.rules.{folder}.{rule.name.replace('-', '_')}"
    assert rule.__name__ == _camel(rule.name)
    assert Path(module.__file__).parent.name == folder
    assert (ROOT / "rules" / f"{code}.md").exists()
    for fixture in ("bad.py", "good.py", "snapshot.txt"):
        assert (ROOT / "fixtures" / "lint" / code / fixture).exists(), fixture
    assert (ROOT / "tests" / "rules" / folder).is_dir()


def _rule_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "torchlint" / "rules").rglob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", _rule_modules(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rule_modules_stay_small_and_ask_the_semantic_model(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 320, "move analysis into torchlint/semantic"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torchlint.rules."):
            # a rule may use its own family's helpers, never another rule's module
            assert node.module.endswith("._common") and node.module.split(".")[2] == path.parent.name, node.module


def test_one_rule_per_module() -> None:
    per_module: dict[str, list[str]] = {}
    for code, rule in RULES.items():
        per_module.setdefault(rule.__module__, []).append(code)
    assert {m: c for m, c in per_module.items() if len(c) > 1} == {}
