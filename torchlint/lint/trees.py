"""Parsed trees kept for the rest of a run, so that a file is parsed once whether it is linted, summarised for
the files that import it, or both (in either order).

Trees are kept by file and text: the same text always parses to an equal tree, and trees are never changed,
so a kept one serves any later reader of that file (two files with the same text get a tree each, so that
the nodes of one are never taken for the other's). They are large (about 25 bytes per byte of source), so only the most
recently used are kept, up to a budget in characters of source.

While a file is being linted its tree is not handed to anyone else: a summary of the same file first built
during that lint gets a tree of its own. A summary built before the lint shares the lint's tree: each keeps
its own analyses, so that is safe as long as no analysis hands a node of one to the other (nodes travel with
the context they belong to).

What a complete walk of a kept tree finds (every node's parent, the imports in the order the walk meets
them) is a fact of the tree alone, so it is kept with the tree: the lint of a file summarised earlier, and
the summary of a file linted earlier, take it rather than walk the tree again.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Union

import libcst as cst

# Characters of source whose trees are kept (about 75 MB of trees). Files that import each other in a large
# package ask for the same trees again and again (summaries of the importers, then the lints of them).
MAX_KEPT_CHARS = 3_000_000

_Key = tuple[str, str]  # the file's real path, its text


@dataclass(frozen=True)
class Walk:
    """What a complete walk of a tree found; never changed once kept."""

    parents: dict[cst.CSTNode, cst.CSTNode]  # every meaningful node's parent
    imports: tuple[Union[cst.Import, cst.ImportFrom], ...]  # depth first, in source order


class _Kept:
    __slots__ = ("tree", "walk")

    def __init__(self, tree: cst.Module) -> None:
        self.tree = tree
        self.walk: Optional[Walk] = None


_TREES: "OrderedDict[_Key, _Kept]" = OrderedDict()
_kept_chars = 0
_IN_USE: set[_Key] = set()


def parsed(path: str, text: str, parse: Callable[[], cst.Module]) -> cst.Module:
    """The tree of the file `path` with `text`: the one kept from earlier in the run, else `parse()`'s, then kept."""
    global _kept_chars
    key = (os.path.realpath(path), text)
    if key in _IN_USE:
        return parse()
    kept = _TREES.get(key)
    if kept is not None:
        _TREES.move_to_end(key)
        return kept.tree
    tree = parse()
    if len(text) <= MAX_KEPT_CHARS:
        _TREES[key] = _Kept(tree)
        _kept_chars += len(text)
        while _kept_chars > MAX_KEPT_CHARS:
            (_, old), _ = _TREES.popitem(last=False)
            _kept_chars -= len(old)
    return tree


def walk_of(path: str, text: str, tree: cst.Module) -> Optional[Walk]:
    """The walk kept with `tree`, if `tree` is the kept tree of `path` with `text` and was walked whole."""
    kept = _TREES.get((os.path.realpath(path), text))
    return kept.walk if kept is not None and kept.tree is tree else None


def keep_walk(path: str, text: str, tree: cst.Module, walk: Walk) -> None:
    """Keep `walk` with `tree`, if `tree` is still the kept tree of `path` with `text`."""
    kept = _TREES.get((os.path.realpath(path), text))
    if kept is not None and kept.tree is tree and kept.walk is None:
        kept.walk = walk


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
