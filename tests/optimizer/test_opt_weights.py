"""The weights of an optimized model: one copy in memory, and a checkpoint of the original loads into it."""

import copy
import gc

import pytest

torch = pytest.importorskip("torch")

from optimizer_helpers import randomize_batchnorm, relative_error  # noqa: E402
from torch import nn  # noqa: E402

import torchlint.optimizer as optimizer  # noqa: E402
from torchlint.optimizer.footprint import tensor_bytes as held_bytes  # noqa: E402


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )
    return randomize_batchnorm(model).eval()


def test_an_optimized_cnn_holds_one_copy_of_its_weights():
    model = small_cnn()
    given = held_bytes(model)
    fast = optimizer.optimize(model, torch.randn(2, 3, 16, 16))
    assert "onednn_fusion" in optimizer.explain(fast).passes_applied
    assert held_bytes(fast) <= 1.1 * given
    # What was dropped comes back from the packed, folded weights.
    original, state = model.state_dict(), fast.state_dict()
    assert list(state) == list(original)
    assert all(torch.allclose(original[k], state[k], rtol=1e-5, atol=1e-6) for k in original)
    del model
    gc.collect()
    with torch.no_grad():
        assert fast(torch.randn(1, 3, 8, 8)).shape == (1, 10)


class TiedHead(nn.Module):
    """A language model's shape: the output layer reuses the token embedding's weight."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(1000, 64)
        self.hidden = nn.Linear(64, 64)
        self.head = nn.Linear(64, 1000, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(torch.relu(self.hidden(self.embed(ids))))


class ExportedTiedHead(TiedHead):
    def forward(self, ids):
        logits = super().forward(ids)
        if ids.shape[1] > 1:  # control flow on a size: torch.fx cannot trace it, torch.export captures it
            logits = logits[:, 1:]
        return logits


@pytest.mark.parametrize("kind", [TiedHead, ExportedTiedHead])
def test_a_weight_tied_to_an_embedding_is_not_held_twice(kind):
    torch.manual_seed(0)
    model = kind().eval()
    ids = torch.randint(0, 1000, (2, 8))
    given = held_bytes(model)
    fast = optimizer.optimize(model, ids)
    report = optimizer.explain(fast)
    assert (kind is ExportedTiedHead) == any("torch.export" in e.detail for e in report.filter("traced"))
    assert "onednn_fusion" in report.passes_applied  # the untied layer is packed
    assert any("tied" in e.detail and e.where.endswith("head") for e in report.skipped)
    expected = model(ids)
    del model
    gc.collect()
    assert held_bytes(fast) <= 1.1 * given
    with torch.no_grad():
        assert relative_error(expected, fast(ids)) < 1e-4


def test_a_bf16_model_holds_no_float32_copy_of_the_weights_it_casts():
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no native bf16")
    model = small_cnn()
    x = torch.randn(2, 3, 16, 16)
    given = held_bytes(model)
    fast = optimizer.optimize(model, x, dtype="bf16")
    assert "cast_weights" in optimizer.explain(fast).passes_applied
    original = model.state_dict()
    del model
    gc.collect()
    assert held_bytes(fast) <= 0.6 * given  # conv and linear weights in bf16, nothing else
    state = fast.state_dict()
    assert list(state) == list(original)
    assert all(state[k].dtype == original[k].dtype for k in original)
    assert all(torch.allclose(original[k], state[k], rtol=1e-2, atol=1e-2) for k in original)


def test_copies_and_conversions_keep_one_copy():
    model = small_cnn()
    given = held_bytes(model)
    fast = optimizer.optimize(model, torch.randn(2, 3, 16, 16))
    x = torch.randn(2, 3, 16, 16)
    for other in (copy.deepcopy(fast), torch.load(_saved(fast), weights_only=False)):
        assert held_bytes(other) <= 1.1 * given
        with torch.no_grad():
            assert relative_error(model(x), other(x)) < 1e-4
    double = copy.deepcopy(fast).double()
    with torch.no_grad():
        assert relative_error(model.double()(x.double()), double(x.double())) < 1e-6


def _saved(model):
    import io

    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    return buffer


def trained(model: nn.Module, seed: int = 1) -> dict:
    """A checkpoint of `model` after (pretend) training: every float tensor moved, variances kept positive."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in model.state_dict().items():
        if not value.is_floating_point():
            state[key] = value.clone()
        elif key.endswith("running_var"):
            state[key] = torch.rand(value.shape, generator=generator) + 0.5
        else:
            state[key] = value + 0.3 * torch.randn(value.shape, generator=generator)
    return state


@pytest.mark.parametrize("dtype", [None, "bf16"])
def test_loading_a_checkpoint_gives_what_loading_then_optimizing_gives(dtype):
    if dtype == "bf16" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no native bf16")
    model = small_cnn()
    x = torch.randn(2, 3, 16, 16)
    fast = optimizer.optimize(model, x, dtype=dtype)
    checkpoint = trained(model)
    result = fast.load_state_dict(checkpoint)
    assert not result.missing_keys and not result.unexpected_keys
    model.load_state_dict(checkpoint)
    again = optimizer.optimize(model, x, dtype=dtype)
    assert optimizer.explain(again).passes_applied == optimizer.explain(fast).passes_applied
    with torch.no_grad():
        assert torch.equal(fast(x), again(x))
        assert relative_error(model(x), fast(x)) < (1e-4 if dtype is None else 5e-2)
    state = fast.state_dict()
    # In bf16 the float32 originals are not kept: state_dict() gives the bf16 weights, in float32.
    close = 1e-5 if dtype is None else 1e-2
    assert all(state[k].dtype == checkpoint[k].dtype for k in checkpoint)
    assert all(torch.allclose(checkpoint[k], state[k], rtol=close, atol=close) for k in checkpoint)


def test_loading_a_checkpoint_into_a_model_captured_with_torch_export():
    from test_opt_export import Tagger, _tokens

    torch.manual_seed(0)
    model = Tagger().eval()
    ids = _tokens(2, 8)
    fast = optimizer.optimize(model, ids)
    assert any("torch.export" in e.detail for e in optimizer.explain(fast).filter("traced"))
    checkpoint = trained(model)
    fast.load_state_dict(checkpoint)
    model.load_state_dict(checkpoint)
    with torch.no_grad():
        expected, actual = model(ids), fast(ids)
    assert relative_error(expected.logits, actual.logits) < 1e-4


def test_a_checkpoint_that_does_not_fit_is_refused_by_name():
    model = small_cnn()
    fast = optimizer.optimize(model, torch.randn(2, 3, 16, 16))
    checkpoint = trained(model)
    del checkpoint["1.running_mean"]
    with pytest.raises(RuntimeError, match="missing key '1.running_mean'"):
        fast.load_state_dict(checkpoint)
    checkpoint = trained(model)
    checkpoint["0.weight"] = torch.zeros(4, 3, 3, 3)
    with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
        fast.load_state_dict(checkpoint)
    partial = {k: v for k, v in trained(model).items() if k.startswith("10.")}
    result = fast.load_state_dict(partial, strict=False)
    assert "0.weight" in result.missing_keys
    assert torch.equal(fast.state_dict()["10.weight"], partial["10.weight"])
