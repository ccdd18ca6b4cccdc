"""TL105 iter-in-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import target_names
from torchlint.lint.rule import Rule
from torchlint.lint.walk import descendants
from torchlint.rules.data._common import (
    LOOPS,
    enclosing_loops,
    is_inside,
    snippet,
)
from torchlint.semantic.loader_calls import is_builtin
from torchlint.semantic.loader_copies import root_name
from torchlint.semantic.loaders import flow
from torchlint.semantic.loops import gated, hot_loop, is_hot
from torchlint.semantic.trip_counts import literal_trips

_FEW = 8  # trips of a loop that draws a few batches to look at


class IterInLoop(Rule):
    code = "TL105"
    name = "iter-in-loop"
    family = "Data loading"
    summary = "`next(iter(loader))` inside a loop: a new DataLoader iterator (and new workers) every time round."
    message = (
        "next(iter(loader)) inside a loop starts a new pass over the DataLoader each time (new workers, a new "
        "shuffle, prefetching thrown away): create the iterator once outside the loop and call next() on it"
    )
    explanation = (
        "`iter(loader)` starts a fresh pass: with workers it launches `num_workers` processes and has them "
        "prefetch `prefetch_factor` batches each, only for `next()` to take one and throw the rest away; "
        "without workers it still re-runs the sampler (a full `randperm` of the dataset when shuffling). "
        "And without `shuffle=True` every call returns the same first batch, which is rarely what a training "
        "loop wants. Measured on a 2-core CPU with 2 workers: 343 ms per `next(iter(loader))` against 174 ms "
        "for `next(it)` on an iterator kept across steps (2x), and the gap grows with `num_workers`."
    )
    bad = (
        "for step in range(num_steps):\n"
        "    images, labels = next(iter(train_loader))\n"
        "    train_step(images, labels)\n"
    )
    good = (
        "batches = iter(train_loader)\n"
        "for step in range(num_steps):\n"
        "    try:\n"
        "        images, labels = next(batches)\n"
        "    except StopIteration:\n"
        "        batches = iter(train_loader)\n"
        "        images, labels = next(batches)\n"
        "    train_step(images, labels)\n"
    )
    false_positives = (
        "Reported only for a `DataLoader` built in the same file, or an object whose name says it is a "
        "loader (`train_loader`, `dl`). Not reported where the call runs once per epoch (in an epoch loop "
        "around the step loop, or a loop whose variable is named like `epoch`: one sample batch per epoch, "
        "for a plot, costs little), only every N steps (`if step % 500 == 0:`), or when the loop variable "
        "is itself the loader (`for loader in loaders:`), nor in a loop of a few trips written in the code "
        "(`for i in range(2): images, targets = next(iter(train_loader))` to show a couple of batches)."
    )
    requires = ("next(",)

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.candidates: list[tuple[cst.Call, cst.BaseExpression]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Name) and node.func.value == "next") or len(node.args) != 1:
            return
        inner = node.args[0].value
        if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "iter"):
            return
        if len(inner.args) != 1 or inner.args[0].star:
            return
        self.candidates.append((node, inner.args[0].value))

    def _rebound_in(self, source: cst.BaseExpression, loop: cst.CSTNode) -> bool:
        """`loader = make_loader(cfg)` inside the loop: each trip iterates a new loader once."""
        if not isinstance(source, cst.Name):
            return False
        bindings = self.context.lookup(source) or []
        return any(is_inside(self.context, b.node, loop) for b in bindings)

    def _repeated(self, call: cst.Call, innermost: cst.CSTNode) -> bool:
        """The call runs on (nearly) every trip of a loop that runs many times, not once per epoch."""
        context = self.context
        loop = hot_loop(context, call)
        if loop is not None:
            return not gated(context, call, loop)
        if isinstance(innermost, cst.For) and any("epoch" in n.lower() for n in target_names(innermost.target)):
            return False
        if any(isinstance(n, LOOPS) and is_hot(context, n) for n in descendants(innermost.body)):
            return False  # an epoch loop around the step loop: once per epoch
        return not gated(context, call, innermost)  # type: ignore[arg-type]

    def leave_Module(self, node: cst.Module) -> None:
        if not self.candidates or self.semantic.is_test_module:
            return
        context = self.context
        data = None
        for call, source in self.candidates:
            if not is_builtin(context, call.func, "next") or not is_builtin(context, call.args[0].value.func, "iter"):  # type: ignore[attr-defined]
                continue
            # A loop's iterable and its `else:` run once: only loops whose body (or `while` test) runs the call.
            loops = [
                loop
                for loop in enclosing_loops(context, call)
                if is_inside(context, call, loop.body) or (isinstance(loop, cst.While) and is_inside(context, call, loop.test))
            ]
            if not loops or not self._repeated(call, loops[0]):
                continue
            trips = literal_trips(context, loops[0])
            if trips is not None and trips <= _FEW and len(loops) == 1:
                continue  # `for i in range(2): show(next(iter(loader)))`: a couple of batches to look at
            root = root_name(source, conversions=False)
            bound = {n for loop in loops if isinstance(loop, cst.For) for n in target_names(loop.target)}
            if root in bound or self._rebound_in(source, loops[0]):
                continue  # a different loader each time round
            if data is None:
                data = flow(context)
            if data.loaders_of(source) is None and not self.semantic.is_loader(source):
                continue
            name = snippet(context, source, 30)
            self.report(
                call,
                message=f"next(iter({name})) inside a loop starts a new pass over the DataLoader each time (new "
                "workers, a new shuffle, prefetching thrown away): create the iterator once before the loop "
                "and call next() on it",
            )
