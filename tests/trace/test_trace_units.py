"""The step clock and the thresholds that turn counts into findings, on made-up events (no program run)."""

from __future__ import annotations

import pytest

from torchlint.trace.events import Events, LoaderRecord
from torchlint.trace.findings import every_step, runtime_findings
from torchlint.trace.steps import Step, StepClock, StopTracing


def test_boundaries_without_work_count_once_and_the_limit_stops() -> None:
    clock = StepClock(limit=2)
    clock.batch_fetched()  # starts the clock
    clock.busy = True
    clock.optimizer_stepped()  # a batch was fetched this step: the step ends at the next fetch, not here
    assert clock.steps == []
    clock.batch_fetched()
    assert len(clock.steps) == 1
    clock.batch_fetched()  # no work since: the same step goes on
    assert len(clock.steps) == 1
    clock.busy = True
    with pytest.raises(StopTracing):
        clock.batch_fetched()
    assert clock.stopped and len(clock.steps) == 2


def test_optimizer_steps_are_the_steps_when_no_batch_is_fetched() -> None:
    clock = StepClock()
    clock.start()
    for _ in range(3):
        clock.busy = True
        clock.optimizer_stepped()
    assert len(clock.steps) == 3


def test_every_step_means_more_than_half_of_the_steps() -> None:
    assert every_step(6, 10) and not every_step(5, 10) and every_step(1, 1) and not every_step(0, 0)


def _loader(num_workers: int, wait_per_batch: float, batches: int = 10, **settings) -> LoaderRecord:
    record = LoaderRecord(("/x/train.py", 3), (("/x/train.py", 3),), num_workers, settings.get("pin", False),
                          settings.get("persistent", False), 8, "Data", passes=settings.get("passes", 1))
    record.waits = [wait_per_batch] * batches
    record.batches = batches
    record.wait_s = wait_per_batch * batches
    return record


def _codes(loader: LoaderRecord, step_seconds: float = 0.01) -> list[str]:
    events, clock = Events(), StepClock()
    events.loaders.append(loader)
    clock.steps = [Step(seconds=step_seconds) for _ in range(10)]
    return [f.code for f in runtime_findings(events, clock)]


def test_loader_findings_follow_what_the_loader_cost() -> None:
    assert _codes(_loader(0, 0.005)) == ["TL101"]  # half of every 10 ms step spent loading, 5 ms a batch
    assert _codes(_loader(0, 0.001)) == []  # 1 ms a batch: worker processes would cost more than they save
    assert _codes(_loader(0, 0.005), step_seconds=0.1) == []  # 5% of the step: not worth a finding
    assert _codes(_loader(2, 0.005, passes=3)) == ["TL104"]  # workers started three times
    assert _codes(_loader(2, 0.001, passes=3, persistent=True)) == []
    moved = _loader(2, 0.001)
    moved.moved = 10
    assert _codes(moved) == ["TL102"]
    moved.pin_memory = True
    assert _codes(moved) == []
