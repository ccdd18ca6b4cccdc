"""A small scanner of Python source lines (strings, f-strings, brackets, comments, backslashes) for text
the standard tokenizer cannot read: notebook cells with IPython magics, syntax newer than the running
Python (f-strings that nest quotes, from 3.12)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Union

_PREFIX = re.compile(r"[A-Za-z]{1,2}$")


@dataclass
class _String:
    quote: str
    fstring: bool


@dataclass
class _Field:
    """A replacement field of an f-string: code up to its closing brace."""

    depth: int = 0
    spec: bool = False  # after the `:` that starts its format spec: text, with fields of its own


class LineScanner:
    """Tracks, line by line, whether the next line starts a logical line (outside brackets and strings,
    not after a backslash), and where each line's comment starts."""

    def __init__(self) -> None:
        self.depth = 0  # open brackets in code outside any string
        self.stack: list[Union[_String, _Field]] = []
        self.continued = False

    @property
    def at_start(self) -> bool:
        return self.depth == 0 and not self.stack and not self.continued

    def feed(self, line: str) -> Optional[int]:
        """Read one line; the column of its comment, if it has one outside strings."""
        body = line.rstrip("\r\n")
        comment = None
        i, n = 0, len(body)
        self.continued = False
        while i < n:
            char = body[i]
            top = self.stack[-1] if self.stack else None
            if isinstance(top, _String) or (isinstance(top, _Field) and top.spec):
                if char == "\\":
                    i += 2
                    continue
                if isinstance(top, _String) and body.startswith(top.quote, i):
                    self.stack.pop()
                    i += len(top.quote)
                    continue
                fstring = isinstance(top, _Field) or top.fstring  # type: ignore[union-attr]
                if fstring and char == "{":
                    if body.startswith("{{", i) and isinstance(top, _String):
                        i += 2
                        continue
                    self.stack.append(_Field())
                elif isinstance(top, _Field) and char == "}":
                    self.stack.pop()
                i += 1
                continue
            if char == "#":
                comment = i
                break
            if char in "\"'":
                triple = body[i : i + 3]
                quote = triple if triple in ('"""', "'''") else char
                prefix = _PREFIX.search(body, 0, i)
                fstring = prefix is not None and "f" in prefix.group(0).lower()
                self.stack.append(_String(quote, fstring))
                i += len(quote)
                continue
            if isinstance(top, _Field):
                if char in "([{":
                    top.depth += 1
                elif char in ")]}":
                    if top.depth == 0 and char == "}":
                        self.stack.pop()
                    else:
                        top.depth = max(0, top.depth - 1)
                elif char == ":" and top.depth == 0 and not body.startswith(":=", i):
                    top.spec = True
                elif char == "!" and top.depth == 0 and not body.startswith("!=", i):
                    top.spec = True  # a conversion (!r), then maybe a spec: text up to the brace
            elif char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            i += 1
        if self.stack and not any(isinstance(f, _String) and len(f.quote) == 3 for f in self.stack):
            if body.endswith("\\"):
                return comment  # a string continued by a backslash
            self.stack.clear()  # an unterminated one-line string: a syntax error the parser reports
        self.continued = not self.stack and comment is None and body.endswith("\\")
        return comment
