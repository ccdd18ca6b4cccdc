"""Code that runs once per program run (a demo, a notebook cell, a function called once) against code that
something repeats, in one file and across the files of a project."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from semantic_probe import ask
from torchlint.lint.api import lint_paths


def _once(source: str) -> list[str]:
    return ask(textwrap.dedent(source), lambda model, call, _arg: model.runs_once(call))


def test_module_level_code_outside_loops_runs_once() -> None:
    assert _once(
        """
        probe(1)
        for step in range(10):
            probe(2)
        if __name__ == "__main__":
            probe(3)
        """
    ) == ["True", "False", "True"]


def test_a_function_runs_once_when_every_call_of_it_does() -> None:
    assert _once(
        """
        def demo(x):
            probe(x)

        def evaluate(x):
            probe(x)

        def never_called(x):
            probe(x)

        def callback(x):
            probe(x)

        demo(1)
        demo(2)
        for image in images:
            evaluate(image)
        register(callback)
        """
    ) == ["True", "False", "False", "False"]


def test_methods_run_once_when_every_call_of_their_name_does() -> None:
    assert _once(
        """
        class Detector:
            def detect(self, image):
                probe(image)

            def stream(self, image):
                probe(image)

            def forward(self, image):
                probe(image)

        def outer():
            def inner():
                probe(1)
            inner()

        outer()
        detector = Detector()
        detector.detect(1)
        detector.forward(1)
        for frame in frames:
            detector.stream(frame)
        """
    ) == ["True", "False", "False", "False"]


def _loops_once(source: str) -> list[str]:
    """runs_once for every module-level `for` loop whose iterable is `probe(...)` (asked of the loop)."""

    def question(model, call, _arg):  # type: ignore[no-untyped-def]
        loop = model.context.parent(call)
        return model.runs_once(loop)

    return ask(textwrap.dedent(source), question)


def test_a_loop_over_data_gathered_by_a_loop_repeats() -> None:
    assert _loops_once(
        """
        output = None
        for batch in loader:
            output = torch.cat((output, model(batch)))
        for i in probe(range(output.shape[0])):
            pass
        single = model(image)
        for det in probe(single):
            pass
        """
    ) == ["False", "True"]


def test_the_loop_itself_does_not_count() -> None:
    # the question is about what encloses the code: a loop's iterable runs once with it
    assert _once(
        """
        for x in probe(1):
            pass
        """
    ) == ["True"]


_PREDICT = """
import torch

def decode(dets):
    return [d.item() for d in dets.cuda()]

if __name__ == "__main__":
    decode(torch.rand(5))
"""


@pytest.mark.parametrize(
    "importer, reported",
    [
        ("from predict import decode\nfor path in paths:\n    decode(load(path))\n", True),
        ("from predict import *\nfor path in paths:\n    decode(load(path))\n", True),  # star import: unresolved
        ("from predict import decode\ndecode(load(path))\n", True),  # a module others import: reusable
        ("print(load(path))\n", False),  # predict.py is a script: its demo runs once
    ],
)
def test_code_other_files_import_may_repeat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, importer: str, reported: bool) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "predict.py").write_text(_PREDICT, encoding="utf-8")
    (tmp_path / "evaluate.py").write_text("import torch\n" + importer, encoding="utf-8")
    results = lint_paths([str(tmp_path)], select=["TL407"])
    found = [(Path(r.path).name, f.line) for r in results for f in r.findings]
    assert found == ([("predict.py", 5)] if reported else [])
