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
# Evidence that code runs on an accelerator. Merely asking (`torch.cuda.is_available()`, listing
# `torch.cuda.device(i)`) or naming a device is not enough: something must be placed on one.
_DEVICE_NAME = r"(?:[\w.]*\.)?(?:\w*device\w*|\w*DEVICE\w*|dev|gpu|gpus|gpu_id|gpu_ids\[\w*\]|cuda|rank|local_rank)"
_ACCELERATOR = re.compile(
    r"\.cuda\("  # x.cuda(), model.cuda(0)
    r"|\.to\(\s*(?:" + _DEVICE_NAME + r"\s*[,)]"  # .to(device), .to(args.device, non_blocking=True), .to(rank)
    r"|f?[\"'](?:cuda|mps|xpu|npu|hpu)"  # .to("cuda:0")
    r"|torch\.device\(|device\s*=|[\w.]+\.device\b)"  # .to(torch.device(...)), .to(device=...), .to(x.device)
    r"|[(,]\s*device\s*=(?!=)"  # torch.zeros(n, device=device), Tensor.to(..., device=...)
    r"|torch\.device\(\s*f?[\"'](?:cuda|mps|xpu|npu|hpu)"  # torch.device("cuda" if ... else "cpu")
    r"|\b[Aa]ccelerator\b"  # HF accelerate, Lightning's accelerator=
    r"|\blocal_rank\b"
    r"|\bcuda\.(?:set_device|synchronize|amp|FloatTensor|LongTensor|current_device)\b"
    r"|\bDistributedDataParallel\b|\bDataParallel\b|\bgpus\s*=",
)


def uses_accelerator(text: str) -> bool:
    """Whether the code (comments aside) puts something on a GPU or another accelerator: a `.cuda()`
    call, `.to(device)` (a device-like name, `"cuda"`, `torch.device(...)`, `x.device`), a `device=`
    keyword, `torch.device("cuda")`, an `Accelerator`/`accelerator`, `local_rank`, `DataParallel`,
    `torch.cuda.set_device`/`synchronize`/`amp`.

    A script with every `.to(device)` commented out, an MNIST tutorial that never leaves the CPU, or one
    that only prints `torch.cuda.is_available()` pays nothing for an `.item()` and little for loading data
    in the main process.
    """
    code = _TRAILING_COMMENT.sub("", _COMMENT_LINE.sub("", text))
    return bool(_ACCELERATOR.search(code))
