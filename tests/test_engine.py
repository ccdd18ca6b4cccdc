"""The engine: one walk, constant flow, suppressions, fixes, notebooks."""

from __future__ import annotations

import json

import libcst as cst
from hypothesis import given, settings
from hypothesis import strategies as st

from torchlint.lint.api import lint_source
from torchlint.lint.engine import lint_text
from torchlint.lint.rule import Rule, all_rules
from torchlint.lint.source import decode_python, notebook_from_json

LOADER = "from torch.utils.data import DataLoader\n"


def codes(text: str, **kwargs) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in lint_source(text, **kwargs).findings]


def test_constant_flow_through_module_and_function_scopes() -> None:
    text = LOADER + "N = 0\ndef f(ds):\n    w = N\n    return DataLoader(ds, num_workers=w)\n"
    assert codes(text) == [(5, "TL101")]


def test_parameter_and_reassigned_values_are_undecidable() -> None:
    text = LOADER + "def f(ds, w=0):\n    return DataLoader(ds, num_workers=w)\n"
    assert codes(text) == []
    text = LOADER + "def f(ds):\n    w = 0\n    if ds:\n        w = 4\n    return DataLoader(ds, num_workers=w)\n"
    assert codes(text) == []


def test_function_scope_shadows_module_constant() -> None:
    text = LOADER + "w = 0\ndef f(ds, w):\n    return DataLoader(ds, num_workers=w)\n"
    assert codes(text) == []


def test_imports_inside_functions_resolve() -> None:
    text = "def f(ds):\n    from torch.utils.data import DataLoader\n    return DataLoader(ds)\n"
    assert codes(text) == [(3, "TL101")]


def test_noqa_forms() -> None:
    assert codes(LOADER + "a = DataLoader(ds)  # noqa\n") == []
    assert codes(LOADER + "a = DataLoader(ds)  # noqa: TL101\n") == []
    assert codes(LOADER + "a = DataLoader(ds)  # noqa: TL1\n") == []
    assert codes(LOADER + "a = DataLoader(ds)  # NOQA:TL101,E501\n") == []
    assert codes(LOADER + "a = DataLoader(ds)  # noqa: E501\n") == [(2, "TL101")]
    assert codes(LOADER + 'a = DataLoader(ds, name="# noqa")\n') == [(2, "TL101")]


def test_noqa_on_first_line_of_multiline_statement() -> None:
    text = LOADER + "a = foo(  # noqa: TL101\n    DataLoader(ds),\n)\n"
    assert codes(text) == []


def test_file_level_noqa() -> None:
    assert codes("# torchlint: noqa\n" + LOADER + "a = DataLoader(ds)\n") == []


def test_unused_noqa_is_reported_and_fixed() -> None:
    text = LOADER + "a = DataLoader(ds, num_workers=2)  # noqa: TL101\n"
    result = lint_source(text, fix=True)
    assert result.fixed_text == LOADER + "a = DataLoader(ds, num_workers=2)\n"
    assert codes(text) == [(2, "TL001")]
    # other tools' codes are left alone, and a code that is not selected is not judged
    assert codes(LOADER + "a = DataLoader(ds, num_workers=2)  # noqa: E501\n") == []
    assert codes(LOADER + "a = DataLoader(ds, num_workers=2)  # noqa: TL101\n", select=["TL001"]) == []


def test_fix_keeps_crlf_newlines_and_is_idempotent() -> None:
    text = LOADER.replace("\n", "\r\n") + "a = DataLoader(ds)\r\n"
    fixed = lint_source(text, unsafe_fixes=True).fixed_text
    assert fixed is not None and "\r\n" in fixed and "\n" not in fixed.replace("\r\n", "")
    assert "import os\r\n" in fixed
    assert lint_source(fixed, unsafe_fixes=True).fixed_text is None


def test_fix_adds_import_after_docstring_and_imports() -> None:
    text = '"""Doc."""\nfrom __future__ import annotations\n' + LOADER + "\na = DataLoader(ds)\n"
    fixed = lint_source(text, unsafe_fixes=True).fixed_text
    assert fixed.splitlines()[:5] == [
        '"""Doc."""',
        "from __future__ import annotations",
        "import os",  # the standard library's block, above the third-party one
        "",
        "from torch.utils.data import DataLoader",
    ]


def test_fix_reuses_existing_import() -> None:
    text = "import os\n" + LOADER + "a = DataLoader(ds)\nb = DataLoader(ds)\n"
    fixed = lint_source(text, unsafe_fixes=True).fixed_text
    assert fixed.count("import os") == 1
    assert fixed.count("num_workers=min(8, os.cpu_count() or 1)") == 2


def test_unsafe_fix_needs_opt_in() -> None:
    assert lint_source(LOADER + "a = DataLoader(ds)\n", fix=True).fixed_text is None


class _BrokenFixRule(Rule, register=False):
    """A rule whose fix would not parse: the engine must drop it and say so."""

    code = "TL999"
    name = "broken-fix-for-tests"
    family = "Suppressions"
    summary = message = explanation = bad = good = "test only"
    requires = ("zap",)

    def visit_Call(self, node: cst.Call) -> None:
        from torchlint.lint.rule import Fix, Replace

        if isinstance(node.func, cst.Name) and node.func.value == "zap":
            self.report(node, fix=Fix("break it", [Replace(node, "zap(")]))


def test_fix_that_would_not_parse_is_dropped() -> None:
    from torchlint.lint.fix import fix_file

    source = decode_python("x.py", b"zap()\n")
    fixed, result = fix_file(source, lambda s: lint_text(s, [_BrokenFixRule]), unsafe=True)
    assert fixed.text == "zap()\n"
    assert any("would not parse" in note for note in result.notes)


def test_rule_crash_is_reported_not_raised() -> None:
    class Crashing(_BrokenFixRule, register=False):
        code = "TL998"
        name = "crash-for-tests"

        def visit_Call(self, node: cst.Call) -> None:
            raise RuntimeError("boom")

    result = lint_text(decode_python("x.py", b"zap()\n"), [Crashing])
    assert result.findings == []
    assert any("internal error in rule TL998" in note for note in result.notes)


# A notebook that never uses an accelerator is a CPU program, where TL101 stays silent.
ON_GPU = "model = model.cuda()\n"


def _notebook(*cells: str) -> dict:
    return {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Title\n"]},
            *[
                {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c.splitlines(keepends=True)}
                for c in cells
            ],
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_notebook_findings_name_the_cell_and_fix_cells() -> None:
    from torchlint.lint.runner import Job, process_source
    from torchlint.config import Settings

    notebook = _notebook("%matplotlib inline\n" + LOADER, "!nvidia-smi\nloader = DataLoader(ds)\n", ON_GPU)
    source = notebook_from_json("nb.ipynb", notebook)
    result = process_source(source, Job(Settings(), fix=True, unsafe_fixes=True, diff=True))
    assert result.fixed == 1
    fixed = json.loads(result.new_text)
    cell2 = "".join(fixed["cells"][2]["source"])
    assert cell2 == "!nvidia-smi\nloader = DataLoader(ds, num_workers=min(8, os.cpu_count() or 1))\n"
    assert "".join(fixed["cells"][1]["source"]).startswith("%matplotlib inline\n")
    lint = process_source(source, Job(Settings()))
    assert [(f.code, source.cell_at_line(f.line)) for f in lint.findings] == [("TL101", (3, 2))]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "a = DataLoader(ds)\n",
                "b = DataLoader(ds, num_workers=0)\n",
                "c = DataLoader(\n    ds,\n    batch_size=2,\n)\n",
                "d = DataLoader(ds, num_workers=4)  # noqa: TL101\n",
                "def f(x):\n    return DataLoader(x, shuffle=True)\n",
                "# a comment\n",
                "x = [DataLoader(i) for i in range(3)]\n",
                "e = g(DataLoader(ds), DataLoader(ds, num_workers=0))\n",
            ]
        ),
        max_size=8,
    )
)
def test_fixing_any_mix_parses_and_is_stable(parts: list[str]) -> None:
    text = LOADER + "".join(parts)
    result = lint_source(text, unsafe_fixes=True)
    fixed = result.fixed_text if result.fixed_text is not None else text
    cst.parse_module(fixed)
    assert lint_source(fixed, unsafe_fixes=True).fixed_text is None
    assert [f for f in lint_source(fixed).findings if f.code in ("TL101", "TL001")] == []


class _WrapRule(Rule, register=False):
    """Test rule: adds `flag=True` to calls of `wrapme`, and rewrites `del_me = ...` statements."""

    code = "TL997"
    name = "wrap-for-tests"
    family = "Suppressions"
    summary = message = explanation = bad = good = "test only"

    def visit_Call(self, node: cst.Call) -> None:
        from torchlint.lint.calls import with_keyword
        from torchlint.lint.rule import Fix, Replace

        if isinstance(node.func, cst.Name) and node.func.value == "wrapme" and not node.args[-1].keyword:
            self.report(node, fix=Fix("flag", [Replace(node, with_keyword(node, "flag", "True"))]))

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        from torchlint.lint.rule import Fix, Replace

        small = node.body[0]
        if isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name):
            if small.targets[0].target.value == "del_me":
                new = node.with_changes(body=[small.with_changes(targets=[small.targets[0].with_changes(target=cst.Name("kept"))])])
                self.report(node, fix=Fix("rename", [Replace(node, new)]))


def test_node_replacements_keep_block_indentation_and_comments() -> None:
    from torchlint.lint.fix import fix_file

    text = (
        "def f():\n"
        "    if x:\n"
        "        # above\n"
        "        y = wrapme(\n"
        "            a,\n"
        "            b,\n"
        "        )  # tail\n"
        "        del_me = g(\n"
        "            c,\n"
        "        )  # trailing\n"
    )
    fixed, _ = fix_file(decode_python("x.py", text.encode()), lambda s: lint_text(s, [_WrapRule]), unsafe=True)
    assert fixed.text == (
        "def f():\n"
        "    if x:\n"
        "        # above\n"
        "        y = wrapme(\n"
        "            a,\n"
        "            b,\n"
        "            flag=True,\n"
        "        )  # tail\n"
        "        kept = g(\n"
        "            c,\n"
        "        )  # trailing\n"
    )


def test_notebook_magics_inside_blocks_and_assigned() -> None:
    notebook = _notebook(
        "import os\nif os.environ.get('COLAB'):\n    !pip install timm\n    files = !ls\n",
        "%%bash\necho hi\n",
        LOADER + "loader = DataLoader(ds)\n",
        ON_GPU,
    )
    source = notebook_from_json("nb.ipynb", notebook)
    result = lint_text(source, [all_rules()["TL101"]])
    assert [(f.code, source.cell_at_line(f.line)) for f in result.findings] == [("TL101", (4, 2))]


def test_valid_code_that_libcst_checks_would_refuse_is_linted() -> None:
    # libcst's check of a conditional expression raises TypeError on `else(lambda: ...)`: neither the
    # parse nor the positions of the findings may run it
    text = LOADER + "y = () if 0 else(lambda:())\nloader = DataLoader(ds)\n"
    assert codes(text) == [(3, "TL101")]


def test_nodes_built_outside_the_parser_are_still_checked() -> None:
    codes(LOADER + "loader = DataLoader(ds)\n")
    try:
        cst.Name("not a name")
    except cst.CSTValidationError:
        pass
    else:
        raise AssertionError("a node built after a parse was not checked")


def test_positions_from_the_provider_pass_equal_the_public_way() -> None:
    from libcst.metadata import MetadataWrapper, PositionProvider

    from torchlint.lint.engine import _positions_of

    module = cst.parse_module(LOADER + "for x in loader:\n    print(x.item())\n")
    public = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    assert dict(_positions_of(module)) == dict(public) and len(public) > 20
