"""optimize() end to end: every fixture model, eval and train, the caller's model, partial tracing, rollback."""

import pytest

torch = pytest.importorskip("torch")

from optimizer_helpers import (  # noqa: E402
    assert_same_state,
    count_modules,
    randomize_batchnorm,
    relative_error,
    state_of,
)
from torch import nn  # noqa: E402

import torchlint.optimizer as optimizer  # noqa: E402
from fixtures.models import branchy, mlp, mobilenet, resnet, transformer, vgg  # noqa: E402
from torchlint.optimizer.modules import FusedConv2d  # noqa: E402
from torchlint.optimizer.report import Report  # noqa: E402

IMAGE = (2, 3, 32, 32)
FIXTURES = {
    "resnet18": (resnet.resnet18, IMAGE),
    "resnet50": (resnet.resnet50, IMAGE),
    "mobilenet_v2": (mobilenet.mobilenet_v2, IMAGE),
    "vgg_small": (vgg.vgg_small, IMAGE),
    "mlp": (mlp.mlp, (4, 512)),
    "transformer": (transformer.classifier, (2, 16, 256)),
    "encoder": (transformer.encoder, (2, 16, 256)),
    "branchy": (branchy.branchy, IMAGE),
    "per_sample": (branchy.per_sample, IMAGE),
}
BATCHNORM = nn.modules.batchnorm._BatchNorm


def _model(name, train=False):
    factory, shape = FIXTURES[name]
    torch.manual_seed(0)
    model = randomize_batchnorm(factory())
    return (model.train() if train else model.eval()), torch.randn(shape)


@pytest.mark.parametrize("name", list(FIXTURES))
def test_every_fixture_model_in_eval(name):
    model, x = _model(name)
    before = state_of(model)
    fast = optimizer.optimize(model, x)
    with torch.no_grad():
        assert relative_error(model(x), fast(x)) < 1e-4
        other = torch.randn(1, *x.shape[1:])  # another batch size than the one verified
        assert relative_error(model(other), fast(other)) < 1e-4
    report = optimizer.explain(fast)
    assert report is fast.torchlint_report and not report.rolled_back
    assert_same_state(before, state_of(model))
    if name in ("transformer", "encoder"):
        return
    # Every BatchNorm of the conv nets and of the MLP is folded (partial tracing included).
    assert count_modules(fast, BATCHNORM) == 0
    assert report.max_error and max(report.max_error.values()) < 1e-4


@pytest.mark.parametrize("name", ["resnet18", "mlp", "mobilenet_v2", "branchy"])
def test_fixture_models_in_training_mode(name):
    model, _ = _model(name, train=True)
    x = torch.randn(8, *FIXTURES[name][1][1:])
    if name != "mlp":
        x = torch.randn(4, 3, 64, 64)
    before = state_of(model)
    fast = optimizer.optimize(model, x, rtol=1e-3)
    report = optimizer.explain(fast)
    assert_same_state(before, state_of(model))
    assert fast.training
    refused = {e.pass_name: e.detail for e in report.filter("refused")}
    assert {"remove_dropout", "fold_batchnorm", "onednn_fusion"} <= set(refused)
    assert all("training mode" in detail for detail in refused.values())
    assert count_modules(fast, BATCHNORM) == count_modules(model, BATCHNORM)
    # Same outputs with the same dropout masks, and gradients flow.
    torch.manual_seed(1)
    expected = model(x)
    torch.manual_seed(1)
    got = fast(x)
    assert relative_error(expected, got) < 1e-3
    got.sum().backward()
    expected.sum().backward()
    with_grad = sum(p.grad is not None for p in model.parameters())
    assert with_grad > 0 and sum(p.grad is not None for p in fast.parameters()) == with_grad


def test_caller_untouched_unless_inplace():
    model, x = _model("resnet18")
    before = state_of(model)
    fast = optimizer.optimize(model, x)
    assert_same_state(before, state_of(model))
    fast_inplace = optimizer.optimize(model, x, inplace=True)
    with torch.no_grad():
        assert relative_error(fast(x), fast_inplace(x)) < 1e-4


def test_inplace_in_training_keeps_the_callers_parameters():
    # An optimizer built on the caller's parameters keeps working: same Parameter objects, now channels_last.
    model, _ = _model("resnet18", train=True)
    x = torch.randn(4, 3, 64, 64)
    params = {id(p) for p in model.parameters()}
    fast = optimizer.optimize(model, x, inplace=True, rtol=1e-3)
    assert {id(p) for p in fast.parameters()} == params
    assert model.conv1.weight.is_contiguous(memory_format=torch.channels_last)  # mutated in place
    copied = optimizer.optimize(_model("resnet18", train=True)[0], x, rtol=1e-3)
    assert not {id(p) for p in copied.parameters()} & params


def test_inplace_partial_tracing_replaces_children_of_the_callers_model():
    model, x = _model("branchy")
    with torch.no_grad():
        expected = model(x)
    result = optimizer.optimize(model, x, inplace=True)
    assert result is model  # the root did not trace: it is kept, its children were swapped
    assert isinstance(model.stem, torch.fx.GraphModule)
    with torch.no_grad():
        assert relative_error(expected, model(x)) < 1e-4


def test_partial_tracing_recovers_folds_and_reports_the_untraced_root():
    model, x = _model("branchy")
    fast = optimizer.optimize(model, x)
    report = optimizer.explain(fast)
    (untraced,) = report.untraced
    assert untraced.where == "<root>"
    assert "branchy.py" in untraced.detail and "x.mean() > 0.5" in untraced.detail
    traced = {e.where for e in report.filter("traced")}
    assert {"stem", "bright", "dark", "head"} <= traced
    assert len(report.filter("rewrote", "fold_batchnorm")) == 4
    assert count_modules(fast, BATCHNORM) == 0 and count_modules(fast, FusedConv2d) == 4
    # The data-dependent branch still works both ways.
    with torch.no_grad():
        for sample in (x, x + 10, x - 10):
            assert relative_error(model(sample), fast(sample)) < 1e-4


class DataDependentModel(nn.Module):
    """Neither torch.fx nor torch.export can capture a branch on a tensor's value."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) if x.sum() > 0 else -self.fc(x)


class LoopOverValuesModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        for _ in range(int(x.abs().max().ceil())):
            x = self.fc(x)
        return x


@pytest.mark.parametrize("make", [DataDependentModel, LoopOverValuesModel], ids=["branch", "loop"])
def test_untraceable_model_comes_back_working_and_unchanged(make):
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(3, 4)
    fast = optimizer.optimize(model, x)
    report = optimizer.explain(fast)
    assert report.untraced and not report.rewrites
    assert type(fast) is type(model)
    assert any(e.action == "note" and "nothing traced" in e.detail for e in report)
    with torch.no_grad():
        assert torch.equal(model(x), fast(x))


def test_user_batchnorm_subclass_inside_a_model():
    class MyBN(nn.BatchNorm2d):
        def _check_input_dim(self, input):
            if input.dim() != 4:
                raise ValueError("4-D only")

    model = randomize_batchnorm(nn.Sequential(nn.Conv2d(3, 8, 3), MyBN(8), nn.ReLU())).eval()
    x = torch.randn(2, 3, 8, 8)
    fast = optimizer.optimize(model, x)
    assert count_modules(fast, MyBN) == 0 and not optimizer.explain(fast).untraced
    with torch.no_grad():
        assert relative_error(model(x), fast(x)) < 1e-4


def scale_output(gm, ctx):
    """A deliberately wrong pass: multiplies the output by 1.01."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(output):
        scaled = gm.graph.call_function(torch.mul, (output.args[0], 1.01))
    output.args = (scaled,)
    gm.recompile()
    ctx.rewrote("", "scaled the output")
    return gm


def broken_pass(gm, ctx):
    ctx.rewrote("", "about to fail")
    raise RuntimeError("boom")


def test_wrong_pass_rolled_back_and_good_ones_kept():
    model, x = _model("resnet18")
    fast = optimizer.optimize(model, x, passes=["fold_batchnorm", scale_output, broken_pass, "onednn_fusion"])
    report = optimizer.explain(fast)
    rolled = {e.pass_name: e.detail for e in report.rolled_back}
    assert set(rolled) == {"scale_output", "broken_pass"}
    assert "output differs" in rolled["scale_output"] and "boom" in rolled["broken_pass"]
    assert report.passes_applied == ["fold_batchnorm", "onednn_fusion"]
    assert not report.filter("rewrote", "scale_output")  # undone rewrites leave the report
    with torch.no_grad():
        assert relative_error(model(x), fast(x)) < 1e-4


def test_without_example_inputs_not_verified_and_shape_dependent_folds_skipped():
    model, x = _model("mlp")
    fast = optimizer.optimize(model)
    report = optimizer.explain(fast)
    assert any("not verified" in e.detail for e in report.filter("note"))
    assert count_modules(fast, BATCHNORM) == 3  # Linear + BatchNorm1d needs the input rank
    assert all("pass example_inputs" in e.detail for e in report.filter("skipped", "fold_batchnorm"))
    with torch.no_grad():
        assert relative_error(model(x), fast(x)) < 1e-4


def test_keyword_and_tuple_example_inputs():
    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x, scale=1.0):
            return self.bn(self.conv(x)) * scale

    model = randomize_batchnorm(TwoInputs()).eval()
    x = torch.randn(2, 3, 8, 8)
    for example in ((x, 2.0), {"x": x, "scale": 2.0}):
        fast = optimizer.optimize(model, example)
        assert optimizer.explain(fast).max_error
        with torch.no_grad():
            assert relative_error(model(x, 2.0), fast(x, 2.0)) < 1e-4


def test_report_api_and_table():
    model, x = _model("vgg_small")
    report = optimizer.explain(optimizer.optimize(model, x))
    assert isinstance(report, Report)
    text = str(report)
    assert text.splitlines()[0] == report.summary()
    assert "pass" in text and "fold_batchnorm" in text and "verified" in text
    assert report.rewrites and all(e.action == "rewrote" for e in report.rewrites)
    assert report.to_dict()["entries"][0].keys() == {"pass_name", "action", "where", "detail"}
    assert report.transform_seconds > 0
    with pytest.raises(ValueError):
        optimizer.explain(nn.Linear(2, 2))
    with pytest.raises(ValueError):
        optimizer.optimize(model, x, passes=["no_such_pass"])
    with pytest.raises(TypeError):
        optimizer.optimize(lambda x: x)


class ReachesIntoChild(nn.Module):
    """Its root does not trace, and it indexes into a child that does: swapping that child for a graph breaks it."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())

    def forward(self, x):
        if x.sum() > 0:
            return self.stem(x)
        return self.stem[0](x)


def test_traced_children_that_break_the_parent_are_put_back():
    model = randomize_batchnorm(ReachesIntoChild()).eval()
    x = -torch.rand(2, 3, 8, 8)
    fast = optimizer.optimize(model, x)
    notes = [e.detail for e in optimizer.explain(fast).filter("note")]
    assert any("do not reproduce the model" in n for n in notes)
    assert isinstance(fast.stem, nn.Sequential)
    with torch.no_grad():
        assert torch.equal(model(x), fast(x))


def test_example_inputs_the_model_rejects():
    with pytest.raises(ValueError, match="fails on example_inputs"):
        optimizer.optimize(nn.Linear(4, 2), torch.randn(3, 5))


def test_nothing_rewritten_gives_back_the_original_modules():
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh()).train()
    fast = optimizer.optimize(model, torch.randn(2, 4))
    assert type(fast) is nn.Sequential
    assert any("original modules" in e.detail for e in optimizer.explain(fast).filter("note"))
