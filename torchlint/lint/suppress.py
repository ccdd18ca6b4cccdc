"""Suppression comments, found by line with `tokenize` (so `# noqa` inside a string is not one).

- `# noqa` on a line silences every finding reported there;
- `# noqa: TL101, TL2` silences the listed codes (a prefix silences its family);
- `# torchlint: noqa` as a comment line of its own silences the whole file (not at the end of a line of
  code, nor inside a string).
Codes of other tools in the same comment (`# noqa: E501, TL101`) are left to those tools.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Optional

from torchlint.lint.scan import LineScanner
from torchlint.lint.source import line_starts

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:\s*,\s*[A-Z]+[0-9]*)*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(r"#\s*torchlint\s*:\s*noqa\b", re.IGNORECASE)
_SPLIT = re.compile(r"\s*,\s*")


@dataclass(frozen=True)
class Directive:
    line: int
    codes: Optional[tuple[str, ...]]  # None: a blanket `# noqa`
    start: int  # offset of the `#` in the file's text
    end: int  # offset just past the directive's last code

    def matches(self, code: str) -> bool:
        if self.codes is None:
            return True
        return any(code.startswith(c) for c in self.codes)

    def own_codes(self) -> tuple[str, ...]:
        return tuple(c for c in self.codes or () if c.startswith("TL"))


@dataclass(frozen=True)
class Suppressions:
    by_line: dict[int, Directive]
    whole_file: bool


def _comments(text: str) -> list[tuple[int, int, str]]:
    """(line, column, comment text) of every comment. When tokenize fails (syntax newer than this Python),
    a scanner that knows strings and f-strings finds them instead: a `#` inside a string is no comment."""
    try:
        return [
            (tok.start[0], tok.start[1], tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        found = []
        scanner = LineScanner()
        for number, line in enumerate(text.splitlines(), start=1):
            col = scanner.feed(line)
            if col is not None:
                found.append((number, col, line[col:]))
        return found


def find_suppressions(text: str) -> Suppressions:
    if "noqa" not in text and "NOQA" not in text:
        return Suppressions({}, False)
    starts = line_starts(text)
    by_line: dict[int, Directive] = {}
    whole_file = False
    for line, col, comment in _comments(text):
        if _FILE_NOQA.match(comment):
            line_text = text[starts[line - 1] : starts[line - 1] + col]
            whole_file = whole_file or line_text.strip() == ""  # a comment line of its own
            continue
        match = _NOQA.search(comment)
        if match is None:
            continue
        codes = match.group("codes")
        base = starts[line - 1] + col
        by_line[line] = Directive(
            line=line,
            codes=tuple(c.upper() for c in _SPLIT.split(codes.strip())) if codes else None,
            start=base + match.start(),
            end=base + match.end(),
        )
    return Suppressions(by_line, whole_file)
