"""Applying fixes: all of a file's non-overlapping fixes at once, re-parsed, repeated until nothing changes."""

from __future__ import annotations

import ast
from collections import Counter
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

from torchlint.lint.finding import FileResult, Finding, FixEdit
from torchlint.lint.notebook import mask_magics
from torchlint.lint.source import Edit, SourceFile

if TYPE_CHECKING:
    import libcst as cst

MAX_ROUNDS = 10


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and bool(finding.fix.edits) and (finding.fix.safe or unsafe)


def _choose(findings: Sequence[Finding], unsafe: bool, source: SourceFile, skip: set[tuple[str, int]]) -> list[Finding]:
    """Fixes whose edits overlap no edit already chosen (identical edits, such as one import, are shared).

    At most one fix changes a given line in a round: each fix fits its line to the line length alone, so
    a second one on the same line waits for the next round, where it sees the line as the first left it."""
    chosen: list[Finding] = []
    taken: list[Edit] = []
    rows: set[int] = set()
    for finding in sorted(findings, key=lambda f: f.sort_key):
        if not applicable(finding, unsafe) or (finding.code, finding.line) in skip:
            continue
        fix_edits = finding.fix.edits  # type: ignore[union-attr]
        edits = [e.as_edit() for e in fix_edits]
        if any(source.edit_spans_cells(e) for e in edits):
            continue
        if any(_overlaps(e, t) and e != t for e in edits for t in taken):
            continue
        own_rows = {row for e in fix_edits if e.as_edit() not in taken and not _whole_lines(e) for row in range(e.row, e.end_row + 1)}
        if own_rows & rows:
            continue
        chosen.append(finding)
        rows |= own_rows
        taken.extend(e for e in edits if e not in taken)
    return chosen


def _whole_lines(edit: FixEdit) -> bool:
    """An insertion of whole lines (an import, a statement) leaves the line it stands before as it was."""
    return edit.start == edit.end and edit.column == 1 and edit.content.endswith("\n")


def _overlaps(a: Edit, b: Edit) -> bool:
    if a.start == a.end or b.start == b.end:  # insertions collide only at the same point
        return a.start == b.start and a.end == b.end or (b.start < a.start < b.end) or (a.start < b.start < a.end)
    return a.start < b.end and b.start < a.end


def _edits_of(findings: Sequence[Finding]) -> list[Edit]:
    unique: list[Edit] = []
    for finding in findings:
        for edit in finding.fix.edits:  # type: ignore[union-attr]
            as_edit = edit.as_edit()
            if as_edit not in unique:
                unique.append(as_edit)
    return unique


def _compiles(text: str) -> bool:
    try:
        compile(text, "<cell>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _cells_intact(before: SourceFile, after: SourceFile) -> bool:
    """Each notebook cell a fix changed still parses on its own, if it did before: a fix must not leave
    half a statement in one cell (the next cell would start indented, say)."""
    old = {c.index: c for c in before.cells}
    for cell in after.cells:
        previous = old.get(cell.index)
        if previous is None or previous.original == cell.original:
            continue
        if _compiles(mask_magics(previous.original)) and not _compiles(mask_magics(cell.original)):
            return False
    return True


def _parses(source: SourceFile, before: SourceFile) -> bool:
    from torchlint.lint.engine import parse  # libcst loads only when a file is fixed

    try:
        parse(source)
    except Exception:
        return False
    return not source.is_notebook or _cells_intact(before, source)


def fix_file(
    source: SourceFile, lint: Callable[[SourceFile], FileResult], unsafe: bool
) -> tuple[SourceFile, FileResult]:
    """Fix `source` until no applicable fix remains; returns the fixed source and its final lint result."""
    result = lint(source)
    fixable_before = Counter(f.code for f in result.findings if applicable(f, unsafe))
    fixed_by_code: Counter[str] = Counter()
    notes: list[str] = []
    skip: set[tuple[str, int]] = set()
    for _ in range(MAX_ROUNDS):
        chosen = _choose(result.findings, unsafe, source, skip)
        if not chosen:
            break
        candidate = source.with_edits(_edits_of(chosen))
        if not _parses(candidate, source):
            # Find the culprits one by one; keep the fixes that parse on their own.
            candidate = None
            for finding in chosen:
                alone = source.with_edits(_edits_of([finding]))
                if _parses(alone, source):
                    candidate, chosen = alone, [finding]
                    break
                skip.add((finding.code, finding.line))
                whole = "a notebook cell" if source.is_notebook else "the result"
                notes.append(f"fix for {finding.code} at line {finding.line} dropped: {whole} would not parse")
            if candidate is None:
                break
        if candidate.text == source.text:
            break
        source = candidate
        fixed_by_code.update(f.code for f in chosen)
        result = lint(source)
    result.fixed = sum(fixed_by_code.values())
    # More fixes of a rule than it had fixable findings at the start: the surplus appeared after fixing.
    result.fixed_new = sum(max(0, n - fixable_before[code]) for code, n in fixed_by_code.items())
    result.notes.extend(notes)
    return source, result


# -- Building fixes that a formatter would leave alone ------------------------------------------------


def add_keyword(call: "cst.Call", name: str, value_code: "Union[str, cst.BaseExpression]") -> "cst.Call":
    """`call` with `name=value_code` set, laid out as the call already is.

    An existing `name=` keyword gets the new value in place. Otherwise the keyword is appended: on the same
    line for a call written on one line; on a line of its own, at the arguments' indentation, for a call
    with one argument per line (or aligned under the first one), keeping the call's trailing-comma style
    and any comment after the last argument on that argument's line."""
    import libcst as cst

    value = cst.parse_expression(value_code) if isinstance(value_code, str) else value_code
    args = list(call.args)
    for index, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[index] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if not args:
        return call.with_changes(args=[new], whitespace_before_args=cst.SimpleWhitespace(""))
    last = args[-1]
    separator = _line_separator(call)
    trailing = last.comma if isinstance(last.comma, cst.Comma) else None
    if separator is None:  # all on one line
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        if trailing is not None:  # `f(a, b,)` keeps its trailing comma, after the new argument
            new = new.with_changes(comma=trailing)
        # A line break before `)` (arguments on a line of their own) stays before `)`.
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        last = last.with_changes(comma=comma, whitespace_after_arg=cst.SimpleWhitespace(""))
        return call.with_changes(args=[*args[:-1], last, new])
    # One argument per line: whatever closed the last argument's line (its comment, the newline and
    # the closing parenthesis's indentation) now closes the new argument's line.
    closing = trailing.whitespace_after if trailing is not None else last.whitespace_after_arg
    if not isinstance(closing, cst.ParenthesizedWhitespace):  # `f(a,\n  b)`: `)` right after the last one
        after_last = separator
        closing_new = closing
    else:
        after_last = separator.with_changes(first_line=closing.first_line)
        closing_new = closing.with_changes(first_line=cst.TrailingWhitespace())
    if trailing is not None:
        last = last.with_changes(comma=trailing.with_changes(whitespace_after=after_last))
        new = new.with_changes(comma=cst.Comma(whitespace_after=closing_new))
    else:
        last = last.with_changes(
            comma=cst.Comma(whitespace_after=after_last), whitespace_after_arg=cst.SimpleWhitespace("")
        )
        new = new.with_changes(whitespace_after_arg=closing_new)
    return call.with_changes(args=[*args[:-1], last, new])


def _line_separator(call: "cst.Call") -> "Optional[cst.ParenthesizedWhitespace]":
    """The line break (without any comment) that starts each argument of a call laid out one per line;
    None for a call written on one line."""
    import libcst as cst

    candidates = [a.comma.whitespace_after for a in call.args[:-1] if isinstance(a.comma, cst.Comma)]
    if len(call.args) == 1:
        candidates.append(call.whitespace_before_args)
    for whitespace in candidates:
        if isinstance(whitespace, cst.ParenthesizedWhitespace):
            return whitespace.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    return None


LINE_LENGTH = 88  # ruff's and black's default: a fix must not push a line that fitted past it


def wrap_call(call: "cst.Call", indent: str, one_per_line: bool, unit: str = "    ") -> "cst.Call":
    """A one-line call split the way ruff's formatter splits one that is too long: its arguments on one
    line of their own, or (`one_per_line`) one argument a line with a trailing comma; `)` back at `indent`
    (relative to the enclosing block's indentation, like libcst's own continuation lines)."""
    import libcst as cst

    def line_break(extra: str) -> "cst.ParenthesizedWhitespace":
        return cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace(indent + extra))

    args = list(call.args)
    if not args:
        return call
    inner = line_break(unit)
    between = inner if one_per_line else cst.SimpleWhitespace(" ")
    laid_out = [a.with_changes(comma=cst.Comma(whitespace_after=between), whitespace_after_arg=cst.SimpleWhitespace("")) for a in args[:-1]]
    last = args[-1].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
    if one_per_line:
        last = last.with_changes(comma=cst.Comma(whitespace_after=line_break("")))
    else:
        last = last.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=line_break(""))
    return call.with_changes(args=[*laid_out, last], whitespace_before_args=inner)
