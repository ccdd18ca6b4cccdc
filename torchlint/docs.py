"""Reference pages for the rules, generated from the rule classes (`python -m torchlint.docs` rewrites them)."""

from __future__ import annotations

import sys
from pathlib import Path

from torchlint.lint.finding import SYNTAX_ERROR, SYNTAX_ERROR_NAME
from torchlint.lint.rule import FixSafety, Rule, all_rules

_FIX_WORDS = {
    FixSafety.NONE: "No autofix.",
    FixSafety.SAFE: "Safe autofix: applied by `torchlint check --fix`.",
    FixSafety.UNSAFE: "Unsafe autofix: applied only with `torchlint check --fix --unsafe-fixes`, because it can change behaviour.",
    FixSafety.SOMETIMES: "Autofix: safe in some cases (applied by `--fix`), unsafe in others (`--unsafe-fixes`).",
}


def render_page(rule: type[Rule]) -> str:
    """The Markdown reference page of one rule."""
    parts = [
        f"# {rule.code}: {rule.name}\n",
        f"Family: {rule.family}. {'On by default.' if rule.default_enabled else 'Off by default: enable with `--extend-select ' + rule.code + '`.'}\n",
        "## What it flags\n",
        rule.summary.strip() + "\n",
        "Message: " + rule.message.strip() + "\n",
        "## Why it is slow\n",
        rule.explanation.strip() + "\n",
        "## Example\n",
        "```python\n" + rule.bad.strip("\n") + "\n```\n",
        "## Use instead\n",
        "```python\n" + rule.good.strip("\n") + "\n```\n",
        "## Fix safety\n",
        (_FIX_WORDS[rule.fix_safety] + (" " + rule.fix_notes.strip() if rule.fix_notes else "")).strip() + "\n",
        "## When it is a false positive\n",
        (rule.false_positives.strip() or "None known.") + "\n",
        f"Silence one finding with `# noqa: {rule.code}` on the reported line (the first line of its statement), "
        f"or the rule for some files with `per-file-ignores`.\n",
    ]
    return "\n".join(parts)


def rules_table() -> str:
    """The Markdown table of every rule, grouped by family, for the README."""
    lines = []
    by_family: dict[str, list[type[Rule]]] = {}
    for rule in all_rules().values():
        by_family.setdefault(rule.family, []).append(rule)
    for family, rules in by_family.items():
        lines.append(f"**{family}**\n")
        lines.append("| Code | Name | What it flags | Fix |")
        lines.append("|---|---|---|---|")
        for rule in rules:
            fix = {"none": "", "safe": "safe", "unsafe": "unsafe", "sometimes": "safe/unsafe"}[rule.fix_safety.value]
            default = "" if rule.default_enabled else " (off by default)"
            lines.append(f"| [{rule.code}](rules/{rule.code}.md) | `{rule.name}`{default} | {rule.summary} | {fix} |")
        lines.append("")
    return "\n".join(lines)


README_START = "<!-- rules-table:start -->"
README_END = "<!-- rules-table:end -->"


def syntax_error_page() -> str:
    """The page of TL000: not a rule but the finding for a file that cannot be parsed."""
    return (
        f"# {SYNTAX_ERROR} {SYNTAX_ERROR_NAME}\n\n"
        "A file that does not parse as Python is reported as one finding at the first error, in every output "
        "format (text, JSON, SARIF, GitHub annotations), and the other files are still linted. It is not a rule "
        "of the catalogue and has no fix.\n\n"
        "## What to do\n\n"
        "Fix the syntax error. A file written for a newer Python than the one running torchlint is reported too: "
        "run torchlint with the project's Python. A file too large or too deeply nested to lint in bounded time "
        "gets an error line naming the limit instead (see the README's configuration section).\n"
    )


def expected_files(root: Path) -> dict[Path, str]:
    """Every generated file and its expected content."""
    files = {root / "rules" / f"{code}.md": render_page(rule) for code, rule in all_rules().items()}
    files[root / "rules" / f"{SYNTAX_ERROR}.md"] = syntax_error_page()
    readme = root / "README.md"
    if readme.exists():
        text = readme.read_text(encoding="utf-8")
        if README_START in text and README_END in text:
            head, _, rest = text.partition(README_START)
            _, _, tail = rest.partition(README_END)
            files[readme] = f"{head}{README_START}\n{rules_table()}\n{README_END}{tail}"
    return files


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    (root / "rules").mkdir(exist_ok=True)
    expected = expected_files(root)
    for path in sorted((root / "rules").glob("TL*.md")):
        if path not in expected:
            path.unlink()
    for path, content in expected.items():
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8")
            print(f"wrote {path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
