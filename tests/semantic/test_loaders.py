"""Probes of the loader analysis: which loader an iterated expression reads, and which loaders are only looked at."""

from __future__ import annotations

import textwrap

import libcst as cst

SOURCE = """
import torch
from torch.utils.data import DataLoader

def endless(loader):
    while True:
        for batch in loader:
            yield batch

def numbers(n):
    for i in range(n):
        yield i

def main(dataset, model, device):
    loader = DataLoader(dataset, batch_size=8)
    it = iter(loader)
    stream = endless(loader)
    probe(it)
    probe(stream)
    probe(endless(it))
    probe(numbers(3))
    probe(iter(probe))
"""


def _sources(model, call: cst.Call, expr: cst.BaseExpression) -> str:
    found = model.loaders.batch_sources(expr)
    if found is None:
        return "unknown"
    return ",".join(sorted(model.context.code(f) for f in found)) or "none"


def test_batch_sources_look_through_iter_and_generators() -> None:
    answers = _ask_at_end(textwrap.dedent(SOURCE), lambda model, call: _sources(model, call, call.args[0].value))
    loader = "DataLoader(dataset, batch_size=8)"
    assert answers == [loader, loader, loader, "unknown", "unknown"]


PEEKS = """
import torch
from torch.utils.data import DataLoader

def show(loader):
    print(len(loader), next(iter(loader))[0].shape)

def fit(model, loader):
    for x, y in loader:
        model(x).sum().backward()

def main(dataset, model):
    a = probe(DataLoader(dataset))
    show(a)
    b = probe(DataLoader(dataset))
    first = iter(b)
    print(next(first))
    c = probe(DataLoader(dataset))
    fit(model, c)
    d = probe(DataLoader(dataset))
    it = iter(d)
    for step in range(10):
        print(next(it))
"""




def _ask_at_end(source: str, question) -> list[str]:  # noqa: ANN001
    """Like `semantic_probe.ask`, answered once the whole file is walked (as the data rules ask)."""
    from torchlint.lint.api import lint_source
    from torchlint.lint.rule import _REGISTRY, Rule

    class _LateProbe(Rule, register=False):
        code = "TL997"
        name = "late-semantic-probe"
        family = "Suppressions"
        summary = message = explanation = bad = good = "probe"

        def __init__(self, context) -> None:  # noqa: ANN001
            super().__init__(context)
            self.probes: list[cst.Call] = []

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "probe":
                self.probes.append(node)

        def leave_Module(self, node: cst.Module) -> None:
            for call in self.probes:
                self.report(call, str(question(self.semantic, call)))

    _REGISTRY["TL997"] = _LateProbe
    try:
        result = lint_source(source, select=["TL997"])
    finally:
        _REGISTRY.pop("TL997", None)
    assert result.error is None and not result.notes, (result.error, result.notes)
    return [f.message for f in sorted(result.findings, key=lambda f: f.sort_key)]


def test_only_peeked_loaders() -> None:
    # the probe call stands where the DataLoader would: bound to a name, then used
    answers = _ask_at_end(textwrap.dedent(PEEKS), lambda model, call: model.loaders.only_peeked(call))
    assert answers == ["True", "True", "False", "False"]
