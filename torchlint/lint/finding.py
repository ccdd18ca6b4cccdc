"""What linting a file produces: findings (with their fixes) and problems reading it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from torchlint.lint.source import Edit


@dataclass(frozen=True)
class FixEdit:
    """A text edit with both offsets (to apply it) and 1-based line/column positions (to show it)."""

    start: int
    end: int
    content: str
    row: int
    column: int
    end_row: int
    end_column: int

    def as_edit(self) -> Edit:
        return Edit(self.start, self.end, self.content)


@dataclass(frozen=True)
class FindingFix:
    message: str
    safe: bool
    edits: tuple[FixEdit, ...]


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    line: int  # 1-based
    column: int  # 1-based, in characters
    end_line: int
    end_column: int
    noqa_line: int  # where `# noqa` silences it: the first line of the enclosing statement
    fix: Optional[FindingFix] = None

    @property
    def sort_key(self) -> tuple[int, int, str]:
        return (self.line, self.column, self.code)


@dataclass
class FileResult:
    """The outcome for one file: findings, or the one-line reason it could not be linted."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    error: Optional[str] = None
    notes: list[str] = field(default_factory=list)  # e.g. a fix dropped because it would not parse
    fixed: int = 0  # findings fixed in this run
    fixed_new: int = 0  # of those, how many only appeared once other fixes had been applied
    new_text: Optional[bytes] = None  # set when fixing changed the file (not yet written)
    original_text: Optional[str] = None  # kept for --diff
    fixed_text: Optional[str] = None
    cells: list[tuple[int, int]] = field(default_factory=list)  # notebooks: (cell index, its first line)
    cacheable: bool = True  # False when the outcome depends on the machine (a time limit hit), not the text


# A file that does not parse is reported as a finding of this code, in every output format. It is no rule
# (there is nothing to select, ignore or silence: nothing else can be checked in such a file).
SYNTAX_ERROR = "TL000"
SYNTAX_ERROR_NAME = "syntax-error"


def syntax_error_finding(line: int, column: int, reason: str) -> Finding:
    return Finding(SYNTAX_ERROR, f"syntax error: {reason}", line, column, line, column, line)
