"""TL6xx rules: device placement and transfers."""

from __future__ import annotations

import pytest
from lint_testing import fixed, lines, lint


def test_tl601_resolves_factories_through_imports():
    code = """
        import torch as th
        from torch import ones as make_ones
        from myproject import zeros

        class Net:
            def forward(self, device):
                a = th.zeros(3).to(device)
                b = make_ones(3).cuda()
                c = zeros(3).to(device)
    """
    assert lines(code, "TL601") == [8, 9]


@pytest.mark.parametrize(
    "move, expected",
    [
        (".cuda()", 'torch.zeros(n, device="cuda")'),
        (".cuda(0)", 'torch.zeros(n, device="cuda:0")'),
        (".cuda(non_blocking=True)", 'torch.zeros(n, device="cuda")'),
        (".to(device)", "torch.zeros(n, device=device)"),
        (".to(device, non_blocking=True)", "torch.zeros(n, device=device)"),
        (".to(device, torch.float16)", "torch.zeros(n, device=device, dtype=torch.float16)"),
        (".to(x.device, dtype=torch.long)", "torch.zeros(n, device=x.device, dtype=torch.long)"),
        ('.to("cuda:1")', 'torch.zeros(n, device="cuda:1")'),
        (".to(torch.device('cuda', 1))", "torch.zeros(n, device=torch.device('cuda', 1))"),
    ],
)
def test_tl601_fix_moves_the_device_into_the_factory(move, expected):
    code = f"import torch\n\nclass Net:\n    def forward(self, x, n, device):\n        return torch.zeros(n){move}\n"
    result = lint(code, "TL601")
    assert [f.fix.safe for f in result.findings] == [True]
    assert fixed(code, "TL601", unsafe=False).splitlines()[-1] == f"        return {expected}"


def test_tl601_keeps_a_cast_for_factories_whose_values_depend_on_the_dtype():
    code = "import torch\n\nclass Net:\n    def forward(self, device):\n        return torch.full((2,), 0.1).to(device, torch.half)\n"
    assert fixed(code, "TL601").splitlines()[-1] == "        return torch.full((2,), 0.1, device=device).to(torch.half)"


@pytest.mark.parametrize(
    "factory, safe",
    [
        ("torch.arange(10)", True),
        ("torch.arange(len(items))", True),
        ("torch.arange(x.shape[1])", True),
        ("torch.arange(x.size(0) - 1)", True),
        ("torch.arange(n)", False),  # a parameter: maybe a float
        ("torch.arange(0, 1, 0.1)", False),
        ("torch.arange(10, dtype=torch.float32)", False),
        ("torch.arange(*bounds)", False),
        ("torch.randn(3)", False),  # another generator
        ("torch.randint(0, 10, (3,))", False),
        ("torch.linspace(0, 1, 5)", False),
        ("torch.eye(3)", True),
        ("torch.empty(3, 3)", True),
    ],
)
def test_tl601_fix_safety(factory, safe):
    code = f"import torch\n\nclass Net:\n    def forward(self, x, n, items, bounds, device):\n        return {factory}.to(device)\n"
    assert [f.fix.safe for f in lint(code, "TL601").findings] == [safe]


@pytest.mark.parametrize(
    "expr",
    [
        "torch.zeros(3, requires_grad=True).to(device)",  # the moved tensor is not a leaf
        "torch.zeros(3, pin_memory=True).cuda(non_blocking=True)",
        "torch.zeros(3).cuda(gpu)",  # .cuda(None) is the current GPU, device=None the CPU
        "torch.zeros(3).to(device, memory_format=torch.channels_last)",
        "torch.zeros(3).to(device, torch.half, True)",
    ],
)
def test_tl601_reports_without_a_fix_when_no_rewrite_is_equivalent(expr):
    code = f"import torch\n\nclass Net:\n    def forward(self, device, gpu):\n        return {expr}\n"
    findings = lint(code, "TL601").findings
    assert len(findings) == 1 and findings[0].fix is None


@pytest.mark.parametrize(
    "expr",
    [
        "torch.zeros(3).to(other)",  # a tensor, a dtype or a device: cannot tell
        "torch.zeros(3).to(torch.float16)",
        "torch.zeros(3).to(x.dtype)",
        "torch.zeros(3).to('cpu')",
        "torch.zeros(3).to(CPU)",
        "torch.zeros(3).to(torch.device('cpu'))",
        "torch.zeros(3).to('cpu' if x else CPU)",
        "torch.zeros(3, device=device).to(device)",
        "torch.zeros(3, **opts).to(device)",
        "torch.rand(3, generator=g).to(device)",  # a CPU generator, on purpose
        "torch.zeros_like(x).to(device)",
        "torch.tensor([1, 2]).to(device)",
        "torch.from_numpy(a).to(device)",
        "torch.zeros(3).float().to(device)",
    ],
)
def test_tl601_silent(expr):
    code = f"import torch\nCPU = 'cpu'\n\nclass Net:\n    def forward(self, x, other, device, opts, g, a):\n        return {expr}\n"
    assert lint(code, "TL601").findings == []


@pytest.mark.parametrize(
    "target",
    ["device", "dev", "self.device", "args.gpu", "local_rank", "devices[0]", "0", "f'cuda:{rank}'", "'cuda' if x else 'cpu'"],
)
def test_tl601_device_spellings(target):
    code = f"import torch\n\nclass Net:\n    def forward(self, args, device, dev, local_rank, devices, rank, x):\n        return torch.ones(3).to({target})\n"
    assert lines(code, "TL601") == [5]


def test_tl601_reports_only_what_runs_per_step_or_per_batch():
    code = """
        import torch
        import torch.nn as nn

        device = torch.device("cuda")

        class QNetwork(nn.Module):
            def __init__(self, atoms):
                super().__init__()
                self.support = torch.linspace(0, 1, atoms).to(device)  # once, with the model

            def set_std(self, std):
                self.var = torch.full((3,), std).to(device)  # on a rare event

            def forward(self, x):
                return x * torch.ones(x.shape[0]).to(x.device)  # every batch

        def random_offsets(x):
            b, c, t = x.size()
            return torch.rand([b]).to(device=x.device)  # sized by the batch it is given

        def sample(net, n, size, device):
            x = torch.randn(n, *size).to(device)  # the first noise of a run
            for i in range(1000):
                z = torch.randn(n, *size).to(device)  # every denoising step
                x = net(x) + z
            return x

        def penalty(scores):
            return torch.ones(5).to(device)  # called from the training loop

        model = QNetwork(51).to(device)
        dummy = torch.randn(1, 3).to(device)  # a smoke-test input
        for step, (x, y) in enumerate(train_loader):
            loss = model(x.to(device)).sum() + penalty(y)
            loss.backward()
            optimizer.step()
            if step % 100 == 0:
                z = torch.randn(8, 100).to(device)  # behind the logging interval
    """
    assert lines(code, "TL601") == [16, 20, 25, 30]


def test_tl601_per_batch_hooks_of_training_frameworks_are_hot():
    code = """
        import torch

        class MixUp(Callback):
            def before_batch(self):
                shuffle = torch.randperm(self.y.size(0)).to(self.x.device)
                box = self.rand_bbox(32)

            def rand_bbox(self, width):
                return torch.randint(0, width, (1,)).to(self.x.device)  # called from the hook

            def before_fit(self):
                self.lam = torch.zeros(3).to(self.x.device)  # once per fit

        class Lit(LightningModule):
            def training_step(self, batch, batch_idx):
                return torch.ones(4).to(self.device)
    """
    assert lines(code, "TL601") == [6, 10, 17]


def test_tl603_constructors_aliases_and_type_calls():
    code = """
        import torch
        from torch.cuda import FloatTensor as CF

        Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor

        def step(imgs, targets):
            a = imgs.type(Tensor)
            b = Tensor(imgs.size(0), 1)
            c = CF(3, 4)
            d = torch.cuda.LongTensor(targets)
            e = imgs.type(dtype="torch.cuda.HalfTensor")
            f = imgs.type(torch.FloatTensor)
            g = torch.FloatTensor(targets)
            h = isinstance(imgs, torch.cuda.FloatTensor)
            return a, b, c, d, e, f, g, h

        for imgs, targets in loader:
            step(imgs, targets)
    """
    result = lint(code, "TL603")
    # b and c are given sizes: they allocate on the GPU directly and copy nothing
    assert [f.line for f in result.findings] == [8, 11, 12]
    assert "torch.int64" in result.findings[1].message
    assert "non_blocking=True" in result.findings[0].message
    assert all(f.fix is None for f in result.findings)


def test_tl603_names_the_type_and_the_line_of_an_alias():
    code = """
        import torch

        Tensor = torch.cuda.FloatTensor

        def step(imgs, labels):
            return Tensor(labels), imgs.type(Tensor), torch.cuda.FloatTensor(labels)

        for imgs, labels in loader:
            step(imgs, labels)
    """
    messages = [f.message for f in lint(code, "TL603").findings]
    assert messages[0].startswith("`Tensor` is `torch.cuda.FloatTensor` (assigned on line 4): ")
    assert messages[1].startswith("`Tensor` is `torch.cuda.FloatTensor` (assigned on line 4): ")
    assert not messages[2].startswith("`")  # named directly: no alias to explain
    assert len(messages) == 3


def test_tl603_silent_where_the_code_runs_once():
    code = """
        import torch

        class Loss(torch.nn.Module):
            def __init__(self, margins):
                super().__init__()
                self.margins = torch.cuda.FloatTensor(margins)

        def evaluate(model, loader, seconds):
            for imgs, _ in loader:
                model(imgs.type(torch.cuda.FloatTensor))
            return torch.cuda.FloatTensor([seconds, len(loader)])
    """
    assert [f.line for f in lint(code, "TL603").findings] == [11]


def test_tl603_silent_on_constructors_given_sizes():
    code = """
        import torch

        def mask(lengths, batch, n):
            max_len = torch.max(lengths).item()
            ids = torch.arange(0, max_len, out=torch.cuda.LongTensor(max_len))
            grid = torch.cuda.FloatTensor(batch.size(0), 3)
            flat = torch.cuda.FloatTensor(len(lengths) * 2)
            return ids, grid, flat
    """
    assert lint(code, "TL603").findings == []


def test_tl603_an_alias_bound_twice_is_unknown():
    code = """
        import torch
        Tensor = torch.cuda.FloatTensor
        Tensor = MyTensor
        x = Tensor([1.0])
    """
    assert lines(code, "TL603") == []
