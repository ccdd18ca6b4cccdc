"""Each kind of runtime finding, found at the right line with the right count, on the fixture scripts."""

from __future__ import annotations

from trace_helpers import at, trace_fixture


def _only(found: list):
    assert len(found) == 1, found
    return found[0]


def test_host_reads_found_per_line_and_step_and_merged_with_the_rules() -> None:
    report, code = trace_fixture("train_syncs.py")
    assert code == 0
    assert report.steps["steps"] == 12 and not report.stopped  # 96 samples in batches of 8
    item = _only(at(report, 27, "TL201"))
    assert item.status == "confirmed"
    assert (item.runtime.count, item.runtime.per_step, item.runtime.steps_seen) == (12, 1.0, 12)
    assert item.finding.message.startswith("`.item()` waits for the GPU")  # the rule's own message
    helper = _only(at(report, 28, "TL207"))  # the read happens in `accuracy`, line 16, called from line 28
    assert helper.status == "confirmed" and helper.runtime.site[1] == 16
    assert helper.runtime.count == 12
    assert not at(report, 16)  # one finding per sync: the read in the helper is not reported again
    condition = _only(at(report, 29, "TL204"))
    assert condition.status == "confirmed" and condition.runtime.extra["kind"] == "condition"
    tolist = _only(at(report, 32, "TL201"))
    assert tolist.status == "confirmed" and tolist.runtime.extra["kind"] == "tolist"
    # TL206 is off by default: the boolean mask at line 31 is a sync no enabled rule reported.
    mask = _only(at(report, 31))
    assert (mask.finding.code, mask.status, mask.runtime.count) == ("TL206", "miss", 12)
    # The last lines read parameters once, after the loop: not per step, not reported.
    assert not at(report, 36) and not at(report, 37)
    assert report.steps["host_reads_per_step"] == 5
    # and the static TL102 on the in-memory loader whose batches feed the training step
    assert [t.finding.code for t in at(report, 9)] == ["TL102"]
    assert len(report.findings) == 6


def test_steps_limit_stops_the_program_cleanly_after_n_steps() -> None:
    report, code = trace_fixture("train_syncs.py", steps=3)
    assert code == 0 and report.stopped and report.steps["steps"] == 3
    assert _only(at(report, 27, "TL201")).runtime.count == 3


def test_forward_without_backward_and_per_sample_loop() -> None:
    report, code = trace_fixture("evaluate.py")
    assert code == 0
    forward = _only(at(report, 12, "TL301"))  # the rule reports the function; the forward runs at line 17
    assert forward.status == "confirmed"
    assert forward.runtime.site[1] == 17 and forward.runtime.count == 8  # 64 samples in batches of 8
    loop = _only(at(report, 27, "TL401"))
    assert loop.status == "confirmed" and loop.runtime.site[1] == 27
    # Each of the 8 samples of a batch goes through two Linear layers: 16 launches per step from line 28.
    assert loop.runtime.extra == {"op": "linear", "line": 28}
    assert loop.runtime.steps_seen == 8
    assert "16 times per step" in loop.runtime.detail
    assert len(report.findings) == 2


def test_clean_script_reports_nothing() -> None:
    report, code = trace_fixture("clean.py")
    assert code == 0
    assert report.findings == []
    assert report.steps["steps"] == 16 and report.steps["host_reads_per_step"] == 0
    assert [(l.num_workers, l.passes, l.batches) for l in report.loaders] == [(0, 1, 12), (0, 1, 4)]
    assert "Trace: nothing found." in str(report)


def test_dataloader_that_makes_steps_wait() -> None:
    report, _ = trace_fixture("slow_loader.py")
    # 32 ms of sleep per batch against about a millisecond of work: far past the thresholds (which
    # test_loader_findings_follow_what_the_loader_cost checks exactly, on made-up timings).
    loader = _only(at(report, 24, "TL101"))
    assert loader.status == "confirmed"
    assert report.loaders[0].batches == 8 and report.loaders[0].dataset == "Decoded"


def test_workers_started_every_epoch_and_unpinned_copies() -> None:
    report, _ = trace_fixture("workers.py")
    (record,) = report.loaders
    assert (record.num_workers, record.pin_memory, record.persistent_workers, record.passes) == (2, False, False, 2)
    persistent = _only(at(report, 18, "TL104"))
    pinned = _only(at(report, 18, "TL102"))
    assert pinned.status == "confirmed"
    assert persistent.status == "miss"  # seen at run time; TL104 is off by default, so no rule reported it
    assert pinned.runtime.count == 8  # one batch tensor moved per batch, 4 batches per epoch, 2 epochs
    assert len(report.findings) == 2


PARTIAL = (
    "import torch\n"
    "from torch.utils.data import DataLoader, TensorDataset\n"
    "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
    "model = torch.nn.Linear(4, 2).to(device)\n"
    "loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4, pin_memory=torch.cuda.is_available())\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "total = 0.0\n"
    "for (x,) in loader:\n"
    "    loss = model(x.to(device, non_blocking=True)).sum()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    if LOG:\n"
    "        total += loss.item()\n"
)


def test_static_finding_on_a_line_that_never_ran_is_not_reached(tmp_path, monkeypatch) -> None:
    script = tmp_path / "partial.py"
    # a flag the linter cannot decide (`LOG = False` it would know never to be true: no static finding then)
    script.write_text('LOG = bool(__import__("os").environ.get("PARTIAL_LOG"))\n' + PARTIAL)
    monkeypatch.delenv("PARTIAL_LOG", raising=False)
    monkeypatch.chdir(tmp_path)
    report, _ = trace_fixture(str(script))
    assert _only(at(report, 14, "TL201")).status == "not reached"


def test_static_finding_on_a_line_that_ran_without_a_sync_is_not_seen(tmp_path, monkeypatch) -> None:
    # The loss is read on the first of 4 steps only: the line runs, but not on every step.
    script = tmp_path / "partial.py"
    script.write_text("LOG = [True]\n" + PARTIAL.replace("if LOG:", "if LOG and LOG.pop():"))
    monkeypatch.chdir(tmp_path)
    report, _ = trace_fixture(str(script))
    assert [(t.finding.code, t.status) for t in report.findings] == [("TL201", "not seen")]
    assert report.steps["steps"] == 4


def test_convnet_training_reports_nothing() -> None:
    report, code = trace_fixture("convnet.py", steps=3)
    assert code == 0 and report.stopped and report.steps["steps"] == 3
    assert report.findings == []
