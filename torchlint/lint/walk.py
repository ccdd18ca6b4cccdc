"""A fast, read-only walk over the nodes of a libcst tree that carry meaning.

libcst's visitor rebuilds every node it passes (its traversal doubles as the transformer's), and
`node.children` runs that same machinery. Linting needs neither: this walk reads each node's dataclass
fields directly, in source order, and skips whitespace, comments and punctuation tokens, which no rule
looks at (suppression comments are read with `tokenize`).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Iterator

import libcst as cst

# Node kinds that carry no meaning for a rule: layout and punctuation.
_SKIPPED = (
    cst.BaseParenthesizableWhitespace,
    cst.Comment,
    cst.EmptyLine,
    cst.Newline,
    cst.TrailingWhitespace,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.Semicolon,
    cst.AssignEqual,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.ImportStar,
    cst.Asynchronous,
    cst.BaseAugOp,
)
# Fields that hold only layout, by name (their values are whitespace or punctuation).
_LAYOUT_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "leading_lines",
        "lines_after_decorators",
        "header",
        "footer",
        "trailing_whitespace",
        "newline",
        "equal",
        "star",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "colon",
        "dot",
        "asynchronous",
        "whitespace_before_colon",
        "whitespace_after_colon",
    }
)
# Fields visited first although they come later in the dataclass (decorators precede the def).
_FIRST = {cst.FunctionDef: ("decorators",), cst.ClassDef: ("decorators",)}


@lru_cache(maxsize=None)
def _fields(node_type: type) -> tuple[str, ...]:
    names = [
        f.name
        for f in dataclasses.fields(node_type)
        if f.name not in _LAYOUT_FIELDS and not f.name.startswith("whitespace")
    ]
    first = _FIRST.get(node_type, ())
    return tuple([*first, *(n for n in names if n not in first)])


def semantic_children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The meaningful direct children of `node`, in source order."""
    for name in _fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            if not isinstance(value, _SKIPPED):
                yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.CSTNode) and not isinstance(item, _SKIPPED):
                    yield item


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every meaningful node below `node` (not `node` itself), depth first, in source order."""
    stack = list(semantic_children(node))
    stack.reverse()
    while stack:
        current = stack.pop()
        yield current
        children = list(semantic_children(current))
        children.reverse()
        stack.extend(children)
