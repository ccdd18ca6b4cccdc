"""What kind of file a rule is looking at."""

from __future__ import annotations

from torchlint.semantic.file_kind import is_test_file
from torchlint.semantic.placement import uses_accelerator

PYTEST = "import pytest\n\ndef test_shape():\n    assert True\n"
SCRIPT = "import torch\n\ndef test(model, loader):\n    model.eval()\n"


def test_test_modules_need_a_test_name_and_test_code() -> None:
    assert is_test_file("tests/models/test_resnet.py", SCRIPT)  # a tests/ directory is enough
    assert is_test_file("conftest.py", "")
    assert is_test_file("pkg/foo_test.py", PYTEST)
    assert is_test_file("test_model.py", "import unittest\n")
    assert not is_test_file("scripts/test.py", SCRIPT)  # an evaluation script, not a test suite
    assert not is_test_file("owner__repo__test.py", SCRIPT)  # a flattened path ending in _test.py
    assert not is_test_file("eval_test.py", SCRIPT)
    assert not is_test_file("train.py", PYTEST)


def test_accelerator_evidence_ignores_comments() -> None:
    assert uses_accelerator("model = Net().to(device)\n")
    assert uses_accelerator("x = x.cuda()\n")
    assert not uses_accelerator("model = Net()  # .to(device)\n# x = x.cuda()\nloss.item()\n")
    assert not uses_accelerator("import torch\nloader = DataLoader(ds)\n")


def test_accelerator_evidence_needs_something_placed_on_a_device() -> None:
    for code in (
        "x = x.to(device)\n",
        "x = x.to(args.device, non_blocking=True)\n",
        "x = x.to(DEVICE)\n",
        "x = x.to('cuda:0')\n",
        "x = x.to(rank)\n",
        "x = x.to(other.device)\n",
        "z = torch.randn(4, 8, device=dev)\n",
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
        "accelerator = Accelerator()\n",
        "trainer = Trainer(accelerator='gpu')\n",
        "torch.cuda.set_device(args.local_rank)\n",
        "model = nn.DataParallel(model)\n",
    ):
        assert uses_accelerator(code), code
    for code in (
        "print([torch.cuda.device(i) for i in range(torch.cuda.device_count())])\n",
        "print(torch.cuda.is_available())\n",
        "x = x.to(torch.float32)\n",
        "device = 'cpu'\nprint(device)\n",
        "# model.cuda()\n",
    ):
        assert not uses_accelerator(code), code
