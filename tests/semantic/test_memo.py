"""CycleSafeMemo: answers of recursive questions do not depend on which question was asked first, also
when the questions are held by several memos that ask each other (one shared QuestionStack)."""

from __future__ import annotations

from torchlint.semantic.memo import CycleSafeMemo, QuestionStack

# a -> b -> a is a cycle; c depends on a. Each answer is the set of names reached, the cut one left out.
GRAPH = {"a": ["b"], "b": ["a"], "c": ["a"], "d": []}


def reach(memo: CycleSafeMemo[str, frozenset], key: str) -> frozenset:
    found = {key}
    for other in GRAPH[key]:
        found |= memo.ask(other, lambda k: reach(memo, k))
    return frozenset(found)


def answers(order: list[str]) -> dict[str, frozenset]:
    memo: CycleSafeMemo[str, frozenset] = CycleSafeMemo(frozenset(), QuestionStack())
    return {key: memo.ask(key, lambda k: reach(memo, k)) for key in order}


def test_answers_are_the_same_in_any_order() -> None:
    first = answers(["a", "b", "c", "d"])
    for order in (["b", "a", "d", "c"], ["c", "b", "a", "d"], ["d", "c", "a", "b"]):
        assert answers(order) == first
    assert first["b"] == frozenset({"a", "b"})
    assert first["c"] == frozenset({"a", "b", "c"})


def test_an_answer_cut_by_a_question_above_is_not_remembered() -> None:
    memo: CycleSafeMemo[str, frozenset] = CycleSafeMemo(frozenset(), QuestionStack())
    memo.ask("a", lambda k: reach(memo, k))
    assert "a" in memo
    assert "b" not in memo  # b was answered while a was open: its answer lacked a's own
    assert memo.ask("b", lambda k: reach(memo, k)) == frozenset({"a", "b"})


def test_deep_chains_are_cut_at_the_depth_limit() -> None:
    memo: CycleSafeMemo[int, int] = CycleSafeMemo(0, QuestionStack(max_depth=5))

    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + memo.ask(n - 1, depth)

    assert memo.ask(100, depth) == 6  # six questions open at once, the seventh gets the default
    assert 100 in memo and 99 not in memo


class TwoMemos:
    """`x = x.to(device)` in a loop, as two analyses see it: a value's kind asks whether the loop is hot,
    which asks the kind of the value again. Each memo alone sees no cycle of its own."""

    def __init__(self) -> None:
        stack = QuestionStack()
        self.kinds: CycleSafeMemo[str, str] = CycleSafeMemo("unknown", stack)
        self.hot: CycleSafeMemo[str, bool] = CycleSafeMemo(False, stack)

    def kind(self, name: str) -> str:
        return self.kinds.ask(name, lambda n: "tensor" if self.is_hot("loop") else "unknown")

    def is_hot(self, loop: str) -> bool:
        return self.hot.ask(loop, lambda _: self.kind("x") in ("tensor", "unknown"))


def test_a_cut_in_one_memo_keeps_the_answers_above_it_in_another_provisional() -> None:
    first = TwoMemos()
    assert first.is_hot("loop") is True
    assert "loop" in first.hot
    assert "x" not in first.kinds  # answered with the loop's question open: its cut default was used

    second = TwoMemos()
    assert second.kind("x") == "tensor"
    assert "x" in second.kinds
    assert "loop" not in second.hot  # answered with the kind of x open
    # Whichever was asked first, the other question now gets the same answer as from scratch.
    assert first.kind("x") == second.kind("x") == "tensor"
    assert first.is_hot("loop") == second.is_hot("loop") is True
