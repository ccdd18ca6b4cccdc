"""`with torchlint.trace() as t:` around code in this file: what counts as a host read, a step, a move."""

from __future__ import annotations

import inspect
import os

import torch
from torch.utils.data import DataLoader, TensorDataset

import torchlint

HERE = os.path.dirname(os.path.abspath(__file__))


def _loader(n: int = 32) -> DataLoader:
    return DataLoader(TensorDataset(torch.randn(n, 4), torch.randn(n, 1)), batch_size=4)


def _runtime(report, kind=None):
    return [t.runtime for t in report.findings if t.runtime is not None and (kind is None or t.runtime.extra.get("kind") == kind)]


def _line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _train(log_every: int, model, loader, device) -> list:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = []
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        host = x.sum()  # a batch never moved to the device: reading it costs no sync
        seen.append(host.item())
        if step % log_every == 0:
            seen.append(loss.item())
        if loss > 1e6:
            break
        seen.append(bool(loss < 1e6))
    return seen


def test_api_reports_reads_of_device_values_only_and_classifies_them() -> None:
    model = torch.nn.Linear(4, 1)
    with torchlint.trace(roots=[HERE]) as t:
        _train(1, model, _loader(), torch.device("cpu"))
    report = t.report
    assert report.steps["steps"] == 8
    sites = {(r.site[1], r.extra["kind"]): r.count for r in _runtime(report)}
    assert sites == {
        (_line_of(_train, "seen.append(loss.item())"), "item"): 8,
        (_line_of(_train, "if loss > 1e6"), "condition"): 8,
        (_line_of(_train, "bool(loss < 1e6)"), "bool"): 8,
    }
    codes = {t.runtime.extra["kind"]: t.finding.code for t in report.findings if t.runtime}
    assert codes == {"item": "TL201", "condition": "TL204", "bool": "TL202"}
    assert str(report).count("[miss]") + str(report).count("[confirmed]") == 3


def test_reads_every_n_steps_are_not_per_step_findings() -> None:
    with torchlint.trace(roots=[HERE], lint=False) as t:
        _train(4, torch.nn.Linear(4, 1), _loader(), torch.device("cpu"))
    kinds = sorted(r.extra["kind"] for r in _runtime(t.report))
    assert kinds == ["bool", "condition"]  # the `.item()` every 4th step is left out


def test_steps_limit_stops_inside_the_with_block() -> None:
    after = []
    with torchlint.trace(steps=2, roots=[HERE], lint=False) as t:
        _train(1, torch.nn.Linear(4, 1), _loader(), torch.device("cpu"))
        after.append("not reached")
    assert after == [] and t.report.stopped and t.report.steps["steps"] == 2


def test_trace_leaves_torch_as_it_found_it() -> None:
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    before = (DataLoader.__init__, DataLoader.__iter__, _BaseDataLoaderIter.__next__)
    with torchlint.trace(roots=[HERE], lint=False):
        assert DataLoader.__iter__ is not before[1]
        assert len(_get_current_function_mode_stack()) == 1
    assert (DataLoader.__init__, DataLoader.__iter__, _BaseDataLoaderIter.__next__) == before
    assert _get_current_function_mode_stack() == []
    assert not torch.nn.modules.module._global_forward_hooks


def test_traced_training_gives_the_same_numbers() -> None:
    def run(traced: bool) -> list:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        loader = _loader()
        if not traced:
            return _train(1, model, loader, torch.device("cpu")) + model.weight.tolist()[0]
        with torchlint.trace(roots=[HERE], lint=False):
            result = _train(1, model, loader, torch.device("cpu"))
        return result + model.weight.tolist()[0]

    assert run(True) == run(False)


def test_provenance_moves_and_host_copies() -> None:
    from torchlint.trace.provenance import BATCH, DEVICE, SAMPLE

    with torchlint.trace(roots=[HERE], lint=False) as t:
        flags = t.provenance.flags
        host = torch.randn(8, 3)
        moved = host.to("cpu")  # on a machine without a GPU, `.to(device)` stands for the move
        derived = moved * 2
        back = derived.cpu()
        model = torch.nn.Linear(3, 2)
        out = model(torch.randn(8, 3))
        batch = next(iter(_loader()))[0]
        seen = (flags(host), flags(moved), flags(derived), flags(back), flags(model.weight), flags(out), flags(batch))
        for i in range(2):
            sample = batch[i]
        seen += (flags(sample),)
    assert seen == (0, DEVICE, DEVICE, 0, DEVICE, DEVICE | BATCH, BATCH, BATCH | SAMPLE)
    cpu_copy = [r for r in _runtime(t.report) if r.extra.get("kind") == "cpu"]
    assert cpu_copy == []  # one copy outside any step is not a per-step finding


def _loop_then_more(loader) -> int:
    total = 0
    for (x, y) in loader:
        total += x.sum()
    after = total * 2
    return after


def test_lines_are_watched_on_first_steps_and_after_the_loop_again() -> None:
    from torchlint.trace.steps import WATCHED_STEPS

    with torchlint.trace(roots=[HERE], lint=False) as t:
        _loop_then_more(_loader())
    lines = t.lines_run.lines[os.path.realpath(__file__)]
    assert _line_of(_loop_then_more, "total += x.sum()") in lines  # seen on the first steps
    assert _line_of(_loop_then_more, "after = total * 2") in lines  # watched again once the pass ended
    assert len(t.clock.steps) > WATCHED_STEPS


def test_compiled_model_runs_under_the_trace_with_the_same_results() -> None:
    import warnings

    def run(traced: bool):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        fast = torch.compile(model, backend="eager", fullgraph=True)  # dynamo only: it traces the hooks and the mode
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []

        def train() -> None:
            for x, y in _loader(16):
                loss = torch.nn.functional.mse_loss(fast(x.to("cpu")), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())

        if not traced:
            train()
            return losses, None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # the program shows every warning; the trace's own are not shown
            with torchlint.trace(roots=[HERE], lint=False) as t:
                train()
        assert not [w for w in caught if "global hooks" in str(w.message)]
        return losses, t.report

    torch._dynamo.reset()
    plain, _ = run(False)
    torch._dynamo.reset()
    traced, report = run(True)
    assert traced == plain
    assert [(r.extra["kind"], r.count) for r in _runtime(report)] == [("item", 4)]
