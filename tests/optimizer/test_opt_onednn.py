"""onednn_fusion and channels_last: same results, fused patterns, copies, pickling, other input sizes."""

import copy
import io

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from optimizer_helpers import count_modules, relative_error, run_pass  # noqa: E402
from torch import nn  # noqa: E402

from torchlint.optimizer.modules import FusedConv2d, FusedLinear  # noqa: E402
from torchlint.optimizer.passes.channels_last import channels_last  # noqa: E402
from torchlint.optimizer.passes.onednn import fuse_onednn  # noqa: E402

ACTIVATIONS = [nn.ReLU(), nn.ReLU6(), nn.LeakyReLU(0.2), nn.Hardtanh(-1, 3), nn.SiLU(), nn.Hardswish(), nn.GELU(),
               nn.GELU("tanh"), nn.Sigmoid(), nn.Tanh(), nn.Hardsigmoid()]


@pytest.mark.parametrize("act", ACTIVATIONS, ids=lambda a: f"{type(a).__name__}-{getattr(a, 'approximate', '')}")
def test_conv_and_linear_with_each_activation(act):
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), act, nn.Flatten(), nn.Linear(8 * 36, 10), copy.deepcopy(act))
    model.eval()
    x = torch.randn(2, 3, 6, 6)
    gm, report = run_pass(fuse_onednn, model, x)
    assert count_modules(gm, FusedConv2d) == 1 and count_modules(gm, FusedLinear) == 1
    assert count_modules(gm, type(act)) == 0
    with torch.no_grad():
        assert relative_error(model(x), gm(x)) < 1e-5


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.conv3 = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = F.relu(self.conv1(x))
        y = F.relu(self.conv2(y) + x)  # conv + add + relu
        y = x + self.conv3(y)  # add with the conv on the right, no activation
        return y.view(y.size(0), -1)  # a view of a channels_last result


def test_residual_add_and_relu_fused():
    model = Residual().eval()
    x = torch.randn(2, 8, 7, 7)
    gm, report = run_pass(fuse_onednn, model, x)
    fused = [m for m in gm.modules() if isinstance(m, FusedConv2d)]
    assert len(fused) == 3 and sum(m.binary for m in fused) == 2
    with torch.no_grad():
        assert relative_error(model(x), gm(x)) < 1e-5
        # Other shapes than the ones the weights were packed for, and NCHW or channels_last input.
        for other in (torch.randn(1, 8, 5, 9), torch.randn(3, 8, 11, 11).contiguous(memory_format=torch.channels_last)):
            assert relative_error(model(other.contiguous()), gm(other)) < 1e-5


def test_without_shapes_and_with_padding_modes():
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding="same"), nn.ReLU(), nn.Conv2d(4, 4, 3, padding_mode="reflect"),
                          nn.Conv2d(4, 4, 2, padding="same")).eval()
    gm, report = run_pass(fuse_onednn, model)  # no example: weights packed without a shape hint
    assert count_modules(gm, FusedConv2d) == 1
    reasons = {e.detail.split(" (")[0].split(" with")[0] for e in report.skipped}
    assert reasons == {"padding_mode='reflect'", "padding='same'"}
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert relative_error(model(x), gm(x)) < 1e-5


def test_fused_model_copies_pickles_and_keeps_state_dict():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 5)).eval()
    x = torch.randn(2, 3, 8, 8)
    gm, _ = run_pass(fuse_onednn, model, x)
    with torch.no_grad():
        expected = gm(x)
        assert torch.allclose(copy.deepcopy(gm)(x), expected)
        buffer = io.BytesIO()
        torch.save(gm, buffer)
        buffer.seek(0)
        assert torch.allclose(torch.load(buffer, weights_only=False)(x), expected)
        # New weights loaded in place are picked up (the packed copy is rebuilt).
        state = {k: v * 2 if k.endswith("bias") else v for k, v in gm.state_dict().items()}
        gm.load_state_dict(state)
        assert not torch.allclose(gm(x), expected)


def test_channels_last_pass():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, groups=8))
    model.eval()
    x = torch.randn(2, 3, 10, 10)
    gm, report = run_pass(channels_last, model, x)
    convs = [m for m in gm.modules() if isinstance(m, nn.Conv2d)]
    assert all(m.weight.is_contiguous(memory_format=torch.channels_last) for m in convs)
    with torch.no_grad():
        y = gm(x)
        assert relative_error(model(x), y) < 1e-5
        assert y.is_contiguous()  # outputs come back in the caller's format


def test_channels_last_skipped_without_convs():
    gm, report = run_pass(channels_last, nn.Sequential(nn.Linear(4, 4)).eval(), torch.randn(2, 4))
    assert not report.rewrites


def test_a_budget_spent_midway_stops_fusing_and_says_how_many_layers_are_left():
    from torch.fx.passes.shape_prop import ShapeProp

    from torchlint.optimizer.passes import PassContext
    from torchlint.optimizer.report import Report
    from torchlint.optimizer.trace import trace

    model = nn.Sequential(*[nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU()) for _ in range(4)]).eval()
    x = torch.randn(2, 8, 6, 6)
    gm = trace(copy.deepcopy(model))
    ShapeProp(gm).propagate(x)
    asked = []

    def spent_after_two():  # the budget runs out once two layers are fused
        asked.append(1)
        return len(asked) > 2

    report = Report()
    result = fuse_onednn(gm, PassContext(report, "onednn_fusion", False, "cpu", out_of_time=spent_after_two))
    assert count_modules(result.graph_module, FusedConv2d) == 2
    (note,) = [e.detail for e in report.skipped if "time budget" in e.detail]
    assert "2 more layers left unfused" in note
    with torch.no_grad():
        assert relative_error(model(x), result.graph_module(x)) < 1e-5


def _plain(layer, x):
    """What the layer computes, in plain torch ops on its (unpacked) weight."""
    if isinstance(layer, FusedLinear):
        return F.linear(x, layer.weight, layer.bias)
    return F.conv2d(x, layer.weight, layer.bias, layer.stride, layer.padding, layer.dilation, layer.groups)


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_compacted_layers_take_the_short_call_and_follow_every_change_of_their_weights(kind):
    torch.manual_seed(0)
    if kind == "linear":
        layer, x = FusedLinear(nn.Linear(6, 5)), torch.randn(3, 6)
    else:
        layer, x = FusedConv2d(nn.Conv2d(3, 5, 3, padding=1)), torch.randn(2, 3, 6, 6)
    layer.compact()
    general = []
    real_forward = layer._forward
    layer._forward = lambda *args: general.append(args) or real_forward(*args)
    with torch.no_grad():
        assert relative_error(_plain(layer, x), layer(x)) < 1e-5
        assert not general  # the cached packed call, not the general path
        layer.bias.mul_(2)  # values changed in place, as load_state_dict does
        assert relative_error(_plain(layer, x), layer(x)) < 1e-5
        layer.set_weight(torch.randn_like(layer.weight))
        assert relative_error(_plain(layer, x), layer(x)) < 1e-5
        layer.bias = nn.Parameter(torch.randn(5), requires_grad=False)  # a new parameter assigned
        assert relative_error(_plain(layer, x), layer(x)) < 1e-5
        assert not general
        assert relative_error(_plain(layer, x), copy.deepcopy(layer)(x)) < 1e-5
    # An input that needs a gradient takes the plain path and gets it.
    leaf = x.clone().requires_grad_()
    layer(leaf).sum().backward()
    expected = x.clone().requires_grad_()
    _plain(layer, expected).sum().backward()
    assert general and relative_error(expected.grad, leaf.grad) < 1e-5
    # Cast to bfloat16: the short call follows the new dtype; a float32 input is cast first.
    layer.to(torch.bfloat16)
    general.clear()
    with torch.no_grad():
        assert relative_error(_plain(layer, x.bfloat16()).float(), layer(x.bfloat16()).float()) < 2e-2
        assert not general
        assert relative_error(_plain(layer, x.bfloat16()).float(), layer(x).float()) < 2e-2
        assert not general and layer(x).dtype == torch.bfloat16
        layer(x.long())  # not floating point: the general path
        assert general


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_convolution_packs_its_weight_for_each_input_shape_and_follows_weight_changes(dtype, monkeypatch):
    from torchlint.optimizer import modules
    from torchlint.optimizer.modules import _SHAPES_KEPT

    torch.manual_seed(0)
    layer = FusedConv2d(nn.Conv2d(8, 16, 1)).to(dtype)
    # choose_packing times both layouts; equal times keep the packing (a loaded machine could make it dense)
    monkeypatch.setattr(modules, "_seconds", lambda fn: 1.0)
    layer.choose_packing((2, 8, 7, 7))
    assert layer.packed
    layer.compact()
    example = layer.packed_weight()
    shapes = [(2, 8, 7, 7), (1, 8, 8, 10), (1, 8, 16, 20), (3, 8, 9, 9), (1, 8, 4, 5), (2, 8, 8, 10)]
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    with torch.no_grad():
        for shape in shapes:
            x = torch.randn(shape, dtype=dtype)
            assert relative_error(_plain(layer, x).float(), layer(x).float()) < tolerance
            assert (layer.weight_for(x) is example) == (shape == shapes[0])
        assert len(layer._by_shape[1]) == _SHAPES_KEPT  # the most recent other shapes only
        layer.set_weight(torch.randn(16, 8, 1, 1))  # a reloaded checkpoint: no packing of the old weight is used
        for shape in reversed(shapes):  # the kept shapes first
            x = torch.randn(shape, dtype=dtype)
            assert relative_error(_plain(layer, x).float(), layer(x).float()) < tolerance
        copied = copy.deepcopy(layer)
        x = torch.randn(shapes[1], dtype=dtype)
        assert relative_error(_plain(layer, x).float(), copied(x).float()) < tolerance
