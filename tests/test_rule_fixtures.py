"""Every rule against its fixtures: fixtures/lint/<CODE>/{bad.py, good.py, bad.fixed.py}.

bad.py marks each line that must be reported with a trailing `# expect: CODE` comment; good.py holds
near misses that must stay silent; bad.fixed.py is what `--fix --unsafe-fixes` must make of bad.py;
snapshot.txt pins every finding on bad.py: position, message and fix. After a deliberate change, rewrite
the snapshots with `python -m pytest tests/test_rule_fixtures.py --update-snapshots` and review the diff.
"""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst
import pytest

from torchlint.lint.api import lint_source
from torchlint.lint.rule import all_rules

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lint"
CODES = sorted(all_rules())
_EXPECT = re.compile(r"#.*\bexpect:\s*(?P<codes>TL\d{3}(?:\s*,\s*TL\d{3})*)")


def _selection(code: str) -> list[str]:
    # An unused-noqa finding needs the code its directive names to be selected too.
    return [code, "TL101"] if code == "TL001" else [code]


def _expected_lines(text: str, code: str) -> list[int]:
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match and code in re.split(r"\s*,\s*", match.group("codes")):
            lines.append(number)
    return lines


def test_every_rule_has_fixtures() -> None:
    missing = [code for code in CODES if not (FIXTURES / code / "bad.py").exists() or not (FIXTURES / code / "good.py").exists()]
    assert not missing, f"rules without fixtures/lint/<CODE>/bad.py and good.py: {missing}"


@pytest.mark.parametrize("code", CODES)
def test_bad_fixture_reports_marked_lines(code: str) -> None:
    path = FIXTURES / code / "bad.py"
    text = path.read_text(encoding="utf-8")
    expected = _expected_lines(text, code)
    assert expected, f"{path} marks no line with '# expect: {code}'"
    result = lint_source(text, str(path), select=_selection(code))
    assert result.error is None, result.error
    assert not result.notes, result.notes
    assert [f.line for f in result.findings if f.code == code] == expected


@pytest.mark.parametrize("code", CODES)
def test_good_fixture_is_silent(code: str) -> None:
    path = FIXTURES / code / "good.py"
    result = lint_source(path.read_text(encoding="utf-8"), str(path), select=_selection(code))
    assert result.error is None, result.error
    assert [(f.line, f.message) for f in result.findings if f.code == code] == []


@pytest.mark.parametrize("code", [c for c in CODES if all_rules()[c].fix_safety.value != "none"])
def test_fix_matches_expected_and_is_idempotent(code: str) -> None:
    bad = FIXTURES / code / "bad.py"
    expected_path = FIXTURES / code / "bad.fixed.py"
    assert expected_path.exists(), f"{code} has a fix but no {expected_path}"
    result = lint_source(bad.read_text(encoding="utf-8"), str(bad), select=_selection(code), unsafe_fixes=True)
    assert not result.notes, result.notes
    assert result.fixed_text == expected_path.read_text(encoding="utf-8")
    cst.parse_module(result.fixed_text)
    again = lint_source(result.fixed_text, str(bad), select=_selection(code), unsafe_fixes=True)
    assert again.fixed_text is None, "a second fix run changed the file"


@pytest.mark.parametrize("code", [c for c in CODES if all_rules()[c].fix_safety.value == "unsafe"])
def test_unsafe_fix_needs_opt_in(code: str) -> None:
    bad = FIXTURES / code / "bad.py"
    result = lint_source(bad.read_text(encoding="utf-8"), str(bad), select=_selection(code), fix=True)
    assert result.fixed_text is None


def _snapshot(code: str, text: str, path: Path) -> str:
    """Every finding of `code` on `text` as stable, reviewable lines: where, what, and the fix's edits."""
    result = lint_source(text, str(path), select=_selection(code))
    lines = []
    for finding in sorted(result.findings, key=lambda f: f.sort_key):
        if finding.code != code:
            continue
        lines.append(
            f"{finding.line}:{finding.column}-{finding.end_line}:{finding.end_column} {finding.code} {finding.message}"
        )
        if finding.fix is not None:
            safety = "safe" if finding.fix.safe else "unsafe"
            lines.append(f"    fix ({safety}): {finding.fix.message}")
            for edit in finding.fix.edits:
                lines.append(f"        {edit.row}:{edit.column}-{edit.end_row}:{edit.end_column} -> {edit.content!r}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("code", CODES)
def test_findings_match_snapshot(code: str, update_snapshots: bool) -> None:
    bad = FIXTURES / code / "bad.py"
    snapshot = FIXTURES / code / "snapshot.txt"
    current = _snapshot(code, bad.read_text(encoding="utf-8"), bad)
    if update_snapshots:
        snapshot.write_text(current, encoding="utf-8")
        return
    assert snapshot.exists(), f"no {snapshot}: run pytest {__file__} --update-snapshots"
    assert current == snapshot.read_text(encoding="utf-8")
