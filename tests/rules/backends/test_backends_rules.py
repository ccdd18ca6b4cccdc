"""Decision edges and fixes of TL601, TL603 (device placement), TL701-TL703 (backends), TL801, TL802."""

from __future__ import annotations

import sys

import pytest
from lint_testing import fixed, lines, lint

from torchlint.lint.api import lint_source

# -- TL601 host-tensor-then-move ---------------------------------------------------------------------


# -- TL603 legacy-typed-tensor ------------------------------------------------------------------------


# -- TL701 bias-before-batchnorm ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "layers, reported",
    [
        ("nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)", True),
        ("nn.Conv1d(3, 8, 3), nn.BatchNorm1d(8)", True),
        ("nn.Conv3d(3, 8, 3), nn.BatchNorm3d(8)", True),
        ("nn.ConvTranspose2d(3, 8, 2), nn.BatchNorm2d(8)", True),
        ("nn.LazyConv2d(8, 3), nn.LazyBatchNorm2d()", True),
        ("nn.Linear(4, 8), nn.BatchNorm1d(8)", True),
        ("nn.Linear(4, c), nn.BatchNorm1d(c)", True),
        ("nn.Conv2d(3, 8, 3), nn.SyncBatchNorm(8)", True),
        ("nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8)", False),
        ("nn.Conv2d(3, 8, 3, bias=use_bias), nn.BatchNorm2d(8)", False),
        ("nn.Conv2d(3, 8, 3, 1, 0, 1, 1, False), nn.BatchNorm2d(8)", False),
        ("nn.Conv2d(3, 8, 3), nn.BatchNorm2d(16)", False),  # channels known to differ
        ("nn.Conv2d(3, 8, 3), nn.BatchNorm1d(8)", False),
        ("nn.Linear(4, 8), nn.BatchNorm2d(8)", False),
        ("nn.Linear(4, c), nn.BatchNorm1d(d)", False),  # Linear on (N, L, C) input: BatchNorm1d on L
        ("nn.LazyLinear(8), nn.LazyBatchNorm1d()", False),
        ("nn.Conv2d(3, 8, 3), nn.ReLU(), nn.BatchNorm2d(8)", False),
        ("nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8)", False),
        ("nn.Conv2d(3, 8, 3, **opts), nn.BatchNorm2d(8)", False),
        ("nn.Conv2d(3, 8, 3, **dd), nn.BatchNorm2d(8, **dd)", True),  # dd has no "bias"
        ("nn.Conv2d(3, 8, 3, **with_bias), nn.BatchNorm2d(8)", False),
        ("*[nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)]", True),
    ],
)
def test_tl701_sequential_pairs(layers, reported):
    code = (
        "import torch.nn as nn\n\n"
        "def build(c, d, use_bias, opts, device):\n"
        "    dd = {'device': device, 'dtype': None}\n"
        "    with_bias = dict(bias=True)\n"
        f"    return nn.Sequential({layers})\n"
    )
    assert bool(lines(code, "TL701")) is reported


def test_tl701_lists_built_for_sequential():
    code = """
        import torch.nn as nn

        def vgg(cfg, batch_norm):
            layers = []
            c_in = 3
            for v in cfg:
                conv = nn.Conv2d(c_in, v, 3, padding=1)
                if batch_norm:
                    layers += [conv, nn.BatchNorm2d(v), nn.ReLU()]
                else:
                    layers += [conv, nn.ReLU()]
                c_in = v
            return nn.Sequential(*layers)

        def mlp(sizes):
            layers = []
            for a, b in zip(sizes, sizes[1:]):
                layers.extend([nn.Linear(a, b), nn.BatchNorm1d(b)])
            return nn.Sequential(*layers)

        def as_module_list(sizes):
            layers = [nn.Linear(4, 4), nn.BatchNorm1d(4)]
            return nn.ModuleList(layers)
    """
    # the VGG conv is also used without BatchNorm; the ModuleList is not a sequence
    assert lines(code, "TL701") == [19]


def test_tl701_forward_patterns_and_fix():
    code = """
        import torch.nn as nn
        import torch.nn.functional as F

        class Block(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv1 = nn.Conv2d(c, c, 3, padding=1)
                self.bn1 = nn.BatchNorm2d(c)
                self.conv2 = nn.Conv2d(c, c, 3, padding=1)
                self.bn2 = nn.BatchNorm2d(c)
                self.conv3 = nn.Conv2d(c, c, 1)
                self.bn3 = nn.BatchNorm2d(c)
                self.conv4 = nn.Conv2d(c, c, 1)
                self.bn4 = nn.BatchNorm2d(c)
                nn.init.zeros_(self.conv4.bias)

            def forward(self, x):
                y = F.relu(self.bn1(self.conv1(x)))
                y = self.conv2(y)
                y = F.relu(self.bn2(y))
                z = self.conv3(y)
                w = self.bn3(z)
                return self.bn4(self.conv4(w)) + z
    """
    # conv3's output is used after its BatchNorm; conv4's bias is touched in __init__
    assert lines(code, "TL701") == [8, 10]
    text = fixed(code, "TL701")
    assert "self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)" in text
    assert "self.conv3 = nn.Conv2d(c, c, 1)\n" in text
    assert lint(code, "TL701", fix=True).fixed_text is None  # the fix is unsafe


# -- TL702 cudnn-benchmark-off / TL703 tf32-off ---------------------------------------------------------

CONV_SCRIPT = """
import torch
import torch.nn as nn
import torchvision


def train(model, loader, optimizer):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main():
    model = torchvision.models.resnet50().cuda()
    train(model, loader, torch.optim.SGD(model.parameters(), lr=0.1))


if __name__ == "__main__":
    main()
"""


def test_tl702_reports_a_conv_training_script_once_at_its_loop():
    findings = lint(CONV_SCRIPT, "TL702").findings
    assert [(f.line, f.column) for f in findings] == [(8, 17)]
    text = fixed(CONV_SCRIPT, "TL702")
    assert text.startswith("\nimport torch\nimport torch.nn as nn\nimport torchvision\n\ntorch.backends.cudnn.benchmark = True\n\n\ndef train")


@pytest.mark.parametrize(
    "change",
    [
        ('if __name__ == "__main__":\n    main()\n', ""),  # a library module: its caller decides
        ("torchvision.models.resnet50()", "torchvision.models.vit_b_16()"),  # not a conv net
        (".cuda()", ".to(device)"),  # no sign of CUDA
        ("import torch\n", "import torch\ntorch.backends.cudnn.benchmark = False\n"),
        ("import torch\n", "import torch\ntorch.use_deterministic_algorithms(True)\n"),
        ("import torch\n", "import torch\ntorch.backends.cudnn.deterministic = True\n"),
        ("        loss.backward()\n", ""),  # no backward (and, below, no optimizer step): not training
    ],
)
def test_tl702_silent(change):
    old, new = change
    code = CONV_SCRIPT.replace(old, new)
    if old == "        loss.backward()\n":
        code = code.replace("        optimizer.step()\n", "")
    assert code != CONV_SCRIPT
    assert lines(code, "TL702") == []


def test_tl702_module_level_scripts_and_notebooks():
    code = """
        import torch
        import torch.nn as nn

        model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.Flatten(), nn.LazyLinear(10)).to("cuda")
        for epoch in range(3):
            for x, y in train_loader:
                loss = nn.functional.cross_entropy(model(x.to("cuda")), y.to("cuda"))
                loss.backward()
                opt.step()
    """
    assert lines(code, "TL702") == [7]


GUARDED_IMPORT_SCRIPT = """\
\"\"\"Train a small CNN.\"\"\"
# Pick the GPU before torch starts.
import os

try:
    import torch
    import torch.nn as nn
except ImportError:
    raise SystemExit("this script needs torch")


def train(loader):
    model = nn.Conv2d(3, 8, 3).cuda()
    opt = torch.optim.SGD(model.parameters(), 0.1)
    for x, y in loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    train(loader)
"""


def _run_with_stub_torch(text, monkeypatch):
    """Run the module's top level with a stand-in `torch`; return the stand-in."""
    import types

    torch = types.ModuleType("torch")
    torch.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(benchmark=False))
    torch.nn = types.ModuleType("torch.nn")
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.nn", torch.nn)
    exec(compile(text, "train.py", "exec"), {"__name__": "train"})
    return torch


def test_tl702_fix_goes_after_a_guarded_import_of_torch(monkeypatch):
    text = fixed(GUARDED_IMPORT_SCRIPT, "TL702")
    assert "import torch\n" not in text.split("try:")[0]  # no unguarded import added above the guard
    assert text.index("torch.backends.cudnn.benchmark = True") > text.index("except ImportError")
    assert _run_with_stub_torch(text, monkeypatch).backends.cudnn.benchmark is True


def test_tl702_fix_goes_after_a_late_import_and_adds_one_when_none_binds_torch(monkeypatch):
    late = GUARDED_IMPORT_SCRIPT.replace(
        'try:\n    import torch\n    import torch.nn as nn\nexcept ImportError:\n    raise SystemExit("this script needs torch")\n',
        'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\nimport torch\nimport torch.nn as nn\n',
    )
    text = fixed(late, "TL702")
    assert text.count("import torch\n") == 1
    assert text.index("torch.backends.cudnn.benchmark = True") > text.index("import torch.nn as nn")
    assert _run_with_stub_torch(text, monkeypatch).backends.cudnn.benchmark is True
    inside = GUARDED_IMPORT_SCRIPT.replace(
        'try:\n    import torch\n    import torch.nn as nn\nexcept ImportError:\n    raise SystemExit("this script needs torch")\n',
        "",
    ).replace("def train(loader):\n", "def train(loader):\n    import torch\n    import torch.nn as nn\n\n")
    text = fixed(inside, "TL702")
    header = text.split("def train")[0]
    assert "import torch\n" in header and header.index("import torch\n") < header.index("torch.backends")
    assert header.index("# Pick the GPU") < header.index("import os")  # the comment stays on its line
    assert _run_with_stub_torch(text, monkeypatch).backends.cudnn.benchmark is True


TRANSFORMER_SCRIPT = """
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
args = parser.parse_args()
model = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4), 4).cuda()


def train():
    for batch in train_loader:
        loss = model(batch.cuda()).pow(2).mean()
        loss.backward()
        optimizer.step()


train()
"""


def test_tl703_is_off_by_default_and_reports_when_selected():
    assert all(f.code != "TL703" for f in lint_source(TRANSFORMER_SCRIPT, "example.py").findings)
    assert lines(TRANSFORMER_SCRIPT, "TL703") == [13]
    text = fixed(TRANSFORMER_SCRIPT, "TL703")
    assert 'import torch.nn as nn\n\ntorch.set_float32_matmul_precision("high")\n\nparser' in text


@pytest.mark.parametrize(
    "old, new",
    [
        ("pow(2).mean()", "pow(2).mean().half()"),  # any sign of reduced precision
        ("loss = model", "with torch.autocast('cuda'):\n            pass\n        loss = model"),
        ("import torch\n", "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n"),
        ("nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4), 4)", "nn.Sequential(nn.Conv2d(3, 8, 3), nn.Linear(8, 8))"),
    ],
)
def test_tl703_silent(old, new):
    code = TRANSFORMER_SCRIPT.replace(old, new)
    assert code != TRANSFORMER_SCRIPT
    assert lines(code, "TL703") == []


# -- TL801 deprecated-cuda-amp --------------------------------------------------------------------------


def test_tl801_rewrites_calls_keeping_the_file_spelling_of_torch():
    code = """
        import torch as th
        from torch.cuda.amp import autocast as ac, GradScaler

        scaler = GradScaler(1024.0, 2.0)
        with ac(True, th.bfloat16, cache_enabled=False):
            pass
    """
    text = fixed(code, "TL801", unsafe=False)
    assert 'scaler = th.amp.GradScaler("cuda", 1024.0, 2.0)' in text
    assert 'with th.amp.autocast("cuda", enabled=True, dtype=th.bfloat16, cache_enabled=False):' in text


def test_tl801_adds_import_torch_when_the_file_has_none():
    code = """
        from torch.cuda import amp

        with amp.autocast():
            pass
    """
    text = fixed(code, "TL801", unsafe=False)
    assert text.startswith("\nimport torch\nfrom torch.cuda import amp\n")  # isort's order
    assert 'with torch.amp.autocast("cuda"):' in text


def test_tl801_uses_the_files_quote_style_and_handles_decorators():
    code = """
        import torch
        from torch.cuda.amp import custom_fwd

        class F(torch.autograd.Function):
            @staticmethod
            @custom_fwd
            def forward(ctx, x):
                return x

        with torch.cpu.amp.autocast(enabled=x == 'a' or x == 'b'):
            pass
    """
    text = fixed(code, "TL801", unsafe=False)
    assert "@torch.amp.custom_fwd(device_type='cuda')" in text
    assert "with torch.amp.autocast('cpu', enabled=x == 'a' or x == 'b'):" in text


def test_tl801_silent_when_a_fallback_import_binds_the_new_api():
    code = """
        try:
            from torch.amp import GradScaler, autocast
        except ImportError:
            from torch.cuda.amp import GradScaler, autocast

        scaler = GradScaler("cuda", init_scale=1024.0)
        with autocast(device_type="cuda"):
            pass
    """
    assert lines(code, "TL801") == []


def test_tl801_silent_on_new_spellings_and_references():
    code = """
        import torch
        from torch.amp import autocast

        with autocast("cuda"):
            pass
        with torch.autocast(device_type="cuda"):
            pass
        ok = isinstance(s, torch.cuda.amp.GradScaler)
        factory = torch.cuda.amp.autocast
    """
    assert lines(code, "TL801") == []


# -- TL802 data-parallel ------------------------------------------------------------------------------


def test_tl802_calls_only():
    code = """
        import torch
        from torch.nn.parallel import DataParallel as DP

        a = DP(model)
        b = torch.nn.DataParallel(model, device_ids=[0, 1])
        d = isinstance(model, torch.nn.DataParallel)
    """
    result = lint(code, "TL802")
    assert [f.line for f in result.findings] == [5, 6]
    assert "DistributedDataParallel" in result.findings[0].message


def test_tl701_fix_goes_before_known_keyword_options():
    code = """
        import torch.nn as nn

        def stem(c, device=None, dtype=None):
            dd = {"device": device, "dtype": dtype}
            return nn.Sequential(
                nn.Conv2d(3, c, 3, 2, 1, **dd),
                nn.BatchNorm2d(c, **dd),
            )
    """
    assert "nn.Conv2d(3, c, 3, 2, 1, bias=False, **dd)," in fixed(code, "TL701")


def test_tl701_silent_in_a_test_module():
    code = """
        import torch.nn as nn

        def test_freeze_module():
            model = nn.Sequential(nn.Conv2d(3, 10, 1), nn.BatchNorm2d(10), nn.ReLU())
            assert model[1].training
    """
    assert lint(code, "TL701", path="tests/utils/test_model_utils.py").findings == []
    assert [f.line for f in lint(code, "TL701", path="models/blocks.py").findings] == [5]
