"""Network values: a plain name holds a network by what reaches it (what callers pass for a parameter, in any
file; a whole model loaded from a file), whatever the name."""

from __future__ import annotations

import textwrap
from pathlib import Path

from semantic_probe import ask

from torchlint.lint.api import lint_paths
from torchlint.semantic import network_values


def holds(source: str) -> list[str]:
    return ask(textwrap.dedent(source), lambda model, call, arg: network_values.holds_network(model.grad, arg))


def test_a_parameter_holds_a_network_when_every_caller_passes_one() -> None:
    source = """
    import torch
    import torch.nn as nn

    def make_loss():
        loss = nn.SmoothL1Loss()
        return loss

    def run(m, fn, mixed, measure, x):
        probe(m)
        probe(fn)
        probe(mixed)
        probe(measure)

    net = nn.Linear(4, 2).cuda()
    run(net, torch.sigmoid, net, nn.MSELoss(), torch.ones(1, 4))
    run(nn.Sequential(nn.Linear(4, 2)), torch.tanh, lambda t: t, make_loss(), torch.ones(1, 4))
    """
    assert holds(source) == ["True", "False", "False", "False"]  # a loss module is a module, not a network


def test_a_loaded_model_is_a_network_and_a_state_dict_is_not_a_parameter() -> None:
    source = """
    import torch

    def load(path):
        loaded = torch.load(path, map_location="cpu")
        return loaded

    m = torch.load("model.pt", map_location="cuda").eval()
    other = load("model.pt")
    size = len("model.pt")
    probe(m)
    probe(other)
    probe(size)
    """
    assert holds(source) == ["True", "True", "False"]


def lint(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, int]]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    results = lint_paths([str(tmp_path / name) for name in files], select=["TL301"])
    return sorted((Path(r.path).name, f.line) for r in results for f in r.findings)


ENGINE = """
import torch

def f(m, batches):
    total = 0
    for x, y in batches:
        total += (m(x.cuda()).argmax(1) == y.cuda()).sum().item()
    return total
"""


def test_a_network_passed_from_another_file_two_calls_up_is_followed(tmp_path: Path) -> None:
    files = {
        "engine.py": ENGINE,
        "report.py": """
        from engine import f

        def report(epoch, clf, batches):
            print(epoch, f(clf, batches))
        """,
        "main.py": """
        import torch
        import torchvision
        from report import report

        clf = torchvision.models.resnet18(num_classes=10).cuda()
        for epoch in range(10):
            report(epoch, clf, [(torch.rand(8, 3, 32, 32), torch.zeros(8, dtype=torch.long))])
        """,
    }
    assert lint(tmp_path, files) == [("engine.py", 4)]


def test_a_parameter_passed_something_else_by_one_caller_is_left_alone(tmp_path: Path) -> None:
    files = {
        "engine.py": ENGINE,
        "main.py": """
        import torch
        import torchvision
        from engine import f

        batches = [(torch.rand(8, 3, 32, 32), torch.zeros(8, dtype=torch.long))]
        clf = torchvision.models.resnet18(num_classes=10).cuda()
        for epoch in range(10):
            print(f(clf, batches), f(lambda x: x.flatten(1), batches))
        """,
    }
    assert lint(tmp_path, files) == []
