"""fold_batchnorm: every conv kind, Linear only where it is valid, functional form, subclasses, dataflow checks."""

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from optimizer_helpers import count_modules, randomize_batchnorm, relative_error, run_pass  # noqa: E402
from torch import nn  # noqa: E402

from torchlint.optimizer.passes.batchnorm import fold_batchnorm  # noqa: E402
from torchlint.optimizer.passes.bn_math import fold_into_conv, fold_into_linear  # noqa: E402

BN = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}


def _check_folded(model, x, folded_count):
    model = randomize_batchnorm(model).eval()
    gm, report = run_pass(fold_batchnorm, model, x)
    batchnorm = nn.modules.batchnorm._BatchNorm
    assert count_modules(gm, batchnorm) == count_modules(model, batchnorm) - folded_count
    assert len(report.rewrites) == folded_count
    with torch.no_grad():
        assert relative_error(model(x), gm(x)) < 1e-5
    return gm, report


@pytest.mark.parametrize("dim", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_and_conv_transpose_folded(dim, transposed, groups, bias):
    conv_cls = getattr(nn, f"ConvTranspose{dim}d" if transposed else f"Conv{dim}d")
    kwargs = {"stride": 2, "output_padding": 1} if transposed else {"stride": 1}
    model = nn.Sequential(conv_cls(4, 6, 3, groups=groups, bias=bias, **kwargs), BN[dim](6), nn.ReLU())
    _check_folded(model, torch.randn(2, 4, *([5] * dim)), 1)


def test_math_matches_for_grouped_transposed_conv():
    conv = nn.ConvTranspose2d(6, 9, 3, groups=3).eval()
    bn = randomize_batchnorm(nn.BatchNorm2d(9)).eval()
    x = torch.randn(2, 6, 5, 5)
    with torch.no_grad():
        assert relative_error(bn(conv(x)), fold_into_conv(conv, bn)(x)) < 1e-5


def test_math_does_not_touch_the_inputs():
    conv, bn = nn.Conv2d(3, 4, 3), randomize_batchnorm(nn.BatchNorm2d(4)).eval()
    weight = conv.weight.detach().clone()
    folded = fold_into_conv(conv, bn)
    assert torch.equal(conv.weight, weight) and folded.weight is not conv.weight
    linear, bn1 = nn.Linear(3, 4), randomize_batchnorm(nn.BatchNorm1d(4)).eval()
    x = torch.randn(5, 3)
    with torch.no_grad():
        assert relative_error(bn1(linear(x)), fold_into_linear(linear, bn1)(x)) < 1e-5


def test_linear_batchnorm1d_on_2d_input_folded():
    model = nn.Sequential(nn.Linear(8, 6), nn.BatchNorm1d(6), nn.ReLU())
    _check_folded(model, torch.randn(4, 8), 1)


def test_linear_batchnorm1d_on_3d_input_not_folded():
    # BatchNorm1d on (N, C, L) normalises dim 1 (C), but the Linear produces dim 2 (L): folding would be wrong.
    model = randomize_batchnorm(nn.Sequential(nn.Linear(8, 6), nn.BatchNorm1d(5))).eval()
    x = torch.randn(4, 5, 8)
    gm, report = run_pass(fold_batchnorm, model, x)
    assert count_modules(gm, nn.BatchNorm1d) == 1
    assert not report.rewrites
    assert "BatchNorm has 5 features, Linear produces 6" in report.skipped[0].detail
    # Same sizes on both dims, where a shape check alone would not notice.
    square = randomize_batchnorm(nn.Sequential(nn.Linear(8, 6), nn.BatchNorm1d(6))).eval()
    gm, report = run_pass(fold_batchnorm, square, torch.randn(4, 6, 8))
    assert count_modules(gm, nn.BatchNorm1d) == 1
    assert "Linear produces the last dim" in report.skipped[0].detail
    with torch.no_grad():
        x = torch.randn(4, 6, 8)
        assert relative_error(square(x), gm(x)) < 1e-6


def test_linear_batchnorm_without_shapes_is_left_alone():
    model = randomize_batchnorm(nn.Sequential(nn.Linear(8, 6), nn.BatchNorm1d(6))).eval()
    gm, report = run_pass(fold_batchnorm, model)
    assert count_modules(gm, nn.BatchNorm1d) == 1
    assert "pass example_inputs" in report.skipped[0].detail


class FunctionalBN(nn.Module):
    def __init__(self, affine=True):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.register_buffer("mean", torch.randn(8) * 0.1)
        self.register_buffer("var", torch.rand(8) + 0.5)
        self.weight = nn.Parameter(torch.rand(8) + 0.5) if affine else None
        self.bias = nn.Parameter(torch.randn(8) * 0.1) if affine else None

    def forward(self, x):
        return F.relu(F.batch_norm(self.conv(x), self.mean, self.var, self.weight, self.bias, False, 0.1, 1e-3))


@pytest.mark.parametrize("affine", [True, False])
def test_functional_batch_norm_folded(affine):
    model = FunctionalBN(affine).eval()
    x = torch.randn(2, 3, 8, 8)
    gm, report = run_pass(fold_batchnorm, model, x)
    assert F.batch_norm not in [n.target for n in gm.graph.nodes]
    assert len(report.rewrites) == 1
    with torch.no_grad():
        assert relative_error(model(x), gm(x)) < 1e-5


def test_functional_batch_norm_in_training_form_not_folded():
    class TrainingBN(FunctionalBN):
        def forward(self, x):
            return F.batch_norm(self.conv(x), self.mean, self.var, training=True)

    gm, report = run_pass(fold_batchnorm, TrainingBN().eval(), torch.randn(2, 3, 8, 8))
    assert F.batch_norm in [n.target for n in gm.graph.nodes]
    assert "batch statistics" in report.skipped[0].detail


class CheckedBN(nn.BatchNorm2d):
    """A user subclass: fx alone traces into it and fails on the input-dimension check."""

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError("expected 4-D input")


class ScaledBN(nn.BatchNorm2d):
    def forward(self, x):
        return super().forward(x) * 2


def test_batchnorm_subclass_folded():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), CheckedBN(8), nn.ReLU())
    _check_folded(model, torch.randn(2, 3, 8, 8), 1)


def test_batchnorm_subclass_overriding_forward_not_folded():
    model = randomize_batchnorm(nn.Sequential(nn.Conv2d(3, 8, 3), ScaledBN(8))).eval()
    x = torch.randn(2, 3, 8, 8)
    gm, report = run_pass(fold_batchnorm, model, x)
    assert count_modules(gm, ScaledBN) == 1
    assert "overrides forward" in report.skipped[0].detail
    with torch.no_grad():
        assert relative_error(model(x), gm(x)) < 1e-6


class NormAct(nn.BatchNorm2d):
    """Batch norm, dropout and an activation in one layer, with a shape check (as timm's norm-act layers are)."""

    def __init__(self, channels):
        super().__init__(channels)
        self.drop = nn.Dropout(0.1)
        self.act = nn.SiLU()

    def forward(self, x):
        torch._assert(x.ndim == 4, "expected a 4-D input")
        x = F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.training,
                         self.momentum, self.eps)
        return self.act(self.drop(x))


def test_batchnorm_subclass_with_a_traceable_forward_of_its_own_folded():
    model = randomize_batchnorm(nn.Sequential(nn.Conv2d(3, 8, 3), NormAct(8))).eval()
    x = torch.randn(2, 3, 8, 8)
    gm, report = run_pass(fold_batchnorm, model, x)
    assert F.batch_norm not in [n.target for n in gm.graph.nodes]
    assert [entry.detail for entry in report.rewrites] == ["folded F.batch_norm `batch_norm (F.batch_norm)` into Conv2d"]
    assert any(n.op == "call_module" and isinstance(gm.get_submodule(n.target), nn.SiLU) for n in gm.graph.nodes)
    with torch.no_grad():
        assert relative_error(model(x), gm(x)) < 1e-5


def test_shape_reads_of_the_conv_output_do_not_stop_folding():
    class ShapeRead(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y).flatten(1) * y.shape[-1] / y.size(1)

    _check_folded(ShapeRead(), torch.randn(2, 3, 8, 8), 1)


class TwoUsers(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y  # the conv output is used by the BatchNorm and by the add


def test_conv_output_with_another_user_not_folded():
    model = randomize_batchnorm(TwoUsers()).eval()
    x = torch.randn(2, 3, 8, 8)
    gm, report = run_pass(fold_batchnorm, model, x)
    assert count_modules(gm, nn.BatchNorm2d) == 1
    assert "also used elsewhere" in report.skipped[0].detail
    with torch.no_grad():
        assert relative_error(model(x), gm(x)) < 1e-6


class SharedConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x):
        return self.conv(self.bn(self.conv(x)))  # the same conv runs twice, only one call is followed by the BN


def test_conv_module_called_twice_gets_its_own_folded_copy():
    model = randomize_batchnorm(SharedConv()).eval()
    x = torch.randn(2, 3, 8, 8)
    gm, report = run_pass(fold_batchnorm, model, x)
    assert len(report.rewrites) == 1
    with torch.no_grad():
        assert relative_error(model(x), gm(x)) < 1e-5


def test_batchnorm_in_training_mode_or_without_running_stats_not_folded():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8, track_running_stats=False)).eval()
    gm, report = run_pass(fold_batchnorm, model, torch.randn(2, 3, 8, 8))
    assert count_modules(gm, nn.BatchNorm2d) == 1
    assert "no running statistics" in report.skipped[0].detail
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)).eval()
    model[1].train()
    gm, report = run_pass(fold_batchnorm, model, torch.randn(2, 3, 8, 8))
    assert count_modules(gm, nn.BatchNorm2d) == 1
    assert "training mode" in report.skipped[0].detail


def test_batchnorm_after_a_non_conv_not_folded():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.BatchNorm2d(8)).eval()
    gm, report = run_pass(fold_batchnorm, model, torch.randn(2, 3, 8, 8))
    assert count_modules(gm, nn.BatchNorm2d) == 1
    assert "nothing to fold into" in report.skipped[0].detail
