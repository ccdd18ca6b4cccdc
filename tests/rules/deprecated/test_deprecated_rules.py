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


def test_tl802_silent_on_the_cpu_branch_of_a_cuda_check() -> None:
    code = """
    import torch

    if torch.cuda.is_available():
        model = torch.nn.DataParallel(model).cuda()
    else:
        model = torch.nn.DataParallel(model)
    if not torch.cuda.is_available():
        other = torch.nn.DataParallel(other)
    else:
        other = torch.nn.DataParallel(other).cuda()
    """
    assert findings(code, ["TL802"]) == [(5, "TL802"), (11, "TL802")]


def test_tl802_silent_when_a_copy_is_wrapped_like_the_callers_model() -> None:
    code = """
    import copy
    import torch.nn as nn

    def ema_copy(module):
        if isinstance(module, nn.DataParallel):
            inner = copy.deepcopy(module.module)
            return nn.DataParallel(inner)
        return copy.deepcopy(module)

    def wrap(module, gpus):
        if len(gpus) > 1:
            module = nn.DataParallel(module, device_ids=gpus)
        return module
    """
    assert findings(code, ["TL802"]) == [(13, "TL802")]


def test_tl802_silent_when_every_loader_of_the_file_batches_one_sample() -> None:
    one = """
    import torch
    from torch.utils.data import DataLoader

    test_loader = DataLoader(test_set, batch_size=1, num_workers=4)
    viewer = DataLoader(images)
    model = torch.nn.DataParallel(model).cuda()
    for image, label in test_loader:
        output = model(image.cuda())
    """
    assert findings(one, ["TL802"]) == []
    mixed = one.replace("DataLoader(images)", "DataLoader(images, batch_size=args.batch_size)")
    assert findings(mixed, ["TL802"]) == [(7, "TL802")]
    sampled = one.replace("DataLoader(images)", "DataLoader(images, batch_sampler=sampler)")
    assert findings(sampled, ["TL802"]) == [(7, "TL802")]


# -- TL801 ---------------------------------------------------------------------------------------

_AMP = """\
import torch

scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    pass

@torch.cuda.amp.custom_fwd
def f(x):
    return x
"""


def _amp_fixes(path) -> list[tuple[int, bool]]:
    path.write_text(_AMP)
    result = lint_source(_AMP, str(path), select=["TL801"])
    assert result.error is None and not result.notes
    return [(f.line, f.fix.safe) for f in result.findings]


def test_tl801_leaves_version_fallbacks_alone() -> None:
    code = """
    import torch

    try:
        scaler = torch.amp.GradScaler("cuda")
    except (AttributeError, TypeError):
        scaler = torch.cuda.amp.GradScaler()

    if hasattr(torch, "amp"):
        ctx = torch.amp.autocast("cuda")
    else:
        ctx = torch.cuda.amp.autocast()

    ctx = torch.cuda.amp.autocast() if torch.__version__ < "2.4" else torch.amp.autocast("cuda")

    try:
        old = torch.cuda.amp.GradScaler()
    except AttributeError:
        old = torch.amp.GradScaler("cuda")

    plain = torch.cuda.amp.GradScaler()
    """
    assert findings(code, ["TL801"]) == [(21, "TL801")]


def test_tl801_fix_is_safe_without_a_declared_floor(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    assert _amp_fixes(tmp_path / "train.py") == [(3, True), (4, True), (7, True)]


def test_tl801_fix_is_unsafe_below_the_declared_floor(tmp_path) -> None:
    (tmp_path / "requirements-dev.txt").write_text("numpy\ntorch>=2.3  # GradScaler is there, custom_fwd is not\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(_AMP)
    result = lint_source(_AMP, str(tmp_path / "pkg" / "train.py"), select=["TL801"], fix=True)
    assert [(f.line, f.fix.safe) for f in lint_source(_AMP, str(tmp_path / "pkg" / "train.py"), select=["TL801"]).findings] == [
        (3, True),
        (4, True),
        (7, False),
    ]
    assert "@torch.cuda.amp.custom_fwd" in result.fixed_text  # not applied without --unsafe-fixes
    custom = lint_source(_AMP, str(tmp_path / "pkg" / "train.py"), select=["TL801"]).findings[2]
    assert "needs torch 2.4" in custom.message and "torch>=2.3" in custom.message


def test_tl801_reads_pyproject_poetry_and_setup_cfg(tmp_path) -> None:
    project = tmp_path / "a"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "a"\ndependencies = ["torchvision>=0.20", "torch >=1.13, <3"]\n')
    assert _amp_fixes(project / "train.py") == [(3, False), (4, False), (7, False)]
    poetry = tmp_path / "b"
    poetry.mkdir()
    (poetry / "pyproject.toml").write_text('[tool.poetry.dependencies]\npython = "^3.9"\ntorch = {version = "^2.3"}\n')
    assert _amp_fixes(poetry / "train.py") == [(3, True), (4, True), (7, False)]
    setup_cfg = tmp_path / "c"
    setup_cfg.mkdir()
    (setup_cfg / "setup.cfg").write_text("[options]\ninstall_requires =\n    numpy\n[options.extras_require]\ngpu =\n    torch==2.4.*\n")
    assert _amp_fixes(setup_cfg / "train.py") == [(3, True), (4, True), (7, True)]


def test_tl802_silent_where_one_sample_or_no_loop_runs_the_wrapped_model() -> None:
    code = """
    import torch
    import torch.nn as nn

    demo = nn.DataParallel(Net()).cuda()
    out = demo(transform(img).unsqueeze(0))

    model = nn.DataParallel(Net())
    for path in files:
        img = transform(open(path)).unsqueeze(0)
        img = img.to(device)
        pred = model(img)

    trainer = nn.DataParallel(Net())
    for x, y in loader:
        trainer(x).sum().backward()

    if __name__ == "__main__":
        converted = nn.DataParallel(Net())
        torch.save({"model_state": converted.state_dict()}, "weights.pth")
        inception = nn.DataParallel(Inception()).to(device)
        features = extract_features(inception, loader)  # may run it over a whole dataset
    """
    assert findings(code, ["TL802"]) == [(14, "TL802"), (21, "TL802")]
