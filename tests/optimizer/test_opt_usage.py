"""An optimized model under everything a caller may do with it: backward, mode changes, dtype and device changes,
state_dict, copies, pickling, scripting, tracing, compiling; and models with structured outputs."""

import collections
import copy
import dataclasses
import io
import pickle
from typing import NamedTuple

import pytest

torch = pytest.importorskip("torch")

from optimizer_helpers import randomize_batchnorm, relative_error  # noqa: E402
from torch import nn  # noqa: E402

import torchlint.optimizer as optimizer  # noqa: E402
from fixtures.models import resnet  # noqa: E402
from torchlint.optimizer.modules import FusedConv2d, FusedLinear  # noqa: E402


def is_inference_model(model):
    from torchlint.optimizer.inference import InferenceModel

    return isinstance(model, InferenceModel)


def conv_net():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8),
        nn.Hardtanh(0.0, 6.0), nn.Flatten(), nn.Linear(8 * 6 * 6, 10), nn.GELU(),
    )
    return randomize_batchnorm(model).eval(), torch.randn(2, 3, 8, 8)


def optimized():
    model, x = conv_net()
    fast = optimizer.optimize(model, x)
    assert any(isinstance(m, (FusedConv2d, FusedLinear)) for m in fast.modules())
    return model, fast, x


# Backward


def test_input_gradients_through_fused_layers_are_right():
    model, fast, x = optimized()
    x_fast, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    fast(x_fast).square().sum().backward()
    model(x_ref).square().sum().backward()
    assert x_fast.grad is not None
    assert relative_error(x_ref.grad, x_fast.grad) < 1e-4


def test_input_gradients_through_a_residual_net():
    torch.manual_seed(0)
    model, x = randomize_batchnorm(resnet.resnet18()).eval(), torch.randn(1, 3, 32, 32)
    fast = optimizer.optimize(model, x)
    x_fast, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    fast(x_fast).sum().backward()
    model(x_ref).sum().backward()
    assert relative_error(x_ref.grad, x_fast.grad) < 1e-3


def test_parameters_are_frozen_and_re_enabling_grad_raises_at_the_next_forward():
    _, fast, x = optimized()
    assert not any(p.requires_grad for p in fast.parameters())
    fast(x)  # grad mode on, nothing requires grad: plain inference
    for p in fast.parameters():
        p.requires_grad_(True)
    with pytest.raises(RuntimeError, match="for inference.*train\\(\\) mode"):
        fast(x)
    with torch.no_grad():
        fast(x)  # no graph is built under no_grad: allowed


# Train/eval mode


def stochastic_depth(x, p, training):
    if not training:
        return x
    keep = torch.rand(x.shape[0], 1, 1, 1) >= p
    return x * keep / (1 - p)


torch.fx.wrap("stochastic_depth")  # as torchvision does: one graph node whose `training` argument is a constant


class StochasticDepth(nn.Module):
    """Like torchvision's: drops the whole residual branch at random in training, identity in eval."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return stochastic_depth(x, self.p, self.training)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.drop = StochasticDepth(0.5)

    def forward(self, x):
        return x + self.drop(torch.relu(self.bn(self.conv(x))))


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Dropout(0.3))
        self.block = Block()

    def forward(self, x):
        return self.block(self.stem(x))


def test_optimized_in_train_mode_follows_eval_afterwards():
    torch.manual_seed(0)
    model = randomize_batchnorm(DepthNet()).train()
    x = torch.randn(2, 3, 8, 8)
    fast = optimizer.optimize(model, x, rtol=1e-3)
    report = optimizer.explain(fast)
    untraced = {e.where: e.detail for e in report.untraced}
    assert "train/eval mode" in untraced["<root>"] and "train/eval mode" in untraced["block"]
    assert "stem" in {e.where for e in report.filter("traced")}
    fast.eval()
    model.eval()
    with torch.no_grad():
        assert relative_error(model(x), fast(x)) < 1e-5  # no dropout, no stochastic depth, running statistics
    fast.train()
    torch.manual_seed(3)
    expected = model.train()(x)
    torch.manual_seed(3)
    assert relative_error(expected, fast(x)) < 1e-5


def test_optimized_in_eval_mode_refuses_training_mode():
    _, fast, x = optimized()
    with pytest.raises(RuntimeError, match="optimized .* in eval mode"):
        fast.train()
    fast.eval()  # staying in eval mode is fine
    fast.training = True  # set behind train()'s back: the forward refuses
    with pytest.raises(RuntimeError, match="cannot run in training mode"):
        fast(x)


# Output structures


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    features: torch.Tensor
    name: str = "net"


class Pair(NamedTuple):
    logits: torch.Tensor
    score: float


class StructuredNet(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        features = torch.relu(self.bn(self.conv(x)))
        logits = self.fc(features.mean((2, 3)))
        if self.kind == "dataclass":
            return Output(logits, features)
        if self.kind == "namedtuple":
            return Pair(logits, 1.5)
        result = collections.OrderedDict()
        result["out"] = features
        result["aux"] = logits
        return result


@pytest.mark.parametrize("kind", ["dataclass", "namedtuple", "ordereddict"])
def test_structured_outputs_keep_their_type_and_are_compared_by_field(kind):
    model = randomize_batchnorm(StructuredNet(kind)).eval()
    x = torch.randn(2, 3, 8, 8)
    fast = optimizer.optimize(model, x)
    report = optimizer.explain(fast)
    assert not report.rolled_back
    with torch.no_grad():
        expected, got = model(x), fast(x)
    assert type(got) is type(expected)
    if kind == "ordereddict":  # traced whole: fx would have returned a plain dict
        assert "fold_batchnorm" in report.passes_applied and "<root>" in {e.where for e in report.filter("traced")}
        assert list(got) == ["out", "aux"] and got["out"].is_contiguous()
        with torch.no_grad():  # the graph's code builds the OrderedDict, and survives pickling
            assert type(pickle.loads(pickle.dumps(fast))(x)) is collections.OrderedDict
    if kind == "dataclass":
        assert got.name == "net"
    if kind != "dataclass":
        assert report.max_error
    for a, b in zip(dataclasses.astuple(expected) if kind == "dataclass" else tuple(expected.values())
                    if kind == "ordereddict" else expected,
                    dataclasses.astuple(got) if kind == "dataclass" else tuple(got.values())
                    if kind == "ordereddict" else got):
        if isinstance(a, torch.Tensor):
            assert relative_error(a, b) < 1e-4


class Opaque:
    """A value whose == raises, like a dataclass holding tensors compared with ==."""

    def __init__(self, t):
        self.t = t

    def __eq__(self, other):
        return bool(self.t == other.t)  # "Boolean value of Tensor with more than one value is ambiguous"


class OpaqueNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))

    def forward(self, x):
        return Opaque(self.features(x))


def test_output_that_cannot_be_compared_comes_back_unchanged_with_the_reason():
    model = randomize_batchnorm(OpaqueNet()).eval()
    x = torch.randn(2, 3, 8, 8)
    fast = optimizer.optimize(model, x)
    notes = " ".join(e.detail for e in optimizer.explain(fast).filter("note"))
    assert "cannot be compared" in notes and "ambiguous" in notes
    assert type(fast) is OpaqueNet and not is_inference_model(fast)


def test_compare_reports_where_structures_differ():
    from torchlint.optimizer.verify import FP32, compare

    t = torch.ones(2)
    assert compare({"a": t}, collections.OrderedDict(a=t), FP32).detail.startswith("output is a OrderedDict")
    assert "keys" in compare({"a": t, "b": t}, {"b": t, "a": t}, FP32).detail
    assert "output.logits" in compare(Output(t, t), Output(t + 1, t), FP32).detail
    assert "output.score" in compare(Pair(t, 1.0), Pair(t, 2.0), FP32).detail
    assert "output[1]" in compare((t, 1.0), (t, 2.0), FP32).detail
    assert compare(Pair(t, 1.0), Pair(t, 1.0 + 1e-9), FP32).ok  # floats within tolerance
    assert "float64" in compare(t, t.double(), FP32).detail
    assert compare([t, "x", None], [t.clone(), "x", None], FP32).ok


def test_compare_tensors_by_scale_dtype_and_non_finite_values():
    from torchlint.optimizer.verify import FP32, LOW_PRECISION, compare

    x = torch.tensor([1000.0, 1.0, -3.0])
    assert compare(x, x + 0.05, FP32).ok  # 5e-5 of the output's scale
    assert "relative" in compare(x, x + 0.5, FP32).detail
    # Mixed precision: a float32 output may come back in bf16, as from eager autocast; not in another dtype.
    bf16 = LOW_PRECISION[torch.bfloat16]
    assert compare(x, x.bfloat16(), bf16).ok and not compare(x, x.bfloat16(), FP32).ok
    assert "float16" in compare(x, x.half(), bf16).detail
    nan = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare(nan, nan.clone(), FP32).ok
    assert "NaNs" in compare(nan, torch.tensor([float("nan"), 1.0, float("inf")]), FP32).detail
    assert "infinities" in compare(nan, torch.tensor([1.0, float("nan"), -float("inf")]), FP32).detail
    assert "relative" in compare(nan, torch.tensor([2.0, float("nan"), float("inf")]), FP32).detail


# dtype, device and inputs


@pytest.mark.parametrize("convert", ["double", "half", "bfloat16"])
def test_dtype_conversion_of_an_optimized_model(convert):
    model, fast, x = optimized()
    fast = getattr(fast, convert)()
    model = getattr(copy.deepcopy(model), convert)()
    x = x.to(next(model.parameters()).dtype)
    with torch.no_grad():
        expected, got = model(x), fast(x)
    assert got.dtype == expected.dtype
    tolerance = {"double": 1e-6, "half": 1e-2, "bfloat16": 5e-2}[convert]
    assert relative_error(expected.float(), got.float()) < tolerance
    assert {v.dtype for v in fast.state_dict().values() if v.is_floating_point()} == {expected.dtype}


class TakesAList(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, images):
        return torch.cat([self.bn(self.conv(image)) for image in images])


def test_a_list_is_one_argument_and_a_tuple_several():
    model = randomize_batchnorm(TakesAList()).eval()
    images = [torch.randn(1, 3, 8, 8), torch.randn(2, 3, 8, 8)]
    fast = optimizer.optimize(model, images)
    assert optimizer.explain(fast).max_error is not None
    with torch.no_grad():
        assert relative_error(model(images), fast(images)) < 1e-4
    two = nn.Bilinear(3, 4, 2).eval()
    with pytest.raises(ValueError, match="list is passed as ONE argument"):
        optimizer.optimize(two, [torch.randn(2, 3), torch.randn(2, 4)])
    assert optimizer.optimize(two, (torch.randn(2, 3), torch.randn(2, 4))) is not None


# state_dict, copies, serialisation, scripting, tracing, compiling


def test_state_dict_keeps_the_originals_keys_and_values():
    model, fast, _ = optimized()
    original, state = model.state_dict(), fast.state_dict()
    assert list(state) == list(original)
    # Weights folded with a BatchNorm are computed back from the folded ones: equal up to rounding.
    assert all(torch.allclose(original[k], state[k], rtol=1e-5, atol=1e-6) for k in original)
    assert sum(torch.equal(original[k], state[k]) for k in original) > len(original) // 2
    fresh = copy.deepcopy(model)
    fresh.load_state_dict(state)  # the optimized model's checkpoint loads into the original architecture


def test_state_dict_of_a_train_mode_autocast_model_loads_back():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    fast = optimizer.optimize(model, torch.randn(2, 3, 8, 8), autocast="bf16")
    assert list(fast.state_dict()) == list(model.state_dict())
    changed = {k: v + 1 if v.is_floating_point() else v for k, v in model.state_dict().items()}
    fast.load_state_dict(changed)
    assert torch.equal(fast.state_dict()["0.weight"], changed["0.weight"])


def test_deepcopy_pickle_and_torch_save_keep_an_optimized_model_working():
    model, fast, x = optimized()
    with torch.no_grad():
        expected = fast(x)
    buffer = io.BytesIO()
    torch.save(fast, buffer)
    buffer.seek(0)
    for other in (copy.deepcopy(fast), pickle.loads(pickle.dumps(fast)), torch.load(buffer, weights_only=False)):
        assert is_inference_model(other) and optimizer.explain(other).passes_applied
        assert list(other.state_dict()) == list(model.state_dict())
        assert not any(name.startswith("_torchlint") for name, _ in other.named_modules())
        with torch.no_grad():
            assert torch.equal(expected, other(x))
        with pytest.raises(RuntimeError):
            other.train()


def test_jit_trace_works_and_jit_script_says_what_to_do():
    model, fast, x = optimized()
    traced = torch.jit.trace(fast, x)
    with torch.no_grad():
        assert relative_error(model(x), traced(x)) < 1e-4
    with pytest.raises(RuntimeError, match="use torch.jit.trace"):
        torch.jit.script(fast)


def test_torch_compile_of_an_optimized_model():
    model, fast, x = optimized()
    compiled = torch.compile(fast, backend="aot_eager")
    with torch.no_grad():
        assert relative_error(model(x), compiled(x)) < 1e-4


def test_a_transformer_captured_with_torch_export_composes_with_trace_and_compile():
    from fixtures.models import transformer

    torch.manual_seed(0)
    model, x = transformer.encoder().eval(), torch.randn(2, 8, 256)
    fast = optimizer.optimize(model, x)
    assert any("torch.export" in e.detail for e in optimizer.explain(fast).filter("traced"))
    assert "onednn_fusion" in optimizer.explain(fast).passes_applied
    with torch.no_grad():
        expected = model(x)
        assert relative_error(expected, torch.jit.trace(fast, x)(x)) < 1e-4
        torch._dynamo.reset()
        assert relative_error(expected, torch.compile(fast, backend="aot_eager")(x)) < 1e-4
    with pytest.raises(RuntimeError, match="use torch.jit.trace"):
        torch.jit.script(fast)


# Report and shapes


def test_report_leads_with_one_line_per_pass_and_details_only_when_verbose():
    torch.manual_seed(0)
    model, x = randomize_batchnorm(resnet.resnet18()).eval(), torch.randn(1, 3, 32, 32)
    report = optimizer.explain(optimizer.optimize(model, x))
    lines = str(report).splitlines()
    assert lines[0] == report.summary()
    assert "  fold_batchnorm: 20 BatchNorm layers folded" in lines
    assert any(line.startswith("  onednn_fusion: ") and line.endswith(" layers fused") for line in lines)
    assert "layer1.0.conv1" not in str(report)  # per-layer detail only with verbose
    verbose = report.format(verbose=True)
    assert verbose.startswith(str(report)) and "layer1.0.conv1" in verbose


def test_other_input_shapes_than_the_example():
    torch.manual_seed(0)
    model, x = randomize_batchnorm(resnet.resnet18()).eval(), torch.randn(2, 3, 32, 32)
    fast = optimizer.optimize(model, x)
    with torch.no_grad():
        for shape in ((1, 3, 32, 32), (5, 3, 48, 40), (1, 3, 97, 64)):
            other = torch.randn(shape)
            assert relative_error(model(other), fast(other)) < 1e-4


def test_copies_of_a_partly_traced_inference_model():
    from fixtures.models import branchy

    torch.manual_seed(0)
    model, x = randomize_batchnorm(branchy.branchy()).eval(), torch.randn(2, 3, 16, 16)
    fast = optimizer.optimize(model, x)
    assert isinstance(fast, type(model)) and is_inference_model(fast)  # the root did not trace
    with torch.no_grad():
        expected = fast(x)
        for other in (copy.deepcopy(fast), pickle.loads(pickle.dumps(fast))):
            assert isinstance(other, type(model)) and is_inference_model(other)
            assert torch.equal(expected, other(x))
            assert list(other.state_dict()) == list(model.state_dict())
