"""Fixes leave code a formatter would not touch: keywords in the call's layout, long calls split, imports in
the right block, statements after the imports, and nothing that ruff's E, W and I rules did not report
before the fix."""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from lint_testing import ROOT
from torchlint.lint.api import lint_source
from torchlint.lint.engine import lint_text
from torchlint.lint.fix import add_keyword, fix_file
from torchlint.lint.placement import insert_after_imports
from torchlint.lint.rule import Fix, Replace, Rule
from torchlint.lint.source import decode_python

# -- add_keyword ---------------------------------------------------------------------------------------


def _with_keyword(source: str, name: str = "pin_memory", value: str = "True") -> str:
    """`source` (a module whose first statement is `x = CALL`) with the keyword added to CALL."""
    module = cst.parse_module(source)
    statement = module.body[0]
    call = statement.body[0].value  # type: ignore[union-attr]
    return module.deep_replace(call, add_keyword(call, name, value)).code  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("x = f()\n", "x = f(pin_memory=True)\n"),
        ("x = f(a)\n", "x = f(a, pin_memory=True)\n"),
        ("x = f(a, b=1)  # note\n", "x = f(a, b=1, pin_memory=True)  # note\n"),
        ("x = f(a, b,)\n", "x = f(a, b, pin_memory=True,)\n"),
        ("x = f(*args, **kw)\n", "x = f(*args, **kw, pin_memory=True)\n"),
        ("x = f(a, pin_memory=False)\n", "x = f(a, pin_memory=True)\n"),  # set in place
        # one argument per line, trailing comma: the new one follows with the same indentation and comma
        ("x = f(\n    a,\n    b=1,\n)\n", "x = f(\n    a,\n    b=1,\n    pin_memory=True,\n)\n"),
        # one argument per line, no trailing comma: none added
        ("x = f(\n    a,\n    b=1\n)\n", "x = f(\n    a,\n    b=1,\n    pin_memory=True\n)\n"),
        # a single argument on its own line
        ("x = f(\n    a\n)\n", "x = f(\n    a,\n    pin_memory=True\n)\n"),
        ("x = f(\n    a,\n)\n", "x = f(\n    a,\n    pin_memory=True,\n)\n"),
        # arguments aligned under the first one
        ("x = f(a,\n      b)\n", "x = f(a,\n      b,\n      pin_memory=True)\n"),
        # a comment after the last argument stays on that argument's line; others are not copied
        (
            "x = f(\n    a,  # the data\n    b=1,  # batch\n)\n",
            "x = f(\n    a,  # the data\n    b=1,  # batch\n    pin_memory=True,\n)\n",
        ),
        ("x = f(\n    a,  # the data\n    b=1  # batch\n)\n", "x = f(\n    a,  # the data\n    b=1,  # batch\n    pin_memory=True\n)\n"),
        # the arguments on one line of their own: the keyword joins them there
        ("x = f(\n    a, b=1\n)\n", "x = f(\n    a, b=1, pin_memory=True\n)\n"),
        # blank lines between arguments are not repeated
        ("x = f(\n    a,\n\n    b=1,\n)\n", "x = f(\n    a,\n\n    b=1,\n    pin_memory=True,\n)\n"),
    ],
)
def test_add_keyword_follows_the_calls_layout(before: str, after: str) -> None:
    assert _with_keyword(before) == after
    assert all(line == line.rstrip() for line in after.splitlines())


def test_add_keyword_inside_a_block_keeps_the_block_indentation() -> None:
    source = "def f():\n    x = g(\n        a,\n        b,\n    )\n"
    module = cst.parse_module(source)
    call = module.body[0].body.body[0].body[0].value  # type: ignore[attr-defined]
    new = module.deep_replace(call, add_keyword(call, "k", "1")).code  # type: ignore[arg-type]
    assert new == "def f():\n    x = g(\n        a,\n        b,\n        k=1,\n    )\n"


def test_add_keyword_takes_an_expression_too() -> None:
    call = cst.parse_expression("f(a)")
    assert isinstance(call, cst.Call)
    new = add_keyword(call, "device", cst.SimpleString('"cuda"'))
    assert cst.Module([]).code_for_node(new) == 'f(a, device="cuda")'


# -- the engine: long lines, imports, statements --------------------------------------------------------


class _AddKeyword(Rule, register=False):
    """Test rule: `load(...)` gets `workers=os.cpu_count()` (needs `import os`)."""

    code = "TL990"
    name = "add-keyword-for-tests"
    family = "Suppressions"
    summary = message = explanation = bad = good = "test only"
    requires = ("load",)
    module = "os"
    value = "os.cpu_count()"

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "load" and not any(a.keyword and a.keyword.value == "workers" for a in node.args):
            fix = Fix("add workers", [Replace(node, add_keyword(node, "workers", self.value))], imports=(self.module,))
            self.report(node, fix=fix)


class _NeedsTorch(_AddKeyword, register=False):
    code = "TL991"
    module = "torch"
    value = "torch.get_num_threads()"


class _SetsBackend(Rule, register=False):
    """Test rule: a module-level `torch.backends.cudnn.benchmark = True`, placed by insert_after_imports."""

    code = "TL992"
    name = "setting-for-tests"
    family = "Suppressions"
    summary = message = explanation = bad = good = "test only"
    requires = ("train",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "train" and "cudnn" not in self.context.source.text:
            change = insert_after_imports(self.context.module, "torch.backends.cudnn.benchmark = True")
            self.report(node, fix=Fix("turn on autotuning", [change], imports=("torch",)))


def _fixed(text: str, rule: type[Rule] = _AddKeyword) -> str:
    source = decode_python("x.py", text.encode())
    fixed, _ = fix_file(source, lambda s: lint_text(s, [rule]), unsafe=True)
    return fixed.text


def test_a_call_that_no_longer_fits_is_split_as_ruff_formats_it() -> None:
    short = "import os\n\nloader = load(dataset, batch_size=32)\n"
    assert _fixed(short) == "import os\n\nloader = load(dataset, batch_size=32, workers=os.cpu_count())\n"
    long = "import os\n\nloader = load(training_dataset_long_name, batch_size=32, shuffle=True)\n"
    assert _fixed(long) == (
        "import os\n\nloader = load(\n    training_dataset_long_name, batch_size=32, shuffle=True, workers=os.cpu_count()\n)\n"
    )
    longer = "import os\n\nloader = load(training_dataset_with_a_long_name, batch_size=32, shuffle=True, drop=1)\n"
    assert _fixed(longer) == (
        "import os\n\nloader = load(\n    training_dataset_with_a_long_name,\n    batch_size=32,\n    shuffle=True,\n"
        "    drop=1,\n    workers=os.cpu_count(),\n)\n"
    )
    nested = "import os\n\n\ndef f():\n    if x:\n        loader = load(training_dataset_with_a_long_name, batch_size=32)\n"
    assert _fixed(nested).endswith(
        "        loader = load(\n            training_dataset_with_a_long_name, batch_size=32, workers=os.cpu_count()\n        )\n"
    )
    # A file written with long lines keeps them.
    wide = "import os\n\nloader = load(dataset, batch_size=32)  # " + "x" * 80 + "\n"
    assert _fixed(wide) == wide.replace("batch_size=32)", "batch_size=32, workers=os.cpu_count())")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # the standard library block, sorted
        (
            "import json\nimport sys\n\nimport torch\n\nx = load(d)\n",
            "import json\nimport os\nimport sys\n\nimport torch\n\nx = load(d, workers=os.cpu_count())\n",
        ),
        # an unsorted block: at its end
        (
            "import sys\nimport json\n\nx = load(d)\n",
            "import sys\nimport json\nimport os\n\nx = load(d, workers=os.cpu_count())\n",
        ),
        # only third-party imports: a standard-library block of its own above them
        (
            "import torch\nfrom torch.utils.data import DataLoader\n\nx = load(d)\n",
            "import os\n\nimport torch\nfrom torch.utils.data import DataLoader\n\nx = load(d, workers=os.cpu_count())\n",
        ),
        # after the docstring and the __future__ imports; above the comment that describes an import
        (
            '"""Doc."""\nfrom __future__ import annotations\n\n# the model\nimport torch\n\nx = load(d)\n',
            '"""Doc."""\nfrom __future__ import annotations\n\nimport os\n\n# the model\nimport torch\n\nx = load(d, workers=os.cpu_count())\n',
        ),
        # no imports at all: after the docstring, one blank line before the code
        ('"""Doc."""\nx = load(d)\n', '"""Doc."""\nimport os\n\nx = load(d, workers=os.cpu_count())\n'),
        ("x = load(d)\n", "import os\n\nx = load(d, workers=os.cpu_count())\n"),
        # ... two before a function
        ("def f():\n    return load(d)\n", "import os\n\n\ndef f():\n    return load(d, workers=os.cpu_count())\n"),
    ],
)
def test_a_new_standard_library_import_joins_its_block(before: str, after: str) -> None:
    assert _fixed(before) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "import os\n\nimport numpy as np\nimport tqdm\n\nx = load(d)\n",
            "import os\n\nimport numpy as np\nimport torch\nimport tqdm\n\nx = load(d, workers=torch.get_num_threads())\n",
        ),
        # only standard-library imports: a block of its own below them
        ("import os\n\nx = load(d)\n", "import os\n\nimport torch\n\nx = load(d, workers=torch.get_num_threads())\n"),
        # `import torch` only inside try:, a function, or further down does not bind it where it is used
        (
            "import os\n\ntry:\n    import torch\nexcept ImportError:\n    torch = None\nx = load(d)\n",
            "import os\n\nimport torch\n\ntry:\n    import torch\nexcept ImportError:\n    torch = None\nx = load(d, workers=torch.get_num_threads())\n",
        ),
        (
            "import os\n\n\ndef g():\n    import torch\n\n\nx = load(d)\n",
            "import os\n\nimport torch\n\n\ndef g():\n    import torch\n\n\nx = load(d, workers=torch.get_num_threads())\n",
        ),
        (
            "import os\n\nx = load(d)\nimport torch\n",
            "import os\n\nimport torch\n\nx = load(d, workers=torch.get_num_threads())\nimport torch\n",
        ),
        # already bound at the top: nothing added (`import torch.nn` binds `torch` too)
        ("import torch.nn\n\nx = load(d)\n", "import torch.nn\n\nx = load(d, workers=torch.get_num_threads())\n"),
    ],
)
def test_a_new_third_party_import_and_torch_bound_where_used(before: str, after: str) -> None:
    assert _fixed(before, _NeedsTorch) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            '"""Doc."""\nimport torch\n\n\ndef step():\n    pass\n\n\ntrain()\n',
            '"""Doc."""\nimport torch\n\ntorch.backends.cudnn.benchmark = True\n\n\ndef step():\n    pass\n\n\ntrain()\n',
        ),
        (
            "import torch\n\n# the loop\ntrain()\n",
            "import torch\n\ntorch.backends.cudnn.benchmark = True\n\n# the loop\ntrain()\n",
        ),
        # above the comment that describes the first statement
        ("import torch\n# the loop\ntrain()\n", "import torch\ntorch.backends.cudnn.benchmark = True\n\n# the loop\ntrain()\n"),
        ('"""Doc."""\ntrain()\n', '"""Doc."""\nimport torch\n\ntorch.backends.cudnn.benchmark = True\n\ntrain()\n'),
    ],
)
def test_a_statement_goes_after_the_imports(before: str, after: str) -> None:
    assert _fixed(before, _SetsBackend) == after


def test_a_deleted_argument_takes_its_line_with_it() -> None:
    text = "import torch\n\nfor x in data:\n    opt.zero_grad(\n        set_to_none=False,\n    )\n    loss(x).backward()\n    opt.step()\n"
    result = lint_source(text, select=["TL303"], unsafe_fixes=True)
    assert result.fixed_text is not None and "        \n" not in result.fixed_text
    assert "    opt.zero_grad(\n    )\n" in result.fixed_text


# -- ruff sees nothing new ----------------------------------------------------------------------------

_FIXTURES = sorted((ROOT / "fixtures" / "lint").glob("*/bad.py"))


def _ruff_codes(text: str, name: str) -> collections.Counter:
    exe = shutil.which("ruff")
    command = [exe] if exe else [sys.executable, "-m", "ruff"]
    proc = subprocess.run(
        [*command, "check", "--isolated", "--no-cache", "--select", "E,W,I", "--output-format", "json", "--stdin-filename", name, "-"],
        input=text,
        capture_output=True,
        text=True,
    )
    return collections.Counter(d["code"] for d in json.loads(proc.stdout))


@pytest.mark.parametrize("path", _FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_ruff_reports_nothing_new_after_fixing(path: Path) -> None:
    pytest.importorskip("ruff")
    text = path.read_text(encoding="utf-8")
    result = lint_source(text, str(path), select=["ALL"], unsafe_fixes=True)
    if result.fixed_text is None:
        return
    new = _ruff_codes(result.fixed_text, path.name) - _ruff_codes(text, path.name)
    assert not new, f"ruff finds new {dict(new)} after fixing {path.name}"
