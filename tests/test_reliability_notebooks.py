"""Notebooks: malformed ones are one line, magics are told from Python, fixes stay inside their cells
and the file keeps its own JSON style."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from lint_testing import write
from torchlint.cli import cli
from torchlint.lint.notebook import mask_magics
from torchlint.lint.source import SourceError, decode_notebook


def _notebook(*cells, source_as_list: bool = True) -> dict:
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": c.splitlines(keepends=True) if source_as_list else c,
            }
            for c in cells
        ],
        "metadata": {"kernelspec": {"name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.mark.parametrize(
    "data, reason",
    [
        ('{"cells": [5], "metadata": {}}', "not a valid notebook: cell 1 is not a JSON object"),
        ('{"cells": [{"cell_type": "code", "source": [1, 2]}]}', "not a valid notebook: cell 1's source is not text"),
        ('{"cells": [{"cell_type": "code", "source": 7}]}', "not a valid notebook: cell 1's source is not text"),
        ("[" * 100_000 + "]" * 100_000, "not a valid notebook: JSON nested too deeply"),
        ('{"cells": [], "n": ' + "9" * 5000 + "}", "not a valid notebook: Exceeds the limit"),
    ],
    ids=["cell-not-object", "source-ints", "source-int", "deep-json", "long-int"],
)
def test_malformed_notebooks_are_one_line(runner, project: Path, data: str, reason: str) -> None:
    write(project / "bad.ipynb", data)
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix"])
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1
    assert f"bad.ipynb: error: {reason}" in result.output


def test_a_fix_that_would_carry_a_statement_into_the_next_cell_is_dropped(runner, project: Path) -> None:
    # forward passes in loops (one forward pass in a script runs once and is not reported)
    notebook = _notebook(
        "import torch\nmodel = Net()\nmodel.eval()\nfor x in xs:\n    out = model(x)\n",
        "for y in ys:\n    out2 = model(y)\nprint(out)\n",
    )
    path = write(project / "nb.ipynb", json.dumps(notebook, indent=1))
    before = path.read_text()
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix", "--unsafe-fixes"])
    after = json.loads(path.read_text())
    assert "".join(after["cells"][1]["source"]) == "for y in ys:\n    out2 = model(y)\nprint(out)\n"
    for cell in after["cells"]:
        compile("".join(cell["source"]), "cell", "exec")
    assert path.read_text() == before
    assert "nb.ipynb: warning: fix for TL301 at line 3 dropped: a notebook cell would not parse" in result.output


@pytest.mark.parametrize("indent", [1, 2, 4])
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_a_fixed_notebook_keeps_its_json_style(runner, project: Path, indent: int, ensure_ascii: bool) -> None:
    notebook = _notebook(
        "# caf\u00e9 \u2014 \u03bb\nimport torch\nfrom torch.utils.data import DataLoader\n",
        "loader = DataLoader(ds, batch_size=8)\nmodel = net.cuda()\n",
        "print('\u00e9t\u00e9')\nx = 1\n",
    )
    notebook["cells"][2]["source"] = "print('\u00e9t\u00e9')\nx = 1\n"  # a string, as some tools write it
    text = json.dumps(notebook, indent=indent, ensure_ascii=ensure_ascii)  # no trailing newline
    path = write(project / "nb.ipynb", text)
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix", "--unsafe-fixes"])
    assert "Fixed 1" in result.output, result.output
    new = path.read_text(encoding="utf-8")
    diff = [d for d in difflib.ndiff(text.splitlines(), new.splitlines()) if d[:1] in "+-"]
    removed = [d[2:] for d in diff if d[0] == "-"]
    added = [d[2:] for d in diff if d[0] == "+"]
    # Only the fixed line and the import the fix adds (its own block, so a blank line after it) change.
    assert 1 <= len(removed) <= 2 and all("DataLoader" in line for line in removed), diff
    assert sum("import os" in line for line in added) == 1 and sum("num_workers" in line for line in added) == 1, diff
    assert len(added) - len(removed) <= 2, diff
    assert not new.endswith("\n")
    assert json.loads(new)["cells"][2]["source"] == "print('\u00e9t\u00e9')\nx = 1\n"


@pytest.mark.parametrize(
    "cell",
    [
        'print("%d items"\n      % (a,))\n',
        "ok = (a\n      != b)\n",
        "x = [a,\n     ?b]\n" if False else "y = (a\n     if c else b)\n",
        'out = !ls \\\n    -la\nprint(out)\n',
        "torch.zeros?\nx = 1\n",
        "model.forward??\n",
        's = """\n%not a magic\n"""\n',
        "t = (1,\n  !=2)\n" if False else "f(a,\n  b) % 3\n",
    ],
    ids=["percent", "not-equal", "conditional", "shell-continued", "help", "help2", "docstring", "operator"],
)
def test_valid_cells_mask_to_valid_python(cell: str) -> None:
    masked = mask_magics(cell)
    assert len(masked) == len(cell)
    compile(masked, "cell", "exec")


def test_continuation_lines_are_not_magics() -> None:
    cell = 'print("%d items"\n      % (a,))\nok = (a\n      != b)\n'
    assert mask_magics(cell) == cell


def test_magic_lines_are_still_masked() -> None:
    masked = mask_magics("%matplotlib inline\nfiles = !ls\nif x:\n    %time f()\nx = 1\n")
    compile(masked, "cell", "exec")
    assert masked.endswith("x = 1\n")


@pytest.mark.parametrize("magic", ["%%time", "%%timeit -n 3", "%%capture out", "\n%%prun"])
def test_a_cell_magic_that_runs_python_keeps_its_body(magic: str) -> None:
    cell = f"{magic}\nfor x, y in loader:\n    !echo step\n    model(x.cuda())\n"
    masked = mask_magics(cell)
    assert len(masked) == len(cell)
    compile(masked, "cell", "exec")
    assert "for x, y in loader:" in masked and "model(x.cuda())" in masked


def test_a_cell_magic_of_another_language_is_hidden() -> None:
    masked = mask_magics("%%bash\nfor f in *.py; do echo $f; done\n")
    assert all(line.startswith("#") for line in masked.splitlines())


def test_help_magic_in_a_notebook_is_not_a_syntax_error(runner, project: Path) -> None:
    write(project / "nb.ipynb", json.dumps(_notebook("import torch\ntorch.zeros?\n", 'print("%d"\n      % (1,))\n')))
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache"])
    assert "error" not in result.output, result.output


def test_decode_notebook_errors_are_source_errors() -> None:
    with pytest.raises(SourceError):
        decode_notebook("x.ipynb", b'{"cells": [null]}')


_EXERCISE = (
    "import torch\nfrom torch.utils.data import DataLoader\n"
    "device = torch.device('cuda')\nloader = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True)\n",
    "def elbo(x):\n    kl = ...\n    return = # your code here\n",
    "for x, y in loader:\n    x = x.to(device)\n    loss = model(x).sum()\n    loss.backward()\n"
    "    optimizer.step()\n    losses.append(loss.item())\n",
)


def test_an_unfinished_exercise_cell_does_not_hide_the_rest_of_the_notebook(runner, project: Path) -> None:
    write(project / "nb.ipynb", json.dumps(_notebook(*_EXERCISE)))
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--exit-zero"])
    lines = [line for line in result.output.splitlines() if line.startswith("nb.ipynb")]
    assert [line.split(": ")[1].split()[0] for line in lines] == ["TL000", "TL103", "TL201"], result.output
    assert lines[0].startswith("nb.ipynb:cell 2:3:")  # the broken cell keeps its own line


def test_fixing_an_exercise_notebook_leaves_its_unfinished_cell_as_written(runner, project: Path) -> None:
    path = write(project / "nb.ipynb", json.dumps(_notebook(*_EXERCISE), indent=1))
    runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "--fix", "--exit-zero"])
    after = json.loads(path.read_text())
    assert "".join(after["cells"][1]["source"]) == _EXERCISE[1]
    assert "non_blocking=True" in "".join(after["cells"][2]["source"])


def test_only_the_cell_that_does_not_parse_is_blanked() -> None:
    source = decode_notebook("nb.ipynb", json.dumps(_notebook(*_EXERCISE)).encode())
    assert [c.syntax_error is not None for c in source.cells] == [False, True, False]
    broken = source.cells[1]
    assert source.text[broken.start : broken.end].strip() == ""
    assert source.text.count("\n") == sum(c.original.count("\n") for c in source.cells)
    fine = decode_notebook("nb.ipynb", json.dumps(_notebook(*_EXERCISE[::2])).encode())
    assert all(c.syntax_error is None for c in fine.cells)
