"""Fuzzing on a small budget (the long run is benchmarks/fuzz.py): mutated fixtures, generated modules,
notebooks and hostile inputs through lint and fix. No exception escapes, a fix always parses (and
leaves each notebook cell parsing), fixing twice changes nothing, nothing changes without a fix."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "fuzz.py"
spec = importlib.util.spec_from_file_location("torchlint_fuzz", SCRIPT)
fuzz = importlib.util.module_from_spec(spec)
sys.modules["torchlint_fuzz"] = fuzz
spec.loader.exec_module(fuzz)

CORPUS = fuzz.corpus()
BUDGET = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

steps = st.lists(
    st.tuples(st.sampled_from(fuzz.MUTATIONS), st.floats(0, 1, allow_nan=False), st.integers(0, 999)), min_size=1, max_size=5
)


@BUDGET
@given(text=st.sampled_from(CORPUS), mutations=steps)
def test_mutated_fixtures(text: str, mutations) -> None:
    assert fuzz.examine("mutated.py", fuzz.mutate(text, mutations).encode("utf-8", "surrogatepass")) == []


@BUDGET
@given(picks=st.lists(st.integers(0, 999), min_size=1, max_size=12), nest=st.lists(st.integers(0, 7), min_size=12, max_size=12))
def test_generated_modules(picks, nest) -> None:
    assert fuzz.examine("generated.py", fuzz.generated_module(picks, nest).encode()) == []


@BUDGET
@given(
    text=st.sampled_from(CORPUS),
    mutations=st.lists(st.tuples(st.sampled_from(fuzz.GENTLE), st.floats(0, 1, allow_nan=False), st.integers(0, 999)), max_size=2),
    style=st.integers(0, 31),
    magics=st.lists(st.integers(0, 9), max_size=4),
)
def test_notebooks(text: str, mutations, style: int, magics) -> None:
    assert fuzz.examine("nb.ipynb", fuzz.notebook(fuzz.mutate(text, mutations), style, magics)) == []


@BUDGET
@given(kind=st.integers(0, len(fuzz.HOSTILE) - 1), size=st.sampled_from([1, 10, 250, 1500, 3000]))
def test_hostile_inputs(kind: int, size: int) -> None:
    name, data = fuzz.hostile(kind, size)
    assert fuzz.examine(name, data) == []


def test_the_checker_sees_a_fix_that_breaks_the_file(monkeypatch) -> None:
    # The properties above could pass vacuously; a fix that does not parse must be caught.
    from torchlint.lint import runner
    from torchlint.lint.source import SourceFile

    real = runner.fix_file

    def broken(source: SourceFile, lint, unsafe):
        fixed, result = real(source, lint, unsafe)
        result.fixed = 1
        return SourceFile(source.path, source.text + "def (:\n"), result

    monkeypatch.setattr(runner, "fix_file", broken)
    assert "fixed file does not parse" in fuzz.examine("m.py", b"import torch\nx = 1\n")
