"""Element walks (a builtin running through a device tensor element by element) and CUDA constructors."""

from __future__ import annotations

import libcst as cst

from tests.semantic.semantic_probe import ask
from torchlint.semantic.cuda_constructors import builds_on_accelerator
from torchlint.semantic.element_walks import walks_device_tensor

HEAD = """
import torch
device = torch.device("cuda")
USE_CUDA = torch.cuda.is_available()
LongTensor = torch.cuda.LongTensor if USE_CUDA else torch.LongTensor
HostTensor = torch.LongTensor
lengths = torch.randint(1, 9, (32,)).to(device)
batch = torch.randint(0, 9, (32, 8)).to(device)
words = [3, 1, 2]
"""


def _walk(model, call, argument) -> str:  # type: ignore[no-untyped-def]
    found = walks_device_tensor(model.context, argument, model.per_sample_loops.device_tensor)
    return "none" if found is None else type(found).__name__


def test_builtins_walking_a_device_tensor_or_its_rows() -> None:
    source = HEAD + """
probe(max(lengths))
probe(sorted(lengths.data))
probe(max(words))
probe(max(lengths, 3))
probe(min(lengths.cpu()))
[tuple(probe(map(lambda s: s == 0, row.data))) for row in batch]
probe(map(lambda t: t.view(2, -1), batch.chunk(2)))
"""
    assert ask(source, _walk) == ["Call", "Call", "none", "none", "none", "ListComp", "none"]


def test_a_rebound_builtin_is_not_a_walk() -> None:
    source = HEAD + "def max(x):\n    return x\nprobe(max(lengths))\n"
    assert ask(source, _walk) == ["none"]


def _constructor(model, call, argument) -> bool:  # type: ignore[no-untyped-def]
    return isinstance(argument, cst.Call) and builds_on_accelerator(model.context, argument)


def test_constructors_picked_by_whether_cuda_is_there() -> None:
    source = HEAD + """
probe(LongTensor(words))
probe(torch.cuda.FloatTensor(words))
probe(HostTensor(words))
probe(torch.LongTensor(words))
"""
    assert ask(source, _constructor) == ["True", "True", "False", "False"]
