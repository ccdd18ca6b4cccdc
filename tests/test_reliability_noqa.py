"""Suppression comments: only real comments count, the whole-file form only on a line of its own, and
removing an unused directive leaves its neighbours alone."""

from __future__ import annotations

import pytest

from torchlint.lint.api import lint_source
from torchlint.lint.scan import LineScanner
from torchlint.lint.suppress import find_suppressions

LOADER = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n"


def _fixed(text: str) -> str:
    result = lint_source(text, "m.py", select=["ALL"], fix=True)
    return result.fixed_text if result.fixed_text is not None else text


def test_removing_an_unused_directive_keeps_the_next_comment() -> None:
    text = "import torch\nx = 1  # noqa: TL101 # type: ignore\ny = 2  # noqa: TL101  # pragma: no cover\n"
    assert _fixed(text) == "import torch\nx = 1  # type: ignore\ny = 2  # pragma: no cover\n"


def test_removing_an_unused_directive_keeps_trailing_prose_a_comment() -> None:
    assert _fixed("import torch\nx = 1  # noqa: TL101 kept for now\n") == "import torch\nx = 1  # kept for now\n"


def test_a_directive_inside_a_string_is_never_edited_when_tokenize_fails() -> None:
    # Python 3.12 f-string syntax: the 3.11 tokenizer reads `(` as code and fails at the end of the file.
    text = 'import torch\nx = {"(": 1}\ns = f"{x["("]}"\nm = "x # noqa: TL101 y"\nt = 1  # noqa: TL101\n'
    fixed = _fixed(text)
    assert 'm = "x # noqa: TL101 y"' in fixed
    assert fixed.endswith("t = 1\n")


@pytest.mark.parametrize(
    "text",
    [
        "x = 1  # torchlint: noqa\n",
        's = "# torchlint: noqa"\n',
        's = """\n# torchlint: noqa\n"""\n',
        "x = 1  # see the docs # torchlint: noqa\n",
        'd = {"(": 1}\nf = f"{d["("]}"\ns = "# torchlint: noqa"\n',
    ],
    ids=["trailing", "quoted", "in-docstring", "not-first", "quoted-untokenizable"],
)
def test_whole_file_noqa_only_on_a_comment_line_of_its_own(text: str) -> None:
    assert not find_suppressions(text).whole_file
    assert [f.code for f in lint_source(text + LOADER, "m.py").findings] == ["TL101"]


def test_whole_file_noqa_on_its_own_line_silences_the_file() -> None:
    text = "# torchlint: noqa\n" + LOADER
    assert find_suppressions(text).whole_file
    assert lint_source(text, "m.py").findings == []
    assert find_suppressions("import x\n    # torchlint: noqa\n").whole_file


@pytest.mark.parametrize(
    "line, column",
    [
        ('s = "a # b"  # real', 13),
        ("s = f'{x[\"#\"]}' # c", 16),
        ("s = f'{x!r:>{w}}#'", None),
        ("s = f'{{#}}'", None),
        ("s = rb'#'  # c", 11),
    ],
)
def test_scanner_finds_only_real_comments(line: str, column) -> None:
    assert LineScanner().feed(line) == column
