"""How big and how deep a file may be before it is parsed, so that no single file costs more than a few
seconds and a few hundred MB (or crashes the native parser, which overflows its stack on deep nesting).

Measured with the standard tokenizer, which is linear and cannot overflow: the number of lines, the
depth of nested brackets and blocks, the statements in one indented block, and the longest chain of
operators between two commas at one bracket level (`a + b + c ...`, `x.a.b.c ...`, `"a" "b" "c" ...`:
each link is one more level of the syntax tree).

The tokenizer is written in Python and costs about a tenth of linting a file, so a scan made of regular
expressions runs first: it bounds every measure from above, and a file whose bounds are all within the
limits (almost every real file) passes untokenized.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter
from typing import Optional

MAX_FILE_BYTES = 1024 * 1024
MAX_LINES = 15_000
MAX_NESTING = 200  # CPython's own limit on nested brackets
MAX_INDENT = 100  # CPython's own limit on nested blocks
MAX_NOTEBOOK_BYTES = 32 * 1024 * 1024  # outputs (images) make notebooks large; their code is limited as text
MAX_CHAIN = 1_000
MAX_BLOCK = 2_500  # statements in one indented block: some analyses of a loop grow with its body's square

_OPEN = "([{"
_CLOSE = ")]}"
_RESETS = {",", ";"}
_NEUTRAL = {":", "=", "->"}  # separate operands without nesting them
_KEYWORD_LINKS = {"and", "or", "not", "if", "else", "in", "is", "lambda", "await"}


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def check_size(size: int, limit: int = MAX_FILE_BYTES) -> Optional[str]:
    if size > limit:
        return f"file too large to lint ({size / 1e6:.1f} MB; the limit is {limit / 1e6:.1f} MB)"
    return None


def check_shape(text: str) -> Optional[str]:
    """The first limit `text` passes, as a one-line reason, or None. A tokenizer error ends the scan
    quietly: the parser reports the syntax error itself."""
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines > MAX_LINES:
        return f"file too long to lint ({_plural(lines, 'line')}; the limit is {MAX_LINES:,})"
    if surely_within_limits(text):
        return None
    return _tokenized_shape(text)


# Strings (each becomes one character: adjacent strings are links of a chain) and comments (dropped).
_STRING_OR_COMMENT = re.compile(
    r"#[^\n]*"
    r"|'''(?:\\[\s\S]|[^\\])*?'''"
    r'|"""(?:\\[\s\S]|[^\\])*?"""'
    r"|'(?:\\[\s\S]|[^'\\\n])*'"
    r'|"(?:\\[\s\S]|[^"\\\n])*"'
)
_CONTINUATION = re.compile(r"\\\r?\n")
_TABS_IN_INDENT = re.compile(r"^ *[\t\f]", re.MULTILINE)
_INDENT = re.compile(r"^( *)(?=\S)", re.MULTILINE)
_STRUCTURE = re.compile(r"[()\[\]{},;\n]")
_SPACE = re.compile(r"[ \t\r\f]+")


def _blank_strings_and_comments(match: re.Match) -> str:
    return "" if match[0][0] == "#" else "S"


def surely_within_limits(text: str) -> bool:
    """Whether upper bounds of the nesting, indentation, block and chain measures, read from the text with
    strings and comments blanked out, are all within the limits. False means "tokenize to know": a bound
    may exceed a limit the exact measure does not."""
    code = _CONTINUATION.sub(" ", _STRING_OR_COMMENT.sub(_blank_strings_and_comments, text))
    if _TABS_IN_INDENT.search(code) or code.count("\r") != code.count("\r\n"):
        return False  # a tab's width depends on its column, a lone \r ends a line: the bounds assume neither
    # Every statement of an indented block starts its line at the block's column, one column per level.
    columns = Counter(map(len, _INDENT.findall(code)))
    columns.pop(0, None)
    if columns and (max(columns) > MAX_INDENT or max(columns.values()) > MAX_BLOCK):
        return False
    # Every chain link is at least one character, outside whitespace, at its bracket level.
    code = _SPACE.sub("", code)
    depth = start = 0
    chains = [0]
    for match in _STRUCTURE.finditer(code):
        mark = match[0]
        chains[-1] += match.start() - start
        start = match.end()
        if mark in _OPEN:
            chains[-1] += 1
            depth += 1
            if depth > MAX_NESTING or chains[-1] > MAX_CHAIN:
                return False
            chains.append(0)
        elif chains[-1] > MAX_CHAIN:
            return False
        elif mark in _CLOSE:
            if depth:
                depth -= 1
                chains.pop()
        elif mark != "\n" or depth == 0:
            chains[-1] = 0
    return chains[-1] + len(code) - start <= MAX_CHAIN


def _tokenized_shape(text: str) -> Optional[str]:
    depth = indent = 0
    blocks = [0]  # statements so far in each open indented block
    chains = [0]  # operator links since the last comma, one counter per open bracket
    previous_string = False
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, string = token.type, token.string
            if kind == tokenize.OP:
                if string in _OPEN:
                    depth += 1
                    if depth > MAX_NESTING:
                        return (
                            f"nesting too deep to lint (more than {MAX_NESTING} nested brackets at line "
                            f"{token.start[0]}; the limit is {MAX_NESTING})"
                        )
                    chains[-1] += 1
                    chains.append(0)
                elif string in _CLOSE:
                    if depth:
                        depth -= 1
                        chains.pop()
                elif string in _RESETS:
                    chains[-1] = 0
                elif string not in _NEUTRAL:
                    chains[-1] += 1
            elif kind == tokenize.INDENT:
                indent += 1
                blocks.append(0)
                if indent > MAX_INDENT:
                    return (
                        f"nesting too deep to lint (more than {MAX_INDENT} nested blocks at line "
                        f"{token.start[0]}; the limit is {MAX_INDENT})"
                    )
            elif kind == tokenize.DEDENT:
                indent -= 1
                if len(blocks) > 1:
                    blocks.pop()
            elif kind == tokenize.NAME and string in _KEYWORD_LINKS:
                chains[-1] += 1
            elif kind == tokenize.STRING and previous_string:
                chains[-1] += 1
            elif kind == tokenize.NEWLINE and depth == 0:
                chains[-1] = 0
                if len(blocks) > 1:
                    blocks[-1] += 1
                    if blocks[-1] > MAX_BLOCK:
                        return (
                            f"block too long to lint (more than {MAX_BLOCK:,} statements in one block at line "
                            f"{token.start[0]}; the limit is {MAX_BLOCK:,})"
                        )
            if chains[-1] > MAX_CHAIN:
                return (
                    f"expression too long to lint (more than {MAX_CHAIN:,} chained operators at line "
                    f"{token.start[0]}; the limit is {MAX_CHAIN:,})"
                )
            if kind not in (tokenize.NL, tokenize.COMMENT):
                previous_string = kind == tokenize.STRING
    except (tokenize.TokenError, SyntaxError):
        pass
    return None
