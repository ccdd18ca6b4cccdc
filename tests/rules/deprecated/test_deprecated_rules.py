"""Deprecated and slow APIs: TL802 (nn.DataParallel) and when its advice is not news."""

from __future__ import annotations

import textwrap

from torchlint.lint.api import lint_source


def findings(code: str, select: list[str], path: str = "train.py") -> list[tuple[int, str]]:
    result = lint_source(textwrap.dedent(code), path, select=select)
    assert result.error is None and not result.notes, (result.error, result.notes)
    return [(f.line, f.code) for f in result.findings]


def test_tl802_reports_dataparallel_and_not_a_project_class() -> None:
    code = """
    import torch.nn as nn
    from myproject.parallel import DataParallel

    model = nn.DataParallel(model).cuda()
    other = DataParallel(model)
    """
    assert findings(code, ["TL802"]) == [(5, "TL802")]


def test_tl802_silent_when_the_file_runs_distributed_on_its_main_path() -> None:
    code = """
    import torch

    if args.distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
    else:
        model = torch.nn.DataParallel(model).cuda()
    """
    assert findings(code, ["TL802"]) == []
    fsdp = """
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(model) if args.fsdp else torch.nn.DataParallel(model)
    """
    assert findings(fsdp, ["TL802"]) == []


def test_tl802_ddp_only_named_is_not_enough() -> None:
    code = """
    import torch
    from torch.nn.parallel import DistributedDataParallel

    model = torch.nn.DataParallel(model)
    assert not isinstance(model, DistributedDataParallel)
    """
    assert findings(code, ["TL802"]) == [(5, "TL802")]


def test_tl802_constant_false_guard_is_dead_code() -> None:
    code = """
    import torch

    multi_gpu = False

    def build(model):
        if multi_gpu:
            model = torch.nn.DataParallel(model)
        if multi_gpu and torch.cuda.device_count() > 1:
            model = torch.nn.DataParallel(model)
        return model
    """
    assert findings(code, ["TL802"]) == []


def test_tl802_guard_that_may_be_true_is_reported() -> None:
    code = """
    import torch

    multi_gpu = False
    multi_gpu = torch.cuda.device_count() > 1

    if multi_gpu:
        model = torch.nn.DataParallel(model)
    else:
        model = torch.nn.DataParallel(model) if False else model
    if True:
        model = torch.nn.DataParallel(model)
    """
    assert findings(code, ["TL802"]) == [(8, "TL802"), (12, "TL802")]


def test_tl802_silent_when_accelerate_prepares_the_model() -> None:
    code = """
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator()
    if torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)
    model, optimizer = accelerator.prepare(model, optimizer)
    """
    assert findings(code, ["TL802"]) == []
    only_imported = """
    import torch
    from accelerate import Accelerator

    model = torch.nn.DataParallel(model)
    """
    assert findings(only_imported, ["TL802"]) == [(5, "TL802")]
