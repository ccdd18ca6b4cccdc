"""Memos for recursive questions about the nodes of one file (what kind of value or object an expression
holds, whether a loop is hot, whether a function runs every step), where answering one question may ask
the same question again (`x = x.to(device)` in a loop, helpers that call each other).

A question met again while it is being answered gets its memo's default (the cycle is cut there). An
answer that used such a cut value of a question further up is provisional: it depends on which question
was asked first, so it is not remembered; only answers that are the same whatever was asked before are.
The memos of one file call each other (a value's kind asks which object a name holds, which asks whether
a loop is hot, which asks a value's kind again), so they share one `QuestionStack`: a cut in any memo
marks every question above it, in every memo, as provisional. Without this, the findings of one rule
would depend on which other rules ran first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Generic, Hashable, Optional, TypeVar

if TYPE_CHECKING:
    from torchlint.lint.context import Context

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_NONE = 1 << 30  # no cut seen


class QuestionStack:
    """The questions being answered about one file, whichever memo holds them: how deep the stack is, and
    the shallowest question whose answer was cut in the current subtree."""

    def __init__(self, context: Optional["Context"] = None, max_depth: int = 40) -> None:
        self.max_depth = max_depth
        self.size = 0
        self.lowest_cut = _NONE


def question_stack(context: "Context") -> QuestionStack:
    """The one stack every memo of the file's model shares."""
    return context.shared(QuestionStack)


class CycleSafeMemo(Generic[K, V]):
    def __init__(self, default: V, stack: QuestionStack) -> None:
        self.default = default
        self._stack = stack
        self._answers: dict[K, V] = {}
        self._depths: dict[K, int] = {}  # this memo's questions being answered, by their depth in the stack

    def __contains__(self, key: K) -> bool:
        return key in self._answers

    def ask(self, key: K, answer: Callable[[K], V]) -> V:
        if key in self._answers:
            return self._answers[key]
        stack = self._stack
        depth = self._depths.get(key)
        if depth is not None or stack.size > stack.max_depth:
            stack.lowest_cut = min(stack.lowest_cut, 0 if depth is None else depth)
            return self.default
        depth = self._depths[key] = stack.size
        stack.size += 1
        outer_cut, stack.lowest_cut = stack.lowest_cut, _NONE
        try:
            found = answer(key)
        except BaseException:  # the questions above see the cuts made below, even when a rule fails
            stack.lowest_cut = min(outer_cut, stack.lowest_cut)
            raise
        finally:
            del self._depths[key]
            stack.size -= 1
        if stack.lowest_cut >= depth:  # cuts only at this question or below it: its answer is settled
            self._answers[key] = found
            stack.lowest_cut = outer_cut
        else:
            stack.lowest_cut = min(outer_cut, stack.lowest_cut)
        return found
