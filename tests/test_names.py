"""Qualified-name resolution through imports and aliases."""

from __future__ import annotations

import os
import subprocess
import sys

import libcst as cst
import pytest

from torchlint.lint.names import ImportTable, bound_value, canonical, module_level_bindings


def resolve(source: str, expression: str) -> str | None:
    module = cst.parse_module(source)
    table = ImportTable()
    imports, rebound = module_level_bindings(module)
    for node in imports:
        table.add(node)
    table.shadow(rebound)
    return table.resolve(cst.parse_expression(expression))


@pytest.mark.parametrize(
    ("source", "expression"),
    [
        ("from torch.utils.data import DataLoader as DL", "DL"),
        ("import torch.utils.data as tud", "tud.DataLoader"),
        ("from torch.utils.data.dataloader import DataLoader", "DataLoader"),
        ("import torch", "torch.utils.data.DataLoader"),
        ("import torch.utils.data", "torch.utils.data.DataLoader"),
        ("from torch.utils import data", "data.DataLoader"),
        ("try:\n    from torch.utils.data import DataLoader\nexcept ImportError:\n    pass", "DataLoader"),
    ],
)
def test_dataloader_spellings(source: str, expression: str) -> None:
    assert resolve(source, expression) == "torch.utils.data.DataLoader"


def test_from_torch_import_nn() -> None:
    assert resolve("from torch import nn", "nn.Conv2d") == "torch.nn.Conv2d"
    assert resolve("import torch.nn as nn", "nn.modules.conv.Conv2d") == "torch.nn.Conv2d"
    assert resolve("from torch import nn", "nn.functional.relu") == "torch.nn.functional.relu"


def test_no_grad_spellings() -> None:
    assert resolve("import torch", "torch.autograd.no_grad") == "torch.no_grad"
    assert resolve("from torch.autograd.grad_mode import no_grad", "no_grad") == "torch.no_grad"


def test_unknown_and_relative_names_do_not_resolve() -> None:
    assert resolve("from .data import DataLoader", "DataLoader") is None
    assert resolve("import torch", "Dataset") is None
    assert resolve("from .data import loader as torch", "torch.zeros") is None


def test_usual_names_brought_by_a_star_import_resolve() -> None:
    assert resolve("from utils import *", "torch.no_grad") == "torch.no_grad"
    assert resolve("from utils import *", "nn.Conv2d") == "torch.nn.Conv2d"
    assert resolve("from utils import *", "F.relu") == "torch.nn.functional.relu"
    assert resolve("", "DataLoader") == "torch.utils.data.DataLoader"
    assert resolve("from mylib import DataLoader", "DataLoader") == "mylib.DataLoader"
    assert resolve("def DataLoader(x):\n    pass\n", "DataLoader") is None
    assert resolve("F = 3\n", "F.relu") is None


def test_rebound_name_does_not_resolve() -> None:
    source = "from torch.utils.data import DataLoader\nDataLoader = make_loader_class()\n"
    assert resolve(source, "DataLoader") is None
    source = "from torch.utils.data import DataLoader\nclass DataLoader:\n    pass\n"
    assert resolve(source, "DataLoader") is None


def test_canonical_keeps_public_names() -> None:
    assert canonical("torch.utils.data.DataLoader") == "torch.utils.data.DataLoader"
    assert canonical("torch.nn.modules.batchnorm.BatchNorm2d") == "torch.nn.BatchNorm2d"


def test_results_do_not_depend_on_hash_seed(tmp_path) -> None:
    target = tmp_path / "m.py"
    target.write_text(
        "import torch.utils.data as tud\nfrom torch.utils.data import DataLoader as DL\n"
        "a = DL(x)\nb = tud.DataLoader(y)\nc = tud.DataLoader(z, num_workers=0)  # noqa: TL101\n",
        encoding="utf-8",
    )
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-m", "torchlint", "check", "--no-cache", "--output-format", "json", str(target)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert proc.returncode == 1, proc.stderr
        outputs.add(proc.stdout)
    assert len(outputs) == 1


def test_bound_value_follows_tuples_element_by_element() -> None:
    def bound(code: str, name: str) -> str | None:
        assign = cst.parse_statement(code).body[0]
        found = bound_value(assign.targets[0].target, assign.value, name)
        return None if found is None else cst.Module([]).code_for_node(found)

    assert bound("x = a + 1", "x") == "a + 1"
    assert bound("x, (y, z) = a, (b, c)", "z") == "c"
    assert bound("x, y = pair", "y") is None  # no tuple on the right: parts of one value
    assert bound("x, y = *rest, b", "y") is None  # a starred element moves the positions
    assert bound("x, y = a, b, c", "y") is None
    assert bound("x, y = a, b", "w") is None
