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


def _hash_nodes_in_c() -> None:
    """libcst hashes a node by its identity with a method written in Python (`CSTNode.__hash__`, which returns
    `id(self)`), and every dict and set keyed by nodes (parents, memos, visited sets) calls it: millions of
    calls a run. `object.__hash__` is an identity hash too, computed in C. Nodes still compare by identity;
    only the hash values differ, and no order the linter reports depends on them."""
    python_hash = cst.CSTNode.__dict__.get("__hash__")
    if python_hash is None:
        return
    classes = [cst.CSTNode]
    for cls in classes:
        classes.extend(cls.__subclasses__())
    for cls in dict.fromkeys(classes):
        if cls.__dict__.get("__hash__") is python_hash:
            cls.__hash__ = object.__hash__  # type: ignore[method-assign]


_hash_nodes_in_c()

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


# What a field value is, by its exact type (isinstance against libcst's abstract node classes is slow,
# and the walk asks millions of times): 1 a meaningful node, 2 a sequence, 0 anything else.
_KIND: dict[type, int] = {tuple: 2, list: 2}


def _kind(value_type: type) -> int:
    kind = _KIND.get(value_type)
    if kind is None:
        meaningful = issubclass(value_type, cst.CSTNode) and not issubclass(value_type, _SKIPPED)
        kind = _KIND[value_type] = 1 if meaningful else 0
    return kind


# Whether a node of a type is an instance of a tuple of classes, by the node's exact type: libcst's node
# classes are abstract base classes, so a failed isinstance runs ABCMeta's check in Python, and the analyses
# ask millions of times. A parsed node's class decides the answer (libcst registers no virtual subclasses),
# and the concrete node classes have no subclasses, so `type(node) is cst.Call` answers `isinstance` too.
_IS_A: dict[tuple[type, ...], dict[type, bool]] = {}


def is_a(node: object, types: tuple[type, ...]) -> bool:
    """`isinstance(node, types)`, remembered by the node's type."""
    answers = _IS_A.get(types)
    if answers is None:
        answers = _IS_A[types] = {}
    kind = type(node)
    found = answers.get(kind)
    if found is None:
        found = answers[kind] = isinstance(node, types)
    return found


# Children of the nodes of the file being linted: rules and analyses walk the same tree several times.
# Keyed by the node itself (hashed in C, see `_hash_nodes_in_c`).
_CHILDREN: dict[cst.CSTNode, tuple[cst.CSTNode, ...]] = {}


# Every meaningful node below a module, class, function or block that was walked whole before in the file
# being linted, in the order `descendants` yields them: analyses walk the same module and function bodies
# again and again, and reading a list costs a fraction of walking the tree. A node's list is kept from its
# second walk on, so that a walk cut short (`any(...)`) builds none.
_FLAT_TYPES = frozenset({cst.Module, cst.ClassDef, cst.FunctionDef, cst.IndentedBlock})
_FLAT: dict[cst.CSTNode, list[cst.CSTNode]] = {}
_WALKED: set[cst.CSTNode] = set()


def forget_children() -> None:
    """Drop the children cache (the engine calls this when it is done with a file)."""
    _CHILDREN.clear()
    _FLAT.clear()
    _WALKED.clear()


def semantic_children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The meaningful direct children of `node`, in source order."""
    cached = _CHILDREN.get(node)
    if cached is not None:
        return cached
    children: list[cst.CSTNode] = []
    kinds = _KIND
    for name in _fields(type(node)):
        value = getattr(node, name)
        kind = kinds.get(type(value))
        if kind is None:
            kind = _kind(type(value))
        if kind == 1:
            children.append(value)
        elif kind == 2:
            for item in value:
                item_kind = kinds.get(type(item))
                if item_kind is None:
                    item_kind = _kind(type(item))
                if item_kind == 1:
                    children.append(item)
    result = tuple(children)
    _CHILDREN[node] = result
    return result


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every meaningful node below `node` (not `node` itself), depth first, in source order."""
    if type(node) in _FLAT_TYPES:
        flat = _FLAT.get(node)
        if flat is not None:
            return iter(flat)
        if node in _WALKED:
            nodes = _FLAT[node] = list(_walk_below(node))
            return iter(nodes)
        _WALKED.add(node)
    return _walk_below(node)


def _walk_below(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    cache = _CHILDREN  # read inline: most nodes were walked before, and a call per node costs a third
    stack = list(reversed(semantic_children(node)))
    while stack:
        current = stack.pop()
        yield current
        children = cache.get(current)
        if children is None:
            children = semantic_children(current)
        if children:
            stack.extend(reversed(children))


_SCOPE_TYPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def scope_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every meaningful node below `node` that runs in its frame: nested functions, classes and lambdas
    are yielded but not entered. Depth first, in source order."""
    cache = _CHILDREN
    stack = list(reversed(semantic_children(node)))
    while stack:
        current = stack.pop()
        yield current
        if type(current) not in _SCOPE_TYPES:
            children = cache.get(current)
            if children is None:
                children = semantic_children(current)
            if children:
                stack.extend(reversed(children))
