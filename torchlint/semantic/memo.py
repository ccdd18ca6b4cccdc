"""A memo for recursive questions about the nodes of one file (what kind of value or object an expression
holds), where answering one node may ask about itself again (`x = x.to(device)` in a loop).

A question met again while it is being answered gets the default (the cycle is cut there). An answer that
used such a cut value of a question further up is provisional: it depends on which question was asked
first, so it is not remembered; only answers that are the same whatever was asked before are. Without
this, the findings of one rule would depend on which other rules ran first.
"""

from __future__ import annotations

from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_NONE = 1 << 30  # no cut seen


class CycleSafeMemo(Generic[K, V]):
    def __init__(self, default: V, max_depth: int = 40) -> None:
        self.default = default
        self.max_depth = max_depth
        self._answers: dict[K, V] = {}
        self._depths: dict[K, int] = {}  # questions being answered, by their depth in the stack
        self._lowest_cut = _NONE  # the shallowest question whose answer was cut in the current subtree

    def __contains__(self, key: K) -> bool:
        return key in self._answers

    def ask(self, key: K, answer: Callable[[K], V]) -> V:
        if key in self._answers:
            return self._answers[key]
        depth = self._depths.get(key)
        if depth is not None or len(self._depths) > self.max_depth:
            self._lowest_cut = min(self._lowest_cut, 0 if depth is None else depth)
            return self.default
        depth = self._depths[key] = len(self._depths)
        outer_cut, self._lowest_cut = self._lowest_cut, _NONE
        try:
            found = answer(key)
        finally:
            del self._depths[key]
        if self._lowest_cut >= depth:  # cuts only at this question or below it: its answer is settled
            self._answers[key] = found
            self._lowest_cut = outer_cut
        else:
            self._lowest_cut = min(outer_cut, self._lowest_cut)
        return found
