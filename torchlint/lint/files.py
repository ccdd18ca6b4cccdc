"""What kind of file this is, as far as rules care: a test module, a script that uses an accelerator."""

from __future__ import annotations

import re

_TEST_DIR = re.compile(r"(^|[\\/])(tests?|testing|unittests)[\\/]")
_TEST_NAME = re.compile(r"(^|[\\/])(test_[^\\/]*|[^\\/]*_test|tests)\.(py|ipynb)$")
_CONFTEST = re.compile(r"(^|[\\/])conftest\.py$")
_TEST_CODE = re.compile(r"^\s*(import (pytest|unittest)\b|from (pytest|unittest)\b|def test_\w*\(|class Test\w*\b)", re.MULTILINE)


def is_test_file(path: str, text: str) -> bool:
    """A module of a test suite: in a tests/ directory, a conftest.py, or named like a test module and
    written like one (pytest/unittest imports, `def test_...`). A user's own `test.py` or `eval_test.py`
    that evaluates a model is a script, not a test module."""
    if _TEST_DIR.search(path) or _CONFTEST.search(path):
        return True
    return bool(_TEST_NAME.search(path)) and bool(_TEST_CODE.search(text))


_COMMENT_LINE = re.compile(r"^[ \t]*#.*$", re.MULTILINE)
_TRAILING_COMMENT = re.compile(r"#[^'\"\n]*$", re.MULTILINE)
_ACCELERATOR = re.compile(r"\bcuda\b|\bdevice\b|\.to\(|\baccelerator\b|\bmps\b|\bxpu\b|\blocal_rank\b|\bgpus?\b")


def uses_accelerator(text: str) -> bool:
    """Whether the code (comments aside) shows any sign of running on a GPU or another accelerator.

    A script with every `.to(device)` commented out, or an MNIST tutorial that never leaves the CPU,
    pays nothing for an `.item()` and little for loading data in the main process.
    """
    code = _TRAILING_COMMENT.sub("", _COMMENT_LINE.sub("", text))
    return bool(_ACCELERATOR.search(code))
