"""Which worker lints which files: contiguous stretches of about equal size, taken chunk by chunk, the tail of the
busiest stretch going to a worker that ran out; and a pool gives the findings one process gives on a project
whose files import each other."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_shared_trees import DATA, TRAIN  # its project, one folder per package here

from torchlint.config import Settings
from torchlint.lint import runner, shards
from torchlint.lint.discovery import Discovered


def _files(tmp_path: Path, sizes: list[int]) -> list[str]:
    paths = []
    for i, size in enumerate(sizes):
        path = tmp_path / f"f{i:02}.py"
        path.write_text("x" * size)
        paths.append(str(path))
    return paths


def _all_taken(work: shards.Shards, shard: int) -> list[list[int]]:
    taken = []
    while (chunk := work.take(shard)) is not None:
        taken.append(chunk)
    return taken


def test_stretches_are_contiguous_and_of_equal_size(tmp_path: Path) -> None:
    work = shards.split(_files(tmp_path, [100] * 10), 2)
    assert [work.take(0), work.take(0), work.take(1), work.take(1)] == [[0, 1, 2, 3], [4], [5, 6, 7, 8], [9]]
    assert work.take(0) is None and work.take(1) is None


def test_a_large_file_fills_a_stretch_of_its_own(tmp_path: Path) -> None:
    work = shards.split(_files(tmp_path, [1000, 100, 100, 100, 100, 100]), 2)
    assert work.take(0) == [0] and work.take(1) == [1, 2, 3, 4]
    assert work.take(0) == [5]  # taken from the end of the other stretch
    assert work.take(1) is None


def test_every_file_is_taken_once_in_order_within_a_stretch(tmp_path: Path) -> None:
    sizes = [50, 300, 20, 20, 700, 10, 90, 400, 60, 5, 5, 5, 800]
    for workers in (1, 2, 3, 5):
        work = shards.split(_files(tmp_path, sizes), workers)
        taken = [i for shard in range(workers) for chunk in _all_taken(work, shard) for i in chunk]
        assert sorted(taken) == list(range(len(sizes)))


def test_a_worker_that_ran_out_takes_the_end_of_the_busiest_stretch(tmp_path: Path) -> None:
    work = shards.split(_files(tmp_path, [100] * 16), 2)  # 0-7 and 8-15, chunks of CHUNK_FILES
    assert work.take(0) == [0, 1, 2, 3] and work.take(0) == [4, 5, 6, 7]
    assert work.take(1) == [8, 9, 10, 11]
    assert work.take(0) == [12, 13, 14, 15]  # shard 0 is done: the last chunk of shard 1
    assert work.take(1) is None and work.take(0) is None


def test_one_file_per_task_after_a_worker_died() -> None:
    work = shards.one_per_task([3, 4, 7, 9, 10], 2)
    assert len(work) == 2
    assert [work.take(0), work.take(1), work.take(0)] == [[3], [4], [7]]
    assert sorted(work.drain()) == [9, 10] and work.take(0) is None


@pytest.mark.parametrize("jobs", [2, 3])
def test_a_pool_gives_the_findings_of_one_process_on_files_importing_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    # data.py's TL102 rests on its importers' loops, each train*.py's TL207 on data.py's helper
    monkeypatch.chdir(tmp_path)
    names = []
    for package in ("first", "second"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "data.py").write_text(textwrap.dedent(DATA).lstrip())
        names.append(f"{package}/data.py")
        train = textwrap.dedent(TRAIN).lstrip().replace("from data import", f"from {package}.data import")
        for i in range(4):
            (tmp_path / package / f"train{i}.py").write_text(train)
            names.append(f"{package}/train{i}.py")
    items = [Discovered(name, name, True) for name in names]
    job = runner.Job(settings=Settings(select=["TL101", "TL102", "TL207"]), use_cache=False)

    def found(jobs: int) -> list[tuple[str, int, int, str]]:
        results = list(runner.run(items, job, jobs=jobs, cache_root=None))
        assert [r.path for r in results] == names and all(r.error is None and not r.notes for r in results)
        return [(r.path, f.line, f.column, f.code) for r in results for f in r.findings]

    serial = found(1)
    for package in ("first", "second"):
        assert (f"{package}/data.py", 14, 12, "TL102") in serial
        assert all((f"{package}/train{i}.py", 12, 15, "TL207") in serial for i in range(4))
    assert found(jobs) == serial
