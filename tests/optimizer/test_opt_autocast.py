"""Mixed precision: autocast wrapper, weights cast once in eval, fp16 refused on CPUs without it, train mode."""

import pytest

torch = pytest.importorskip("torch")

from optimizer_helpers import randomize_batchnorm, relative_error  # noqa: E402
from torch import nn  # noqa: E402

import torchlint.optimizer as optimizer  # noqa: E402
from fixtures.models import resnet, transformer  # noqa: E402
from torchlint.optimizer.modules import AutocastForward  # noqa: E402

BF16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()
FP16 = torch.ops.mkldnn._is_mkldnn_fp16_supported()


@pytest.mark.skipif(not BF16, reason="this CPU has no native bf16")
@pytest.mark.parametrize("setting", ["bf16", True])
def test_bf16_in_eval_casts_weights_once(setting):
    torch.manual_seed(0)
    model = randomize_batchnorm(resnet.resnet18()).eval()
    x = torch.randn(2, 3, 32, 32)
    fast = optimizer.optimize(model, x, autocast=setting)
    report = optimizer.explain(fast)
    assert isinstance(fast, AutocastForward) and fast.dtype == torch.bfloat16
    assert {"autocast", "cast_weights"} <= set(report.passes_applied)
    assert {p.dtype for p in fast.parameters()} == {torch.bfloat16}  # BatchNorm folded: only conv/linear left
    with torch.no_grad():
        y = fast(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            eager = model(x)
    assert y.dtype == eager.dtype == torch.bfloat16  # as eager autocast returns it, not cast back
    assert relative_error(model(x), y) < 5e-2


@pytest.mark.skipif(not BF16, reason="this CPU has no native bf16")
def test_bf16_on_a_transformer_encoder_that_fx_cannot_trace():
    torch.manual_seed(0)
    model = transformer.encoder().eval()
    x = torch.randn(2, 8, 256)
    fast = optimizer.optimize(model, x, autocast="bf16")
    report = optimizer.explain(fast)
    assert any("torch.export" in e.detail for e in report.filter("traced"))
    assert "cast_weights" in report.passes_applied
    with torch.no_grad():
        assert relative_error(model(x), fast(x)) < 5e-2


@pytest.mark.skipif(FP16, reason="this CPU has native fp16")
def test_fp16_refused_on_a_cpu_without_it():
    model = nn.Sequential(nn.Linear(4, 4)).eval()
    fast = optimizer.optimize(model, torch.randn(2, 4), autocast="fp16")
    report = optimizer.explain(fast)
    (refused,) = report.filter("refused", "autocast")
    assert "80x slower" in refused.detail
    assert not isinstance(fast, AutocastForward)


@pytest.mark.skipif(not BF16, reason="this CPU has no native bf16")
def test_autocast_in_training_keeps_fp32_weights():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).train()
    x = torch.randn(8, 16)
    fast = optimizer.optimize(model, x, autocast="bf16")
    report = optimizer.explain(fast)
    assert "autocast" in report.passes_applied
    assert any(e.pass_name == "cast_weights" and "training mode" in e.detail for e in report.filter("refused"))
    assert {p.dtype for p in fast.parameters()} == {torch.float32}
    fast(x).sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in fast.parameters())


def test_bad_autocast_value():
    with pytest.raises(ValueError):
        optimizer.optimize(nn.Linear(2, 2), autocast="int8")


def test_a_model_output_is_cast_back_once_per_tensor():
    # A ModelOutput is a dataclass and a dict: its tensor is both a field and an item, to be mapped once.
    import dataclasses
    from collections import OrderedDict

    @dataclasses.dataclass
    class Output(OrderedDict):
        logits: torch.Tensor = None

        def __post_init__(self):
            self["logits"] = self.logits

    class Head(nn.Module):
        def forward(self, x):
            return Output(logits=x.to(torch.bfloat16))

    casts = []
    wrapped = AutocastForward(Head(), "cpu", torch.bfloat16, output_dtype=torch.float32)
    original = wrapped._cast_back
    wrapped._cast_back = lambda value: casts.append(value) or original(value)
    out = wrapped(torch.randn(2, 3))
    assert len(casts) == 1
    assert out.logits.dtype == torch.float32 and out.logits is out["logits"]
