"""Keeping only what pays: the timing logic, checked with a fake clock (models advance it by a cost written into
their graph) and with a deliberately slow pass. Nothing here asserts how fast anything ran."""

import random
import time

import pytest

torch = pytest.importorskip("torch")

from torch import fx, nn  # noqa: E402

import torchlint.optimizer as optimizer  # noqa: E402
from torchlint.optimizer import measure  # noqa: E402
from torchlint.optimizer.modules import AutocastForward, FusedLinear  # noqa: E402
from torchlint.optimizer.passes import PassResult  # noqa: E402


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


CLOCK = FakeClock()


def tick(x, cost):
    """Advance the fake clock by `cost` seconds: the model's whole run time as the fake clock sees it."""
    CLOCK.now += cost
    return x


fx.wrap("tick")  # one graph node whose cost argument a pass can change


class Costly(nn.Module):
    def __init__(self, cost=1.0):
        super().__init__()
        self.cost = cost
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return tick(self.fc(x), self.cost)


@pytest.fixture
def fake_clock(monkeypatch):
    monkeypatch.setattr(measure, "clock", CLOCK)
    return CLOCK


def set_cost(cost, wrapped=None):
    """A pass setting the cost argument of the graph's `tick` node (or of another wrapped function's node)."""

    def pass_(gm, ctx):
        target = wrapped or tick  # looked up at run time: a test may swap `tick`
        node = next(n for n in gm.graph.nodes if n.target is target)
        node.args = (node.args[0], cost)
        gm.recompile()
        ctx.rewrote(node.name, f"cost {cost}")
        return PassResult(gm, True)

    pass_.__name__ = f"cost_{cost}".replace(".", "_")
    return pass_


def test_a_faster_group_is_kept_with_its_measured_speedup(fake_clock):
    model, x = Costly().eval(), torch.randn(2, 4)
    fast = optimizer.optimize(model, x, passes=[set_cost(0.5)], measure=True, time_limit=1000)
    report = optimizer.explain(fast)
    assert report.passes_applied == ["cost_0_5"]
    assert report.speedup == pytest.approx(2.0)
    (line,) = [line for line in report.pass_lines() if line.startswith("measured")]
    assert "2.00x" in line and f"median of {measure.CLEAR_ROUNDS}" in line


@pytest.mark.parametrize("cost", [2.0, 0.99])  # slower; faster by less than the 2% taken as noise
def test_a_group_that_does_not_pay_is_undone(fake_clock, cost):
    model, x = Costly().eval(), torch.randn(2, 4)
    fast = optimizer.optimize(model, x, passes=[set_cost(cost)], measure=True)
    report = optimizer.explain(fast)
    assert report.passes_applied == [] and report.speedup is None
    (undone,) = report.rolled_back
    assert "not faster" in undone.detail
    assert type(fast) is Costly and not isinstance(fast, fx.GraphModule)  # the model as given
    with torch.no_grad():
        assert torch.equal(model(x), fast(x))


class CostlyConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return tick(self.conv(x), 1.0)


@pytest.mark.parametrize("inplace", [False, True])
def test_a_group_undone_leaves_the_weights_as_given(fake_clock, inplace):
    """channels_last gives the convolutions new weights in eval mode: the model handed back when the group does
    not pay still has the caller's weights, in their memory format (not a silently faster layout)."""
    model, x = CostlyConv().eval(), torch.randn(2, 3, 8, 8)
    given = model.conv.weight
    fast = optimizer.optimize(model, x, passes=["channels_last", set_cost(2.0)], measure=True, inplace=inplace)
    assert optimizer.explain(fast).passes_applied == []
    assert fast.conv.weight.is_contiguous() and not fast.conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(fast.conv.weight, given) and model.conv.weight is given


def test_the_time_limit_bounds_the_rounds(fake_clock):
    model, x = Costly().eval(), torch.randn(2, 4)
    fast = optimizer.optimize(model, x, passes=[set_cost(0.5)], measure=True, time_limit=2.0)
    (line,) = [line for line in optimizer.explain(fast).pass_lines() if line.startswith("measured")]
    assert f"median of {measure.MIN_ROUNDS} interleaved" in line  # 1.5 fake seconds a round: stop at the minimum


def test_noise_decides():
    assert measure.Timing(baseline=1.0, candidate=0.9, ratio=0.9, rounds=5, noise=0.01).pays
    assert not measure.Timing(baseline=1.0, candidate=0.9, ratio=0.9, rounds=5, noise=0.06).pays  # within noise
    assert not measure.Timing(baseline=1.0, candidate=0.99, ratio=0.99, rounds=5, noise=0.0).pays  # below MIN_GAIN


class Jittery(nn.Module):
    """Costs alternate between rounds, as under changing machine load: baseline 1, 3, 1, 3... and the candidate
    (after set_cost(0.8)) 0.8, 2.4, ...: every paired ratio is 0.8, though the medians alone overlap."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return tick(self.fc(x), 1.0)


def test_paired_rounds_see_through_changing_load(fake_clock, monkeypatch):
    load = {"factor": 1.0, "calls": 0}

    def loaded_tick(x, cost):
        load["calls"] += 1
        if load["calls"] % 2 == 1:  # a new round (two calls a round) under a new load
            load["factor"] = 3.0 if load["factor"] == 1.0 else 1.0
        CLOCK.now += cost * load["factor"]
        return x

    model, x = Jittery().eval(), torch.randn(2, 4)
    monkeypatch.setitem(globals(), "tick", loaded_tick)
    fast = optimizer.optimize(model, x, passes=[set_cost(0.8)], measure=True, time_limit=1000)
    report = optimizer.explain(fast)
    assert report.passes_applied == ["cost_0_8"] and report.speedup == pytest.approx(1.25)


def sleep_first(gm, ctx):
    """A deliberately slow pass: sleeps 20 ms before the model runs."""
    placeholder = next(n for n in gm.graph.nodes if n.op == "placeholder")
    with gm.graph.inserting_after(placeholder):
        gm.graph.call_function(time.sleep, (0.02,))
    gm.recompile()
    ctx.rewrote("", "sleeps 20 ms")
    return PassResult(gm, True)


def test_a_slow_pass_is_never_kept_on_the_real_clock():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    x = torch.randn(2, 8)
    fast = optimizer.optimize(model, x, passes=[sleep_first], measure=True, time_limit=1.0)
    report = optimizer.explain(fast)
    assert report.passes_applied == [] and "not faster" in report.rolled_back[0].detail
    assert type(fast) is nn.Sequential


def test_measure_off_and_without_inputs(fake_clock):
    model, x = Costly().eval(), torch.randn(2, 4)
    fast = optimizer.optimize(model, x, passes=[set_cost(2.0)], measure=False)
    assert optimizer.explain(fast).passes_applied == ["cost_2_0"]  # not timed: kept
    assert not [line for line in optimizer.explain(fast).pass_lines() if "measured" in line]
    report = optimizer.explain(optimizer.optimize(model, passes=[set_cost(0.5)], measure=True))
    assert any("speed not measured: pass example_inputs" in e.detail for e in report.filter("note"))
    report = optimizer.explain(optimizer.optimize(model.train(), x, passes=[set_cost(0.5)], measure=True))
    assert any("not measured in training mode" in e.detail for e in report.filter("note"))


def test_bf16_leaves_multihead_attention_weights_in_float32():
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no native bf16")
    model = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    fast = optimizer.optimize(model, torch.randn(2, 5, 32), dtype="bf16", measure=False)
    # Captured with torch.export, attention is ATen calls on the attention module's own in_proj_weight.
    weights = dict(fast.named_parameters())
    (in_proj,) = [w for name, w in weights.items() if name.endswith("in_proj_weight")]
    assert in_proj.dtype == torch.float32
    linears = [m for m in fast.modules() if isinstance(m, FusedLinear)]
    assert len(linears) == 3 and {m.weight.dtype for m in linears} == {torch.bfloat16}


def test_an_unclear_gain_is_timed_longer_before_it_is_kept(fake_clock, monkeypatch):
    jitter = random.Random(0)

    def jittery_tick(x, cost):
        if cost < 0:  # the candidate: 10% faster on average, give or take 30% from call to call
            cost = 0.9 * (1 + jitter.uniform(-0.3, 0.3))
        CLOCK.now += cost
        return x

    monkeypatch.setitem(globals(), "tick", jittery_tick)
    model, x = Costly().eval(), torch.randn(2, 4)
    fast = optimizer.optimize(model, x, passes=[set_cost(-1.0)], measure=True, time_limit=10_000,
                                time_budget=None)
    report = optimizer.explain(fast)
    (line,) = [line for line in report.pass_lines() if line.startswith("measured")]
    rounds = int(line.split("median of ")[1].split()[0])
    assert measure.CLEAR_ROUNDS < rounds < measure.MAX_ROUNDS  # past the first look, stopped once clear
    assert report.passes_applied == ["cost_-1_0"]


def test_a_spent_time_budget_stops_further_passes_and_says_so():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    x = torch.randn(2, 3, 16, 16)
    fast = optimizer.optimize(model, x, time_budget=0.0)
    report = optimizer.explain(fast)
    assert not report.passes_applied
    (note,) = [e for e in report.filter("note") if e.pass_name == "budget"]
    assert "time budget of 0 s spent" in note.detail and "float32 passes not tried" in note.detail
    assert "capture" in report.seconds
    with torch.no_grad():
        assert torch.allclose(model(x), fast(x))


def test_a_budget_spent_before_mixed_precision_gives_the_model_under_autocast():
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no native bf16")
    # bf16 was asked for: the float32 rewrites alone were never timed against eager autocast, so the model as given
    # under torch.autocast (what the user would otherwise run) comes back, not a float32 model.
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    x = torch.randn(2, 3, 16, 16)
    fast = optimizer.optimize(model, x, dtype="bf16", time_budget=0.0)
    report = optimizer.explain(fast)
    assert isinstance(fast, AutocastForward) and type(fast.module) is nn.Sequential
    notes = " ".join(e.detail for e in report.filter("note"))
    assert "mixed-precision passes not tried" in notes
    assert "the model as given under torch.autocast (the time budget ended before the mixed-precision" in notes
    with torch.no_grad():
        assert fast(x).dtype == torch.bfloat16  # as under eager autocast
        assert torch.allclose(model(x), fast(x).float(), rtol=5e-2, atol=5e-2)


def test_the_report_says_where_the_time_went():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    fast = optimizer.optimize(model, torch.randn(2, 3, 16, 16), measure=True, time_limit=0.5)
    report = optimizer.explain(fast)
    assert {"capture", "float32 passes", "verification", "timing"} <= set(report.seconds)
    assert all(seconds >= 0 for seconds in report.seconds.values())
    assert sum(report.seconds.values()) <= report.transform_seconds
    assert any(line.startswith("time: capture") for line in report.pass_lines())
    assert not [e for e in report.filter("note") if e.pass_name == "budget"]  # the default budget is not spent


def test_bf16_is_kept_only_when_faster_than_eager_autocast(fake_clock):
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no native bf16")
    # The float32 pass halves the cost and autocast changes nothing the fake clock sees: the bf16 result (0.5) is
    # timed against the model as given under torch.autocast (1.0), and kept.
    model, x = Costly().eval(), torch.randn(2, 4)
    fast = optimizer.optimize(model, x, passes=[set_cost(0.5)], dtype="bf16", measure=True, time_limit=1000)
    report = optimizer.explain(fast)
    assert "autocast" in report.passes_applied
    assert "than the model as given under torch.autocast" in report.summary()
    assert report.speedup == pytest.approx(2.0)
    # Without the float32 gain, bf16 costs what eager autocast costs: not kept, and the report says against what.
    fast = optimizer.optimize(model, x, passes=[set_cost(1.0)], dtype="bf16", measure=True, time_limit=1000)
    report = optimizer.explain(fast)
    assert "autocast" not in report.passes_applied
    (line,) = [e.detail for e in report.rolled_back if e.pass_name == "autocast"]
    assert "against the model as given under torch.autocast" in line
    # What comes back is the model as given, under autocast: what the user would have run.
    assert isinstance(fast, AutocastForward) and type(fast.module) is Costly
    assert any("the model as given under torch.autocast" in e.detail for e in report.filter("note"))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        eager = model(x)
    with torch.no_grad():
        assert fast(x).dtype == eager.dtype


def sleep_for(x, seconds):
    time.sleep(seconds)
    return x


fx.wrap("sleep_for")


class Sleepy(nn.Module):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return sleep_for(self.fc(x), self.seconds)


def test_timing_that_cannot_fit_in_the_time_budget_left_is_not_started():
    # Each call takes 0.5 s: the minimum timing (a warm-up call and three rounds of both models) needs 4 s, more
    # than a 4 s budget has left after the reference and verification runs. The rewrite is not kept unmeasured.
    model, x = Sleepy(0.5).eval(), torch.randn(2, 4)
    fast = optimizer.optimize(model, x, passes=[set_cost(0.25, sleep_for)], measure=True, time_budget=4.0)
    report = optimizer.explain(fast)
    assert not report.passes_applied
    (line,) = [e.detail for e in report.entries if e.pass_name == "cost_0_25"]
    assert line.startswith("not timed: timing needs about ") and "time_budget" in line, line
    assert float(line.split("about ")[1].split(" s")[0]) >= 4.0  # 2 models x (1 warm-up + 3 rounds) x 0.5 s
    assert report.seconds.get("timing", 0.0) < 0.5  # no model ran to time it
    with torch.no_grad():
        assert torch.equal(model(x), fast(x))


def test_bf16_that_cannot_be_timed_in_the_budget_left_gives_the_model_under_autocast():
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no native bf16")
    model, x = Sleepy(0.5).eval(), torch.randn(2, 4)
    fast = optimizer.optimize(model, x, dtype="bf16", measure=True, time_budget=4.0)
    report = optimizer.explain(fast)
    assert isinstance(fast, AutocastForward) and type(fast.module) is Sleepy
    notes = " ".join(e.detail for e in report.filter("note"))
    assert "the model as given under torch.autocast (the rewrites could not be timed in the time budget left)" in notes
