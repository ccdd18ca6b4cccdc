"""The shape of the user's source files, from Python's own parser: loops and statement extents."""

from __future__ import annotations

import ast
import functools
from typing import Optional

_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@functools.lru_cache(maxsize=256)
def _tree(path: str) -> Optional[ast.AST]:
    try:
        with open(path, "rb") as handle:
            return ast.parse(handle.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None


@functools.lru_cache(maxsize=256)
def _loops(path: str) -> tuple[tuple[int, int], ...]:
    tree = _tree(path)
    if tree is None:
        return ()
    spans = {(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree) if isinstance(n, _LOOPS)}
    return tuple(sorted(spans))


@functools.lru_cache(maxsize=4096)
def enclosing_loop(path: str, line: int) -> Optional[int]:
    """The first line of the innermost loop (or comprehension) around `line`, or None."""
    best = None
    for start, end in _loops(path):
        if start <= line <= end and (best is None or start >= best[0]):
            best = (start, end)
    return best[0] if best else None


@functools.lru_cache(maxsize=4096)
def statement_lines(path: str, line: int) -> tuple[int, int, int]:
    """(first, last, first line that runs) of the statements that start at `line`.

    For a function or class, the lines that run when it is used are its body's, not the `def` line,
    which runs once when the module is imported.
    """
    tree = _tree(path)
    last, body_first = line, line
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and node.lineno == line:
                last = max(last, node.end_lineno or line)
                if isinstance(node, _DEFINITIONS) and node.body:
                    body_first = node.body[0].lineno
    return line, last, body_first
