"""What the callers of a function pass for one of its parameters (`call_arguments.passed_for`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchlint.lint.engine import prepare_context
from torchlint.lint.source import read_source
from torchlint.lint.walk import descendants
from torchlint.semantic.call_arguments import passed_for

HELPERS = """
def run(model, loader, steps=10, *rest, device, **options):
    return model, loader, steps, rest, device, options

class Trainer:
    def __init__(self, net, data):
        self.net = net

    def fit(self, loader, epochs=1):
        return self.step(loader)

    def step(self, batch):
        return batch

    @staticmethod
    def scale(x, factor):
        return x * factor

    def outer(self, a):
        def inner(b):
            return b
        return inner(a)

def lone(item):
    return item
"""

MAIN = """
import helpers
from helpers import Trainer, run
from pkg import exported

run(Net(), train_loader, device="cuda")
run(model=Big(), loader=val_loader, steps=5, device="cpu")
run(*args, Late(), device="cpu")
run(Tiny(), tiny_loader, device="cpu", options=config)
run(Small(), *more, loader=kw_loader, device="cpu")
helpers.run(Remote(), remote_loader, device="cuda")
trainer = Trainer(Net(), data=dataset)
trainer.fit(fit_loader)
Trainer.scale(tensor, 2.0)
exported(across)
"""

PACKAGE = {
    "pkg/__init__.py": "from pkg.impl import exported\n",
    "pkg/impl.py": "def exported(value):\n    return value\n",
}


@pytest.fixture()
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    files = {"helpers.py": HELPERS, "main.py": MAIN, **PACKAGE}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _passed(path: Path, function: str, param: str, **options: bool) -> list[tuple[str, str]]:
    """(file name, argument code) for each argument the callers pass for `function`'s parameter `param`."""
    context = prepare_context(read_source(str(path), str(path)), walk=True)
    definition = next(
        n for n in descendants(context.module) if isinstance(n, cst.FunctionDef) and n.name.value == function
    )
    params = definition.params
    found = next(
        p
        for p in [*params.posonly_params, *params.params, *params.kwonly_params, params.star_arg, params.star_kwarg]
        if isinstance(p, cst.Param) and p.name.value == param
    )
    return sorted(
        (Path(there.source.path).name, there.module.code_for_node(value))
        for there, value in passed_for(context, found, **options)
    )


def test_positional_keyword_and_star_args(tree: Path) -> None:
    # by position, by keyword, through `*args` (unknown), a keyword after `*args`, and through its module
    assert _passed(tree / "helpers.py", "run", "model") == [
        ("main.py", "Big()"), ("main.py", "Net()"), ("main.py", "Remote()"), ("main.py", "Small()"), ("main.py", "Tiny()"),
    ]
    assert _passed(tree / "helpers.py", "run", "loader") == [
        ("main.py", "kw_loader"), ("main.py", "remote_loader"), ("main.py", "tiny_loader"), ("main.py", "train_loader"),
        ("main.py", "val_loader"),
    ]


def test_default_is_not_passed(tree: Path) -> None:
    # a call that leaves a parameter to its default passes nothing for it; with `every`, nothing is certain
    assert _passed(tree / "helpers.py", "run", "steps") == [("main.py", "5")]
    assert _passed(tree / "helpers.py", "run", "steps", every=True) == []
    assert _passed(tree / "helpers.py", "run", "device", every=True) == [
        ("main.py", '"cpu"'), ("main.py", '"cpu"'), ("main.py", '"cpu"'), ("main.py", '"cpu"'), ("main.py", '"cuda"'),
        ("main.py", '"cuda"'),
    ]


def test_star_parameters_are_not_filled_by_one_argument(tree: Path) -> None:
    # `options=config` is a key of the `**options` dict, not the dict itself
    assert _passed(tree / "helpers.py", "run", "rest") == []
    assert _passed(tree / "helpers.py", "run", "options") == []


def test_methods_skip_the_receiver(tree: Path) -> None:
    assert _passed(tree / "helpers.py", "fit", "self") == []
    assert _passed(tree / "helpers.py", "fit", "loader") == [("main.py", "fit_loader")]
    assert _passed(tree / "helpers.py", "step", "batch") == [("helpers.py", "loader")]  # `self.step(loader)`
    assert _passed(tree / "helpers.py", "scale", "x") == [("main.py", "tensor")]  # a static method has none
    assert _passed(tree / "helpers.py", "inner", "b") == [("helpers.py", "a")]  # nor has a function in a method


def test_constructor_arguments_fill_init(tree: Path) -> None:
    assert _passed(tree / "helpers.py", "__init__", "net") == [("main.py", "Net()")]
    assert _passed(tree / "helpers.py", "__init__", "data") == [("main.py", "dataset")]


def test_package_re_export(tree: Path) -> None:
    assert _passed(tree / "pkg" / "impl.py", "exported", "value") == [("main.py", "across")]


def test_elsewhere_off_reads_only_this_file(tree: Path) -> None:
    assert _passed(tree / "helpers.py", "fit", "loader", elsewhere=False) == []
    assert _passed(tree / "helpers.py", "step", "batch", elsewhere=False, every=True) == [("helpers.py", "loader")]
    assert _passed(tree / "helpers.py", "inner", "b", elsewhere=False) == [("helpers.py", "a")]


def test_uncalled_function(tree: Path) -> None:
    assert _passed(tree / "helpers.py", "lone", "item") == []
    assert _passed(tree / "helpers.py", "lone", "item", every=True) == []
