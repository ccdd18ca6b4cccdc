"""Parsed trees kept for the rest of a run, so that a file is parsed once whether it is linted, summarised for
the files that import it, or both (in either order).

Trees are kept by file and text: the same text always parses to an equal tree, and trees are never changed,
so a kept one serves any later reader of that file (two files with the same text get a tree each, so that
the nodes of one are never taken for the other's). They are large (about 25 bytes per byte of source), so only the most
recently used are kept, up to a budget in characters of source.

While a file is being linted its tree is not handed to anyone else: a summary of the same file first built
during that lint gets a tree of its own. A summary built before the lint shares the lint's tree: each keeps
its own parents and analyses, so that is safe as long as no analysis hands a node of one to the other (nodes
travel with the context they belong to).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Iterator

import libcst as cst

# Characters of source whose trees are kept (about 75 MB of trees). Files that import each other in a large
# package ask for the same trees again and again (summaries of the importers, then the lints of them).
MAX_KEPT_CHARS = 3_000_000

_Key = tuple[str, str]  # the file's real path, its text
_TREES: "OrderedDict[_Key, cst.Module]" = OrderedDict()
_kept_chars = 0
_IN_USE: set[_Key] = set()


def parsed(path: str, text: str, parse: Callable[[], cst.Module]) -> cst.Module:
    """The tree of the file `path` with `text`: the one kept from earlier in the run, else `parse()`'s, then kept."""
    global _kept_chars
    key = (os.path.realpath(path), text)
    if key in _IN_USE:
        return parse()
    tree = _TREES.get(key)
    if tree is not None:
        _TREES.move_to_end(key)
        return tree
    tree = parse()
    if len(text) <= MAX_KEPT_CHARS:
        _TREES[key] = tree
        _kept_chars += len(text)
        while _kept_chars > MAX_KEPT_CHARS:
            (_, old), _ = _TREES.popitem(last=False)
            _kept_chars -= len(old)
    return tree


@contextmanager
def in_use(path: str, text: str) -> Iterator[None]:
    """While the file `path` with `text` is linted: its tree is the lint's alone."""
    key = (os.path.realpath(path), text)
    _IN_USE.add(key)
    try:
        yield
    finally:
        _IN_USE.discard(key)


def forget() -> None:
    """Drop every kept tree (at the start of a run: memory is better spent on the files of this one)."""
    global _kept_chars
    _TREES.clear()
    _kept_chars = 0
