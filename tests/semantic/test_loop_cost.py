"""The hot-loop questions cost work linear in the size of a loop body, not quadratic."""

from __future__ import annotations

from torchlint.lint.api import lint_source
from torchlint.semantic import loops


def _training_loop(statements: int) -> str:
    body = "".join(f"    v{i} = loss.item() + torch.zeros(3).to(device).sum()\n" for i in range(statements))
    return (
        "import torch\n"
        "for step, (x, y) in enumerate(loader):\n"
        "    loss = model(x.cuda()).sum()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n" + body
    )


def _interval_checks(monkeypatch, statements: int) -> int:
    calls = 0
    original = loops._skips_most

    def counting(context, statement):
        nonlocal calls
        calls += 1
        return original(context, statement)

    monkeypatch.setattr(loops, "_skips_most", counting)
    result = lint_source(_training_loop(statements), "train.py")
    assert result.error is None
    assert sum(f.code == "TL201" for f in result.findings) == statements  # every statement asked about
    return calls


def test_interval_checks_grow_linearly_with_the_loop_body(monkeypatch):
    small = _interval_checks(monkeypatch, 100)
    large = _interval_checks(monkeypatch, 200)
    assert 0 < small and large <= 2 * small + 10
