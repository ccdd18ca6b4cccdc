"""Jupyter notebooks as Python: IPython magics masked in place, and the file's own JSON style kept on write.

Masking turns each magic into Python of the same length (offsets map back to the cell unchanged). Only
the start of a logical line can be a magic: a line inside brackets, a string or after a backslash that
starts with `%`, `!=` or `?` is Python, and the lines a magic continues with `\\` belong to the magic.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional

from torchlint.lint.scan import LineScanner

# A line magic or shell escape, possibly assigned (`files = !ls`), at the start of a logical line.
_MAGIC = re.compile(r"^(\s*(?:[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*)?)([%!?].*)$")
# Cell magics whose body is the cell's own Python (timed, profiled, its output captured).
_PYTHON_CELL_MAGIC = re.compile(r"^\s*%%(time|timeit|capture|prun)\b")
# `obj?`, `torch.zeros??`: help on a name.
_HELP = re.compile(r"^(\s*[A-Za-z_][\w.]*)(\?\??)(\s*)$")


def _masked_magic(line: str) -> Optional[str]:
    """The masked form of `line` if it is a magic, else None."""
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    help_match = _HELP.match(body)
    if help_match is not None:
        name, marks, spaces = help_match.groups()
        return name + "#" * len(marks) + spaces + ending
    match = _MAGIC.match(body)
    if match is None:
        return None
    prefix, magic = match.groups()
    # `...` keeps the line a statement (an if-block of magics stays valid); `#` hides the rest.
    if len(magic) >= 4:
        masked = "...#" + magic[4:]
    else:
        masked = "..." if len(magic) == 3 else "#" * len(magic)
    return prefix + masked + ending


def _hidden(line: str) -> str:
    """A line continuing a magic, turned into a comment of the same length."""
    body = line.rstrip("\r\n")
    stripped = body.lstrip()
    if not stripped:
        return line
    indent = body[: len(body) - len(stripped)]
    return indent + "#" + stripped[1:] + line[len(body) :]


def mask_magics(source: str) -> str:
    """Turn IPython magics and shell escapes into Python of the same length (offsets stay put)."""
    if source.lstrip().startswith("%%"):
        lines = source.splitlines(keepends=True)
        first = next(i for i, line in enumerate(lines) if line.strip())
        if _PYTHON_CELL_MAGIC.match(lines[first]):
            # `%%time`: the rest of the cell is Python that runs as usual, timed
            head = "".join(lines[:first]) + "#" + lines[first][1:]
            return head + mask_magics("".join(lines[first + 1 :]))
        return "".join(("#" + line[1:]) if line.strip() else line for line in lines)
    out = []
    scanner = LineScanner()
    in_magic = False  # the previous line was a magic ending with a backslash
    for line in source.splitlines(keepends=True):
        if in_magic:
            out.append(_hidden(line))
            in_magic = line.rstrip("\r\n").endswith("\\")
            continue
        masked = _masked_magic(line) if scanner.at_start else None
        if masked is not None:
            out.append(masked)
            in_magic = line.rstrip("\r\n").endswith("\\")
            continue
        out.append(line)
        scanner.feed(line)
    return "".join(out)


@dataclass(frozen=True)
class JsonStyle:
    """How a notebook file was written, so that a fixed notebook is written the same way."""

    indent: Optional[int] = 1
    ensure_ascii: bool = False
    trailing_newline: bool = True

    def dump(self, notebook: dict) -> str:
        text = json.dumps(notebook, indent=self.indent, ensure_ascii=self.ensure_ascii)
        return text + "\n" if self.trailing_newline else text


def detect_style(raw: str, notebook: dict) -> JsonStyle:
    """The style that reproduces `raw` from `notebook` exactly, or the closest guess."""
    trailing = raw.endswith("\n")
    match = re.search(r"\n([ \t]+)\"", raw)
    guessed = len(match.group(1)) if match else None
    ascii_guess = "\\u" in raw
    candidates = [guessed, 1, 2, 4, None]
    for indent in dict.fromkeys(candidates):
        for ensure_ascii in (ascii_guess, not ascii_guess):
            style = JsonStyle(indent, ensure_ascii, trailing)
            if style.dump(notebook) == raw:
                return style
    return JsonStyle(guessed, ascii_guess, trailing)
