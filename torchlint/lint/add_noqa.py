"""`--add-noqa`: silence every current finding with a `# noqa: CODE` on its line, to adopt torchlint gradually."""

from __future__ import annotations

import io
import re
import tokenize

from torchlint.lint.finding import SYNTAX_ERROR, FileResult, FixEdit
from torchlint.lint.source import Edit, SourceFile, line_starts
from torchlint.lint.suppress import find_suppressions

UNUSED_NOQA = "TL001"

_TRAILING = re.compile(r"[ \t]*(\r\n|\r|\n)?$")


def _lines_inside_strings(text: str) -> set[int]:
    """Lines whose end falls inside a multi-line string: a comment cannot go there."""
    inside: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING or getattr(tokenize, "FSTRING_MIDDLE", None) == tok.type:
                inside.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return inside


def add_noqa(source: SourceFile, result: FileResult) -> tuple[SourceFile, int]:
    """The source with directives added for `result`'s findings, and how many lines changed.

    A directive with unused codes (a TL001 finding) loses them as it is rewritten, as TL001's own fix
    would, so that one run leaves a file that checks clean."""
    codes_by_line: dict[int, list[str]] = {}
    unused_by_line: dict[int, FixEdit] = {}
    for finding in result.findings:
        if finding.code == UNUSED_NOQA:
            if finding.fix is not None and len(finding.fix.edits) == 1:
                unused_by_line[finding.line] = finding.fix.edits[0]
            continue
        if finding.code == SYNTAX_ERROR:
            continue  # nothing silences a file that does not parse
        codes = codes_by_line.setdefault(finding.noqa_line, [])
        if finding.code not in codes:
            codes.append(finding.code)
    if not codes_by_line and not unused_by_line:
        return source, 0
    text = source.text
    starts = line_starts(text)
    existing = find_suppressions(text).by_line
    blocked = _lines_inside_strings(text)
    edits: list[Edit] = []
    for line in sorted(set(codes_by_line) | set(unused_by_line)):
        codes = codes_by_line.get(line, [])
        if line in blocked:
            continue
        directive = existing.get(line)
        if directive is not None:
            if directive.codes is None:
                continue  # a blanket noqa already silences everything
            unused = unused_by_line.get(line)
            if unused is not None and not codes:
                edits.append(unused.as_edit())  # nothing to add: just drop the unused codes
                continue
            kept = list(directive.codes)
            if unused is not None:
                kept = _codes_in(unused.content)
            merged = kept + [c for c in codes if c not in kept]
            edits.append(Edit(directive.start, directive.end, "# noqa: " + ", ".join(merged)))
            continue
        if not codes:
            continue
        end = starts[line] if line < len(starts) else len(text)
        segment = text[starts[line - 1] : end]
        body = _TRAILING.sub("", segment)
        if body.endswith("\\"):
            continue  # a backslash continuation: a comment here would end the statement
        at = starts[line - 1] + len(body)
        edits.append(Edit(at, at, "  # noqa: " + ", ".join(sorted(codes))))
    edits = [e for e in edits if not source.edit_spans_cells(e) and text[e.start : e.end] != e.content]
    return (source.with_edits(edits), len(edits)) if edits else (source, 0)


def _codes_in(directive: str) -> list[str]:
    """The codes a (rewritten) `# noqa: A, B` directive keeps; none for an emptied one."""
    _, _, codes = directive.partition(":")
    return [c.strip() for c in codes.split(",") if c.strip()]
