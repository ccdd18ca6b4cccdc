"""Names a loop binds anew on every trip, and calls given one of them."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.names import target_names
from torchlint.semantic.trip_inputs import bound_each_trip, reads_any


def _loop_and_call(source: str) -> tuple[cst.CSTNode, cst.Call]:
    module = cst.parse_module(source)
    found: dict[str, cst.CSTNode] = {}

    class Finder(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            found.setdefault("loop", node)

        def visit_While(self, node: cst.While) -> None:
            found.setdefault("loop", node)

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "act":
                found["call"] = node

    module.visit(Finder())
    return found["loop"], found["call"]  # type: ignore[return-value]


def test_state_rebound_after_each_environment_step_is_new_input() -> None:
    loop, call = _loop_and_call(
        "while not done:\n    a = agent.act(s)\n    s_, r, done, _ = env.step(a)\n    s = s_\n"
    )
    assert {"a", "s_", "r", "done", "_", "s"} <= bound_each_trip(loop)
    assert reads_any(call.args, bound_each_trip(loop))


def test_loop_target_read_inside_a_conversion_is_new_input() -> None:
    loop, call = _loop_and_call("for obs in observations:\n    agent.act(torch.as_tensor(obs[None], dtype=torch.float32))\n")
    assert reads_any(call.args, bound_each_trip(loop))


def test_batch_held_before_the_loop_is_the_same_input_every_trip() -> None:
    loop, call = _loop_and_call(
        "X = load()\nfor epoch in range(100):\n    loss = step(X)\n    print(agent.act(X))\n"
    )
    assert "X" not in bound_each_trip(loop)
    assert not reads_any(call.args, bound_each_trip(loop))


def test_names_bound_inside_nested_functions_do_not_count() -> None:
    loop, call = _loop_and_call("for i in range(9):\n    def f():\n        s = 1\n    agent.act(s)\n")
    assert "s" not in bound_each_trip(loop)
    assert not reads_any(call.args, bound_each_trip(loop))


def test_target_names_of_nested_and_starred_targets() -> None:
    target = cst.parse_statement("a, (b, *c), d.e, f[0] = x\n").body[0].targets[0].target  # type: ignore[attr-defined]
    assert set(target_names(target)) == {"a", "b", "c"}
