"""Models torch.fx cannot trace are captured with torch.export, and the same passes run on what it captured."""

import copy
import pickle
from typing import NamedTuple

import pytest

torch = pytest.importorskip("torch")

from optimizer_helpers import relative_error  # noqa: E402
from torch import nn  # noqa: E402

import torchlint.optimizer as optimizer  # noqa: E402
from torchlint.optimizer.modules import FusedLinear  # noqa: E402


class Out(NamedTuple):
    logits: torch.Tensor
    pooled: torch.Tensor


class Conv1D(nn.Module):
    """A linear layer storing its weight transposed and calling addmm, as GPT-2's does."""

    def __init__(self, nx, nf):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.1)
        self.bias = nn.Parameter(torch.randn(nf) * 0.1)

    def forward(self, x):
        *leading, features = x.shape
        return torch.addmm(self.bias, x.reshape(-1, features), self.weight).reshape(*leading, -1)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(32, 16)
        self.drop = nn.Dropout(0.1)
        self.norm = nn.LayerNorm(16)
        self.mix = Conv1D(16, 16)
        self.head = nn.Linear(16, 5)

    def forward(self, ids, mask=None):
        batch, length = ids.shape  # unpacking a shape: torch.fx cannot iterate a Proxy
        h = self.embed(ids)
        h = self.norm(h + self.drop(self.fc2(self.act(self.fc1(h)))))
        h = self.mix(h)
        if mask is not None:
            h = h * mask.unsqueeze(-1)
        return Out(self.head(h), h.reshape(batch, length, -1).mean(1))


def _tokens(batch, length, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 50, (batch, length), generator=generator)


def _assert_same(model, fast, *args, **kwargs):
    with torch.no_grad():
        expected, actual = model(*args, **kwargs), fast(*args, **kwargs)
    assert type(actual) is Out
    assert relative_error(expected.logits, actual.logits) < 1e-4
    assert relative_error(expected.pooled, actual.pooled) < 1e-4


def test_a_model_fx_cannot_trace_is_captured_with_torch_export_and_optimized():
    torch.manual_seed(0)
    model = Tagger().eval()
    ids = _tokens(4, 12)
    fast = optimizer.optimize(model, ids)
    report = optimizer.explain(fast)
    (traced,) = report.filter("traced")
    assert traced.where == "<root>" and "torch.export" in traced.detail
    assert not report.untraced
    fused = [m for m in fast.modules() if isinstance(m, FusedLinear)]
    # fc1 + GELU as one call, fc2, head, and the transposed-weight addmm as a Linear
    assert len(fused) == 4 and {m.attr for m in fused} == {"gelu", "none"}
    _assert_same(model, fast, ids)
    _assert_same(model, fast, _tokens(2, 7, seed=1))  # other batch size and length than the example


class NormAct(nn.BatchNorm2d):
    """Batch norm then an in-place activation in one layer (timm's norm-act layers)."""

    def __init__(self, channels):
        super().__init__(channels)
        self.act = nn.SiLU(inplace=True)

    def forward(self, x):
        x = nn.functional.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.1,
                                     self.eps)
        return self.act(x)


class ShapeSwitched(nn.Module):
    """Python control flow on a tensor's size: torch.fx cannot trace it, torch.export can."""

    def __init__(self):
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(3, 8, 3, padding=1), NormAct(8)
        self.conv2, self.norm2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)

    def forward(self, x):
        h = self.norm1(self.conv1(x))
        if h.shape[-1] > 4:
            h = nn.functional.avg_pool2d(h, 2)
        return self.norm2(self.conv2(h)).relu()


def test_batch_norms_in_an_exported_graph_are_folded_norm_act_layers_too():
    torch.manual_seed(0)
    model = ShapeSwitched().eval()
    for bn in (model.norm1, model.norm2):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 16, 16)
    fast = optimizer.optimize(model, x)
    report = optimizer.explain(fast)
    assert any("torch.export" in e.detail for e in report.filter("traced"))
    assert len(report.filter("rewrote", "fold_batchnorm")) == 2
    assert not any(isinstance(m, nn.BatchNorm2d) for m in fast.modules())
    with torch.no_grad():
        assert relative_error(model(x), fast(x)) < 1e-4
        assert relative_error(model(x[:1]), fast(x[:1])) < 1e-4


def test_a_batch_of_one_does_not_fix_the_batch_size():
    torch.manual_seed(0)
    model = Tagger().eval()
    fast = optimizer.optimize(model, _tokens(1, 12))
    assert any("torch.export" in e.detail for e in optimizer.explain(fast).filter("traced"))
    _assert_same(model, fast, _tokens(5, 9, seed=2))


def test_keyword_inputs_and_a_transposed_weight_seen_as_a_linear():
    torch.manual_seed(0)
    model = Tagger().eval()
    ids = _tokens(3, 10)
    mask = (torch.rand(3, 10) > 0.3).float()
    fast = optimizer.optimize(model, {"ids": ids, "mask": mask})
    _assert_same(model, fast, ids=ids, mask=mask)
    (mix,) = [m for m in fast.modules() if isinstance(m, FusedLinear) and m.weight.shape == (16, 16)]
    assert torch.equal(mix.weight, model.mix.weight.t())
    assert torch.equal(fast.state_dict()["mix.weight"], model.mix.weight)


class PerRow(nn.Module):
    """A loop over the batch: export unrolls it, so the graph holds for the example's batch size only."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        rows = [self.fc(row) for row in x]
        return torch.stack(rows)


def test_a_call_outside_the_sizes_export_assumed_runs_the_original_code():
    torch.manual_seed(0)
    model = PerRow().eval()
    fast = optimizer.optimize(model, torch.randn(2, 6))
    assert any("torch.export" in e.detail for e in optimizer.explain(fast).filter("traced"))
    with torch.no_grad():
        for batch in (2, 3, 1):
            x = torch.randn(batch, 6)
            assert relative_error(model(x), fast(x)) < 1e-4


def test_a_call_outside_the_guards_of_a_mixed_precision_model_runs_the_original_under_its_autocast():
    torch.manual_seed(0)
    model = PerRow().eval()
    fast = optimizer.optimize(model, torch.randn(2, 6), dtype="bf16", measure=False)
    assert "autocast" in optimizer.explain(fast).passes_applied
    with torch.no_grad():
        for batch in (2, 3):
            x = torch.randn(batch, 6)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                expected = model(x)
            actual = fast(x)
            # In float32 the fallback would be slower than the eager autocast the user compares it with.
            assert actual.dtype == expected.dtype == torch.bfloat16
            assert relative_error(expected.float(), actual.float()) < 2e-2


def test_an_exported_model_copies_and_pickles():
    torch.manual_seed(0)
    model = Tagger().eval()
    ids = _tokens(2, 8)
    fast = optimizer.optimize(model, ids)
    for other in (copy.deepcopy(fast), pickle.loads(pickle.dumps(fast))):
        _assert_same(model, other, _tokens(3, 5, seed=3))
        assert list(other.state_dict()) == list(model.state_dict())


def _transformers():
    try:
        import transformers

        _ = transformers.BertForSequenceClassification, transformers.GPT2LMHeadModel  # imported on first use
    except Exception:  # noqa: BLE001 - absent, or an installed torchvision that does not load
        pytest.skip("transformers is not installed (or does not import)")
    return transformers


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_hugging_face_models_keep_their_output_type(kind):
    transformers = _transformers()
    torch.manual_seed(0)
    if kind == "bert":
        config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                         intermediate_size=64, vocab_size=100, num_labels=3)
        model = transformers.BertForSequenceClassification(config).eval()
    else:
        config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100)
        model = transformers.GPT2LMHeadModel(config).eval()
    inputs = {"input_ids": torch.randint(0, 100, (2, 16)), "attention_mask": torch.ones(2, 16, dtype=torch.long)}
    if kind == "gpt2":
        inputs["use_cache"] = False
    fast = optimizer.optimize(model, inputs)
    report = optimizer.explain(fast)
    assert any("torch.export" in e.detail for e in report.filter("traced"))
    assert "onednn_fusion" in report.passes_applied
    other = {"input_ids": torch.randint(0, 100, (3, 9)), "attention_mask": torch.ones(3, 9, dtype=torch.long)}
    if kind == "gpt2":
        other["use_cache"] = False
    with torch.no_grad():
        expected, actual = model(**other), fast(**other)
    assert type(actual) is type(expected)
    assert relative_error(expected.logits, actual.logits) < 1e-4
