"""Files too deep, too long or not regular cost one line each, never the run (or the machine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from lint_testing import LOADER_ZERO, ROOT, write
from torchlint.cli import cli
from torchlint.config import Settings
from torchlint.lint import limits, runner
from torchlint.lint.discovery import Discovered
from torchlint.lint.runner import Job


def _torchlint(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "torchlint", *args, *(["--output-format", "concise"] if args[:1] == ("check",) else [])],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, **kwargs
    )


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_deep_nesting_is_one_line_not_a_crash(tmp_path: Path, jobs: str) -> None:
    # 3,000 nested brackets overflow libcst's native parser's stack (the process dies with SIGSEGV).
    write(tmp_path / "deep.py", "x = " + "[" * 3000 + "]" * 3000 + "\n")
    for i in range(4):
        write(tmp_path / f"ok{i}.py", LOADER_ZERO)
    done = _torchlint("check", "--no-cache", "-j", jobs, ".", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "deep.py: error: nesting too deep to lint (more than 200 nested brackets at line 1" in done.stderr
    assert done.stdout.count("TL101") == 4


def test_deep_nesting_under_fix_reports_the_files_fixed(tmp_path: Path) -> None:
    write(tmp_path / "deep.py", "import torch\nx = " + "(" * 3000 + ")" * 3000 + "\n")
    write(tmp_path / "a.py", "import torch\nx = torch.tensor([1]).cuda()\n")
    done = _torchlint("check", "--no-cache", "-j", "1", "--fix", "--select", "ALL", ".", cwd=tmp_path)
    assert "deep.py: error: nesting too deep" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "text, reason",
    [
        ("x = " + " + ".join(["a"] * 1500) + "\n", "expression too long to lint (more than 1,000 chained operators"),
        ("x = a" + ".b" * 1500 + "\n", "expression too long to lint"),
        ("x = (" + " ".join(['"s"'] * 1500) + ")\n", "expression too long to lint"),
        ("x = 1\n" * 15_000, "file too long to lint (15,001 lines; the limit is 15,000)"),
        ("".join(" " * i + "if x:\n" for i in range(120)) + " " * 120 + "pass\n", "nesting too deep to lint (more than 100 nested blocks"),
        ("x = " + "{" * 201 + "}" * 201 + "\n", "nesting too deep to lint (more than 200 nested brackets"),
        ("for b in loader:\n" + "    y = b.item()\n" * 2501, "block too long to lint (more than 2,500 statements in one block"),
    ],
    ids=["chain", "attributes", "strings", "lines", "blocks", "brackets", "loop-body"],
)
def test_each_limit_is_named(runner, project: Path, text: str, reason: str) -> None:
    write(project / "big.py", "import torch\n" + text)
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache", "-j", "1", "--select", "ALL"])
    assert result.exit_code == 1
    assert f"big.py: error: {reason}" in result.output


def test_flat_lists_and_ordinary_code_pass_the_limits() -> None:
    assert limits.check_shape("x = [" + ", ".join(["-1.5"] * 50_000) + "]\n") is None
    assert limits.check_shape("x = " + "(" * 200 + ")" * 200 + "\n") is None
    assert limits.check_shape("for b in loader:\n" + "    y = b.item()\n" * 2500 + "x = 1\n" * 5000) is None
    assert limits.check_shape(Path(limits.__file__).read_text()) is None


def test_size_limit(runner, project: Path) -> None:
    write(project / "huge.py", "x = 1\n" * 200_000)  # 1.2 MB
    result = runner.invoke(cli, ["check", "--output-format", "concise", "--no-cache"])
    assert "huge.py: error: file too large to lint (1.2 MB; the limit is 1.0 MB)" in result.output


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_like_source_is_skipped_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    write(tmp_path / "ok.py", LOADER_ZERO)
    done = _torchlint("check", "--no-cache", ".", cwd=tmp_path)
    assert "pipe.py" not in done.stderr + done.stdout  # found in a directory: not a source file
    assert "ok.py:3:10: TL101" in done.stdout
    named = _torchlint("check", "--no-cache", "pipe.py", "ok.py", cwd=tmp_path)
    assert "pipe.py: error: not a regular file" in named.stderr


def _crash_on(name: str):
    real = runner.process_file

    def process_file(item, job, cache):
        if item.display == name:
            os._exit(139)  # what a segfault in the native parser looks like to the pool
        return real(item, job, cache)

    return process_file


def test_a_dying_worker_costs_only_its_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "process_file", _crash_on("f3.py"))  # workers are forked: they see it
    items = []
    for i in range(12):
        path = write(tmp_path / f"f{i}.py", LOADER_ZERO)
        items.append(Discovered(str(path), f"f{i}.py", True))
    results = list(runner.run(items, Job(settings=Settings(root=str(tmp_path)), use_cache=False), jobs=2, cache_root=None))
    assert [r.path for r in results] == [f"f{i}.py" for i in range(12)]
    crashed = results[3]
    assert crashed.error == "the linter crashed on this file (its worker process died)"
    assert all(len(r.findings) == 1 and r.error is None for i, r in enumerate(results) if i != 3)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _busy_tree(tmp_path: Path) -> None:
    body = "import torch\nfor b in loader:\n" + "    y = b.item() + 1\n" * 2400
    for i in range(24):
        write(tmp_path / f"slow{i}.py", body)


def _start(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchlint", "check", "--output-format", "concise", "--no-cache", "-j", "2", "."],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    for _ in range(600):  # until the pool's workers exist
        workers = _children(proc.pid)
        if len(workers) >= 2:
            return proc, workers
        time.sleep(0.05)
    proc.kill()
    pytest.fail("no worker processes started")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_exit_when_the_main_process_is_killed(tmp_path: Path) -> None:
    _busy_tree(tmp_path)
    proc, workers = _start(tmp_path)
    proc.kill()
    proc.wait()
    for _ in range(600):
        if not any(_alive(w) for w in workers):
            break
        time.sleep(0.05)
    survivors = [w for w in workers if _alive(w)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors == []
    proc.stdout.close()
    proc.stderr.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_exits_130(tmp_path: Path) -> None:
    _busy_tree(tmp_path)
    proc, _ = _start(tmp_path)
    time.sleep(0.5)  # let the pool start its work
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err


# Python source built at random from the constructs the bounds read: brackets, chains of operators, strings
# (also across lines, holding brackets), comments, continuations and nested blocks.
_EXPRESSIONS = st.recursive(
    st.sampled_from(["x", "z.w", "'s'", '"s"', "'\\''", "\"\"\"(\n]\"\"\"", "'s' 's'", "'a' 'b' 'c' 'd' 'e' 'f' 'g'"]),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([" + ", ".y + ", " and ", " ** ", " if x else "]), inner).map("".join),
        inner.map(lambda e: f"({e})"),
        inner.map(lambda e: f"[{e}, x]"),
        inner.map(lambda e: f"{{{e}: x}}"),
        st.tuples(inner, inner).map(lambda es: f"f({es[0]},  # (\n    {es[1]})"),
        st.tuples(inner, inner).map(lambda es: f"{es[0]} + \\\n {es[1]}"),
        st.tuples(inner, inner).map(lambda es: f"({es[0]}\n + {es[1]})"),
        inner.map(lambda e: f"{e}()()"),  # each call is a link, whatever its brackets hold
    ),
    max_leaves=10,
)
_STATEMENTS = st.recursive(
    st.one_of(_EXPRESSIONS.map(lambda e: [f"v = {e}"]), st.just(["# (c"]), st.just(["x; x"])),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4).map(lambda parts: [line for part in parts for line in part]),
        st.tuples(st.sampled_from(["if x:", "for x in y:"]), inner).map(
            lambda compound: [compound[0], *(("  " + line) for line in [*compound[1], "x"])]
        ),
    ),
    max_leaves=10,
)


@given(_STATEMENTS.map(lambda lines: "\n".join(lines) + "\n"))
@example("v = ((((x))))\n")  # each measure just past its limit, where a careless bound would fall short
@example("x()()()()()()\n")
@example("x()()() \\\n ()()()\n")
@example("v = (x()()\n + x()()())\n")
@example("if x:\n if x:\n  if x:\n   x\n")
@example("if x:\n x\n x\n x\n x\n")
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_file_the_quick_scan_passes_is_within_every_limit(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `'s'()` is valid syntax that warns
        compile(text, "<generated>", "exec")  # the strategy writes valid Python
    # Small limits, so that generated files reach them: the scan's bounds must never be below the exact measures.
    for name, value in (("MAX_NESTING", 3), ("MAX_INDENT", 2), ("MAX_BLOCK", 3), ("MAX_CHAIN", 5)):
        monkeypatch.setattr(limits, name, value)
    if limits.surely_within_limits(text):
        assert limits._tokenized_shape(text) is None


def test_the_quick_scan_passes_real_code_without_tokenizing() -> None:
    sources = sorted((ROOT / "torchlint").rglob("*.py"))
    assert len(sources) > 50
    refused = [path.name for path in sources if not limits.surely_within_limits(path.read_text(encoding="utf-8"))]
    assert refused == []
