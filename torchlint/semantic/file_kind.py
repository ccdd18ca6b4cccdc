"""The kind of file: a test module, a script run as `__main__`, PyTorch code at all."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.lint.context import Context


def main_guarded(context: Context, node: cst.CSTNode) -> bool:
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, cst.If) and _is_main_test(ancestor.test):
            return True
    return False


def _is_main_test(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return bool(names and strings)


def has_main_guard(module: cst.Module) -> bool:
    return any(isinstance(stmt, cst.If) and _is_main_test(stmt.test) for stmt in module.body)


_IMPORTS_TORCH = re.compile(r"^[ \t]*(import|from)[ \t]+torch(vision|audio|text)?\b", re.MULTILINE)

_OTHER_FRAMEWORK = re.compile(
    r"^[ \t]*(import|from)[ \t]+(paddle|tensorflow|keras|jax|flax|mindspore|oneflow|jittor|mxnet|megengine|cupy)\b",
    re.MULTILINE,
)

_COMMENTS = re.compile(r"^[ \t]*#.*$|#[^'\"\n]*$", re.MULTILINE)


def uses_torch(text: str) -> bool:
    """Whether the file is PyTorch code: it imports torch, or (snippets, `from utils import *`) imports no
    other framework and uses `torch.` in its code or moves values to the GPU with `.cuda()`."""
    if _IMPORTS_TORCH.search(text):
        return True
    if _OTHER_FRAMEWORK.search(text):
        return False  # a Paddle / TensorFlow / ... script, whatever its comments or strings say about torch
    code = _COMMENTS.sub("", text)
    return bool(re.search(r"(?<![\w.])torch\.\w", code)) or ".cuda(" in code


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
