"""A file whose analysis runs too long costs one line and its own findings, never the run."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from lint_testing import LOADER_ZERO, write
from torchlint.cli import cli
from torchlint.config import ConfigError, Settings, load_settings
from torchlint.lint import engine, runner as lint_runner
from torchlint.lint.discovery import Discovered
from torchlint.lint.runner import Job
from torchlint.lint.time_limit import TimeLimitExceeded, time_limit

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "setitimer"), reason="needs a real-time timer (POSIX)"
)


def _slow_on(name: str, calls: list[str]):
    real = engine.lint_text

    def lint_text(source, rules):
        calls.append(source.path)
        if source.path.endswith(name):
            time.sleep(30)  # stands in for analysis that grows faster than the file
        return real(source, rules)

    return lint_text


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_file_over_the_limit_is_one_line_and_the_others_are_linted(
    tmp_path: Path, monkeypatch, jobs: int
) -> None:
    monkeypatch.setattr(
        engine, "lint_text", _slow_on("f2.py", [])
    )  # workers are forked: they see it
    items = [
        Discovered(str(write(tmp_path / f"f{i}.py", LOADER_ZERO)), f"f{i}.py", True)
        for i in range(6)
    ]
    job = Job(
        settings=Settings(root=str(tmp_path), file_time_limit=0.5), use_cache=False
    )
    started = time.monotonic()
    results = list(lint_runner.run(items, job, jobs=jobs, cache_root=None))
    assert time.monotonic() - started < 20
    assert (
        results[2].error
        == "analysis took longer than 0.5 s and was stopped (raise file-time-limit to wait longer)"
    )
    assert results[2].findings == []
    assert all(
        r.error is None and [f.code for f in r.findings] == ["TL101"]
        for i, r in enumerate(results)
        if i != 2
    )


def test_a_stopped_file_is_not_cached(runner, project: Path, monkeypatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(engine, "lint_text", _slow_on("slow.py", calls))
    write(project / "pyproject.toml", "[tool.torchlint]\nfile-time-limit = 0.5\n")
    write(project / "slow.py", LOADER_ZERO)
    write(project / "fast.py", LOADER_ZERO)
    for _ in range(2):
        result = runner.invoke(
            cli, ["check", "-j", "1", "--output-format", "concise", "."]
        )
        assert result.exit_code == 1
        assert "slow.py: error: analysis took longer than 0.5 s" in result.output
        assert "fast.py:3:10: TL101" in result.output
    assert sorted(Path(c).name for c in calls) == [
        "fast.py",
        "slow.py",
        "slow.py",
    ]  # fast.py came from the cache


def _sleep_under_a_limit(done: list[bool]) -> None:
    with time_limit(0.01):
        time.sleep(0.05)
    done.append(True)


def test_no_limit_and_other_threads_run_unbounded() -> None:
    with time_limit(0):
        time.sleep(0.05)
    done: list[bool] = []
    worker = threading.Thread(target=_sleep_under_a_limit, args=(done,))
    worker.start()
    worker.join()
    assert done == [True]


def test_the_timer_is_cleared_and_the_previous_handler_restored() -> None:
    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(TimeLimitExceeded):
        with time_limit(0.05):
            while True:
                pass
    with time_limit(0.05):
        pass
    time.sleep(0.1)  # a timer left running would raise here
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.parametrize("value", ["-1", "true", '"10"'])
def test_a_bad_limit_is_a_config_error(tmp_path: Path, value: str) -> None:
    config = write(tmp_path / "torchlint.toml", f"file-time-limit = {value}\n")
    with pytest.raises(
        ConfigError,
        match=r"'file-time-limit' must be a number of seconds \(0 for no limit\)",
    ):
        load_settings(config)


def test_the_limit_is_read_from_the_config(tmp_path: Path) -> None:
    assert (
        load_settings(
            write(tmp_path / "torchlint.toml", "file-time-limit = 0\n")
        ).file_time_limit
        == 0
    )
    assert (
        load_settings(
            write(tmp_path / "torchlint.toml", "file-time-limit = 2.5\n")
        ).file_time_limit
        == 2.5
    )
    assert (
        load_settings(
            write(tmp_path / "torchlint.toml", "select = ['TL1']\n")
        ).file_time_limit
        == 60
    )
