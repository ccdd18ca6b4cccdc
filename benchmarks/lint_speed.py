#!/usr/bin/env python3
"""How fast torchlint lints real trees, next to TorchFix, Fixit and a bare libcst parse.

    python benchmarks/lint_speed.py            # full run: writes benchmarks/results/lint-speed.md
    python benchmarks/lint_speed.py --quick    # timm only, 1 repetition, no Fixit (for development)

Trees (copied, .py/.pyi only, into a scratch directory so that every tool sees the same files and no
.gitignore of an enclosing checkout hides any of them):

* ``timm``: the sources of the timm wheel from the package registry (``pip download --no-deps``);
* ``torch``: the sources of the installed torch package (about 1.2M lines);
* any ``--tree PATH`` given on the command line.

Tools, run interleaved (repetition 1 of every tool, then repetition 2 of every tool, ...) so that a change
in machine load hits all of them alike:

* torchlint cold (``--no-cache``) with ``-j1`` and ``-jN`` (N = all cores), and warm (the result cache
  filled by an untimed run first);
* a bare parse: one process running ``libcst.parse_module`` over every file;
* TorchFix (pinned) and Fixit (latest 2.x), each in its own virtual environment created by this script
  under ``--work-dir``; by default they run on timm only (TorchFix needs about 25 minutes for torch's
  1.2M lines on two cores).

Each run is one fresh subprocess; its wall time comes from the clock and its peak memory from
``wait4()``'s ``ru_maxrss``, which on Linux is the largest resident set of the process and of every
descendant it waited for: for a process pool that is the peak of one process, not the sum.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable, Optional, Sequence

HERE = Path(__file__).resolve().parent
DEFAULT_OUTPUT = HERE / "results" / "lint-speed.md"
DEFAULT_WORK_DIR = Path.home() / ".cache" / "torchlint-bench"
TIMM_VERSION = "1.0.31"
TORCHFIX_VERSION = "0.7.0"
FIXIT_SPEC = "fixit>=2,<3"
EXTENSIONS = (".py", ".pyi")
LARGE_TREE = 500_000  # lines; trees this big get --large-reps repetitions (torch: about 1.2M lines)
# Directories torchlint skips by default; the copies leave them out so that every tool reads the same files.
SKIPPED_DIRS = {
    ".bzr", ".direnv", ".eggs", ".git", ".hg", ".ipynb_checkpoints", ".mypy_cache", ".nox", ".pytest_cache",
    ".ruff_cache", ".svn", ".torchlint_cache", ".tox", ".venv", "__pycache__", "__pypackages__", "_build",
    "build", "dist", "node_modules", "venv",
}  # fmt: skip

BARE_PARSE = r"""
import sys, libcst
parsed = failed = 0
for path in open(sys.argv[1], encoding="utf-8").read().splitlines():
    try:
        with open(path, "rb") as handle:
            libcst.parse_module(handle.read())
        parsed += 1
    except Exception:
        failed += 1
print(f"parsed {parsed} failed {failed}")
"""


# ---------------------------------------------------------------------------------------------------------
# Data


ROOT = Path(__file__).resolve().parent.parent  # this checkout


@dataclasses.dataclass
class Tree:
    name: str
    path: Path  # the directory handed to every tool
    origin: str  # where the files came from
    files: int = 0
    lines: int = 0
    file_list: Optional[Path] = None


@dataclasses.dataclass
class Run:
    seconds: float
    peak_kb: int
    returncode: int
    stdout: str
    stderr: str


@dataclasses.dataclass
class Entry:
    """One tool configuration on one tree."""

    tree: Tree
    tool: str  # short name for the table
    jobs: str  # "1", "2", "all"...
    argv: list[str]
    cwd: Path
    reps: int
    count: Callable[[Run], tuple[Optional[int], dict[str, int]]]  # (findings, per-code counts)
    group: str  # "torchlint", "torchfix", "fixit", "parse"
    ok_codes: tuple[int, ...] = (0,)
    prepare: Optional[Callable[[], None]] = None  # untimed, once before the first repetition
    env: Optional[dict] = None  # extra environment (the baseline's PYTHONPATH)
    runs: list[Run] = dataclasses.field(default_factory=list)
    problem: Optional[str] = None  # why there are no (or no trustworthy) figures

    def median(self) -> Optional[float]:
        return statistics.median(r.seconds for r in self.runs) if self.runs else None

    def peak_mb(self) -> Optional[float]:
        return max(r.peak_kb for r in self.runs) / 1024 if self.runs else None


# ---------------------------------------------------------------------------------------------------------
# Output parsers


def count_torchlint(run: Run) -> tuple[Optional[int], dict[str, int]]:
    try:
        data = json.loads(run.stdout or "[]")
    except ValueError:
        return None, {}
    codes = collections.Counter(item.get("code", "?") for item in data)
    return len(data), dict(codes)


_TORCHFIX_LINE = re.compile(r"^\S.*?:\d+:\d+: (TOR\d+) ", re.M)


def count_torchfix(run: Run) -> tuple[Optional[int], dict[str, int]]:
    codes = collections.Counter(_TORCHFIX_LINE.findall(run.stdout))
    return sum(codes.values()), dict(codes)


_FIXIT_LINE = re.compile(r"^\S+@\d+:\d+ (\w+)(?: \(has autofix\))?: ", re.M)


def count_fixit(run: Run) -> tuple[Optional[int], dict[str, int]]:
    codes = collections.Counter(_FIXIT_LINE.findall(run.stdout))
    return sum(codes.values()), dict(codes)


_PARSED = re.compile(r"parsed (\d+) failed (\d+)")


def count_parse(run: Run) -> tuple[Optional[int], dict[str, int]]:
    match = _PARSED.search(run.stdout)
    if not match:
        return None, {}
    return None, {"parsed": int(match.group(1)), "failed": int(match.group(2))}


# ---------------------------------------------------------------------------------------------------------
# Running one command


def measure(argv: Sequence[str], cwd: Path, timeout: float, env: Optional[dict] = None) -> Run:
    """Run argv in a fresh process; wall time, and ru_maxrss (KiB) of the process and its waited-for children."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(argv), cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                status = -9
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - start
        proc.returncode = 0  # reaped above; keep Popen from waiting again
        code = status if status == -9 else (os.waitstatus_to_exitcode(status))
        out.seek(0)
        err.seek(0)
        return Run(
            seconds, usage.ru_maxrss, code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
        )


def quiet_call(argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, **kwargs)


# ---------------------------------------------------------------------------------------------------------
# Trees


def copy_sources(source: Path, target: Path) -> None:
    """Copy the .py/.pyi files of `source` to `target` (skipping torchlint's default-excluded directories)."""
    if target.exists():
        shutil.rmtree(target)
    for root, dirs, files in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        wanted = [f for f in files if f.endswith(EXTENSIONS)]
        if not wanted:
            continue
        destination = target / os.path.relpath(root, source)
        destination.mkdir(parents=True, exist_ok=True)
        for name in wanted:
            shutil.copyfile(os.path.join(root, name), destination / name)


def count_tree(tree: Tree, work: Path) -> None:
    paths = sorted(str(p) for p in tree.path.rglob("*") if p.suffix in EXTENSIONS and p.is_file())
    lines = 0
    for path in paths:
        with open(path, "rb") as handle:
            lines += handle.read().count(b"\n")
    tree.files, tree.lines = len(paths), lines
    tree.file_list = work / f"files-{tree.name}.txt"
    tree.file_list.write_text("\n".join(paths) + "\n", encoding="utf-8")


def prepare_timm(work: Path, version: str) -> Tree:
    target = work / "trees" / f"timm-{version}"
    if not (target / "timm").is_dir():
        download = work / "downloads"
        download.mkdir(parents=True, exist_ok=True)
        wheels = list(download.glob(f"timm-{version}-*.whl"))
        if not wheels:
            proc = quiet_call(
                [sys.executable, "-m", "pip", "download", "--no-deps", f"timm=={version}", "-d", str(download)]
            )
            wheels = list(download.glob(f"timm-{version}-*.whl"))
            if not wheels:
                raise RuntimeError(f"pip download timm=={version} failed: {proc.stderr.strip()[-500:]}")
        unpacked = work / "trees" / f"timm-{version}-wheel"
        if unpacked.exists():
            shutil.rmtree(unpacked)
        with zipfile.ZipFile(wheels[0]) as archive:
            archive.extractall(unpacked)
        copy_sources(unpacked / "timm", target / "timm")
        shutil.rmtree(unpacked)
    return Tree("timm", target, f"timm {version} wheel from the package registry (`pip download --no-deps timm=={version}`)")


def prepare_torch(work: Path) -> Tree:
    proc = quiet_call([sys.executable, "-c", "import torch, os; print(os.path.dirname(torch.__file__), torch.__version__)"])
    if proc.returncode != 0:
        raise RuntimeError(f"cannot import torch: {proc.stderr.strip()[-300:]}")
    location, version = proc.stdout.split()
    target = work / "trees" / f"torch-{version}"
    marker = target / ".copied-from"
    if not marker.exists() or marker.read_text() != location:
        copy_sources(Path(location), target / "torch")
        marker.write_text(location)
    return Tree("torch", target, f"installed torch {version} package sources ({location})")


def prepare_extra(work: Path, path: str, index: int) -> Tree:
    source = Path(path).resolve()
    name = f"{source.name or 'tree'}"
    target = work / "trees" / f"extra-{index}-{name}"
    copy_sources(source, target / name)
    return Tree(name, target, str(source))


# ---------------------------------------------------------------------------------------------------------
# Peers


def make_venv(work: Path, name: str, requirement: str, executable: str) -> tuple[Optional[Path], str]:
    """A throwaway virtual environment with `requirement`; returns (path to `executable`, installed version)."""
    venv = work / "venvs" / name
    tool = venv / "bin" / executable
    if not tool.exists():
        if venv.exists():
            shutil.rmtree(venv)
        proc = quiet_call([sys.executable, "-m", "venv", str(venv)])
        if proc.returncode != 0:
            return None, f"venv creation failed: {proc.stderr.strip()[-300:]}"
        proc = quiet_call([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", requirement])
        if proc.returncode != 0 or not tool.exists():
            return None, f"`pip install {requirement}` failed: {(proc.stderr or proc.stdout).strip()[-300:]}"
    proc = quiet_call(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"]
    )
    versions = {p["name"].lower(): p["version"] for p in json.loads(proc.stdout or "[]")}
    package = re.split(r"[<>=!~ ]", requirement)[0].lower()
    return tool, f"{package} {versions.get(package, '?')} (libcst {versions.get('libcst', '?')})"


# ---------------------------------------------------------------------------------------------------------
# Plan


def baseline_tree(work: Path, rev: str) -> Path:
    """torchlint's own sources at `rev` (a commit of this checkout), extracted once under the work folder."""
    target = work / f"torchlint-{rev}"
    if not (target / "torchlint").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", rev, "torchlint"], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def build_plan(args: argparse.Namespace, trees: list[Tree], work: Path, peers: dict) -> list[Entry]:
    cores = args.jobs
    torchlint = [sys.executable, "-m", "torchlint", "check"]
    entries: list[Entry] = []
    for tree in trees:
        reps = min(args.reps, args.large_reps) if tree.lines > LARGE_TREE else args.reps
        cwd = work / "runs" / tree.name  # torchlint's cache lands here (no config file above it)
        cwd.mkdir(parents=True, exist_ok=True)
        common = ["--exit-zero", "-q", "--output-format", "json", str(tree.path)]
        large = tree.lines > LARGE_TREE
        cold_jobs = sorted({1, cores}) if args.large_j1 or not large else [cores]
        for jobs in cold_jobs:
            entries.append(
                Entry(tree, "torchlint cold", str(jobs), torchlint + ["--no-cache", f"-j{jobs}"] + common, cwd,
                      reps, count_torchlint, "torchlint")
            )  # fmt: skip
        if args.baseline_rev:
            baseline = baseline_tree(work, args.baseline_rev)
            for jobs in cold_jobs:
                entries.append(
                    Entry(tree, f"torchlint {args.baseline_rev} cold", str(jobs),
                          torchlint + ["--no-cache", f"-j{jobs}"] + common, cwd, reps, count_torchlint, "baseline",
                          env={"PYTHONPATH": str(baseline)})
                )  # fmt: skip
        def fill(cwd: Path = cwd, argv: list[str] = torchlint + [f"-j{cores}"] + common) -> None:
            shutil.rmtree(cwd / ".torchlint_cache", ignore_errors=True)
            quiet_call(argv, cwd=cwd)  # untimed, with every core: it only fills the cache

        for jobs in sorted({1, cores}):
            entries.append(
                Entry(tree, "torchlint warm", str(jobs), torchlint + [f"-j{jobs}"] + common, cwd, reps,
                      count_torchlint, "torchlint", prepare=fill if jobs == 1 else None)
            )  # fmt: skip
        entries.append(
            Entry(tree, "bare libcst parse", "1", [sys.executable, "-c", BARE_PARSE, str(tree.file_list)], cwd,
                  reps, count_parse, "parse")
        )  # fmt: skip
        if args.skip_peers or tree.name not in args.peer_trees:
            continue
        torchfix, _ = peers.get("torchfix", (None, ""))
        fixit, _ = peers.get("fixit", (None, ""))
        tf_jobs = ([1] if args.torchfix_j1 else []) + ([cores] if args.torchfix_default else [])
        for jobs in sorted(set(tf_jobs)):
            entries.append(
                Entry(tree, "TorchFix (default rules)", str(jobs), [str(torchfix), f"-j{jobs}", str(tree.path)], cwd,
                      args.peer_reps, count_torchfix, "torchfix", ok_codes=(0, 1))
            )  # fmt: skip
        entries.append(
            Entry(tree, "TorchFix --select ALL", str(cores),
                  [str(torchfix), f"-j{cores}", "--select", "ALL", str(tree.path)], cwd, args.peer_reps,
                  count_torchfix, "torchfix", ok_codes=(0, 1))
        )  # fmt: skip
        if not args.skip_fixit:
            entries.append(
                Entry(tree, "Fixit lint", "all", [str(fixit), "lint", str(tree.path)], cwd, args.peer_reps,
                      count_fixit, "fixit", ok_codes=(0, 1, 2, 3, 4, 5, 6, 7))
            )  # fmt: skip
        for entry in entries:
            if entry.group in peers and peers[entry.group][0] is None:
                entry.problem = peers[entry.group][1]
    return entries


def execute(entries: list[Entry], timeout: float, log: Callable[[str], None]) -> None:
    rounds = max((e.reps for e in entries), default=0)
    for rep in range(rounds):
        for entry in entries:
            if rep >= entry.reps or entry.problem:
                continue
            if rep == 0 and entry.prepare is not None:
                entry.prepare()
            run = measure(entry.argv, entry.cwd, timeout, env={**os.environ, **entry.env} if entry.env else None)
            label = f"[{rep + 1}/{entry.reps}] {entry.tree.name}: {entry.tool} -j{entry.jobs}"
            if run.returncode == -9:
                entry.problem = f"killed after the {timeout:.0f} s time limit"
            elif run.returncode not in entry.ok_codes:
                tail = (run.stderr.strip() or run.stdout.strip())[-300:]
                entry.problem = f"exit code {run.returncode}: {tail}"
            entry.runs.append(run)
            log(f"{label}: {run.seconds:.2f} s, peak RSS {run.peak_kb / 1024:.0f} MB, exit {run.returncode}")


# ---------------------------------------------------------------------------------------------------------
# Report


def fmt_seconds(value: Optional[float]) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def fmt_rate(lines: int, seconds: Optional[float]) -> str:
    if not seconds:
        return "–"
    rate = lines / seconds
    return f"{rate / 1e6:.2f}M" if rate >= 1e6 else f"{rate / 1e3:.0f}k" if rate >= 1e3 else f"{rate:.0f}"


def fmt_ratio(reference: Optional[float], seconds: Optional[float]) -> str:
    if reference is None or not seconds:
        return "–"
    ratio = reference / seconds
    return f"{ratio:.0f}×" if ratio >= 100 else f"{ratio:.1f}×" if ratio >= 1 else f"{ratio:.2f}×"


def findings_cell(entry: Entry) -> str:
    if not entry.runs:
        return "–"
    total, codes = entry.count(entry.runs[-1])
    if entry.group == "parse":
        return f"{codes.get('parsed', '?')} parsed, {codes.get('failed', '?')} failed" if codes else "?"
    if total is None:
        return "?"
    if entry.group == "torchlint":
        return f"{total} (TL101: {codes.get('TL101', 0)})"
    if entry.group == "torchfix":
        shown = ", ".join(f"{c}: {n}" for c, n in sorted(codes.items()))
        return f"{total}" + (f" ({shown})" if shown else "")
    return str(total)


def reference(entries: list[Entry], tree: Tree, group: str, jobs: Optional[str] = None) -> Optional[Entry]:
    for entry in entries:
        if entry.tree is tree and entry.group == group and entry.runs and not entry.problem:
            if group != "torchfix" or (entry.tool == "TorchFix (default rules)" and entry.jobs == jobs):
                return entry
    if group == "torchfix":  # without a default-rules run at these jobs, --select ALL (a superset) stands in
        for entry in entries:
            if entry.tree is tree and entry.tool == "TorchFix --select ALL" and entry.jobs == jobs and entry.runs:
                return entry if not entry.problem else None
    return None


def render_table(entries: list[Entry], trees: list[Tree]) -> str:
    head = (
        "| Tree | Tool | Jobs | Wall, median (s) | Runs (s) | Lines/s | Peak RSS per process (MB) "
        "| vs TorchFix, same jobs¹ | vs bare parse | Findings |"
    )
    rows = [head, "|" + "---|" * 10]
    for tree in trees:
        parse = reference(entries, tree, "parse")
        for entry in (e for e in entries if e.tree is tree):
            median = entry.median()
            if entry.problem and not entry.runs:
                rows.append(
                    f"| {tree.name} | {entry.tool} | {entry.jobs} | not run: {entry.problem.replace('|', '/')} "
                    "| | | | | | |"
                )
                continue
            peer = reference(entries, tree, "torchfix", entry.jobs)
            versus_tf = "–" if peer is None or entry.group != "torchlint" else fmt_ratio(peer.median(), median)
            if peer is None and entry.group == "torchlint":
                versus_tf = "peers not run on this tree"
            versus_parse = fmt_ratio(parse.median(), median) if parse and entry is not parse else "–"
            runs = ", ".join(fmt_seconds(r.seconds) for r in entry.runs)
            note = f" ⚠ {entry.problem.replace('|', '/')}" if entry.problem else ""
            rows.append(
                f"| {tree.name} | {entry.tool} | {entry.jobs} | {fmt_seconds(median)}{note} | {runs} "
                f"| {fmt_rate(tree.lines, median)} | {entry.peak_mb():.0f} | {versus_tf} | {versus_parse} "
                f"| {findings_cell(entry)} |"
            )
    return "\n".join(rows)


def goal_lines(entries: list[Entry], trees: list[Tree], cores: int) -> list[str]:
    out = []
    for tree in trees:
        cold = {e.jobs: e for e in entries if e.tree is tree and e.tool == "torchlint cold" and e.runs}
        warm = {e.jobs: e for e in entries if e.tree is tree and e.tool == "torchlint warm" and e.runs}
        key = str(cores)
        if key in cold:
            c = cold[key]
            peer = reference(entries, tree, "torchfix", key)
            if peer is not None:
                ratio = peer.median() / c.median()
                out.append(
                    f"- {tree.name}: torchlint cold -j{key} has {ratio:.1f}× TorchFix's throughput (goal ≥ 8×): "
                    f"{'met' if ratio >= 8 else 'not met'}; {fmt_seconds(c.median())} s (goal < 11 s on 2 cores)."
                )
            if key in warm:
                share = warm[key].median() / c.median()
                out.append(
                    f"- {tree.name}: warm -j{key} takes {share:.1%} of cold (goal < 5%): "
                    f"{'met' if share < 0.05 else 'not met'}."
                )
            peak = max(e.peak_mb() for e in cold.values())
            out.append(
                f"- {tree.name}: peak RSS per torchlint process {peak:.0f} MB (goal < 300 MB per worker): "
                f"{'met' if peak < 300 else 'not met'}."
            )
            broken = [e for e in cold.values() if e.problem]
            errors = sum(r.stderr.count(": error:") for e in cold.values() for r in e.runs)
            out.append(
                f"- {tree.name}: {tree.lines:,} lines linted cold "
                + ("without a crash" if not broken else f"with a failure: {broken[0].problem}")
                + f"; {errors} per-file error line(s) on stderr over all cold runs."
            )
        tl = next((e for e in entries if e.tree is tree and e.tool == "torchlint cold" and e.runs), None)
        tf = next((e for e in entries if e.tree is tree and e.tool == "TorchFix --select ALL" and e.runs), None)
        if tl and tf:
            tl_codes = tl.count(tl.runs[-1])[1]
            tf_codes = tf.count(tf.runs[-1])[1]
            out.append(
                f"- {tree.name}: torchlint TL101 {tl_codes.get('TL101', 0)} vs TorchFix TOR401 "
                f"{tf_codes.get('TOR401', 0)} (TorchFix's DataLoader `num_workers` rule, only on with `--select ALL`)."
            )
    return out


def machine_line(peers: dict) -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    probe = quiet_call(
        [sys.executable, "-c", "import libcst, importlib.metadata as m; print(m.version('libcst'), m.version('torch'), "
         "m.version('torchlint'))"]
    )  # fmt: skip
    libcst_v, torch_v, torchlint_v = (probe.stdout.split() + ["?"] * 3)[:3]
    peer_text = "; ".join(v for _, v in peers.values() if v)
    return (
        f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}, Python {platform.python_version()}, "
        f"libcst {libcst_v}, torch {torch_v}, torchlint {torchlint_v}"
        + (f"; peers: {peer_text}" if peer_text else "")
        + f"; {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}"
    )


def unconditional_rules() -> str:
    """Which default rules need no particular text, so that every file gets parsed and walked."""
    probe = quiet_call(
        [sys.executable, "-c", "from torchlint.lint.rule import all_rules\n"
         "print(' '.join(c for c, r in sorted(all_rules().items()) if not r.requires and c != 'TL001'))"]
    )  # fmt: skip
    codes = probe.stdout.split()
    if probe.returncode != 0:
        return ""
    if not codes:
        return "Every rule of this version names such strings."
    return f"In this version {', '.join(codes)} name none, so every file is parsed and walked."


def command_text(entry: Entry, work: Path) -> str:
    argv = list(entry.argv)
    if argv[:3] == [sys.executable, "-m", "torchlint"]:
        argv = ["torchlint"] + argv[3:]
    if argv[:2] == [sys.executable, "-c"]:
        argv = ["python", "-c", "<parse every file with libcst.parse_module>"] + argv[3:]
    text = shlex.join(argv)
    return text.replace(str(work), "$WORK")


def render_report(
    args: argparse.Namespace, entries: list[Entry], trees: list[Tree], peers: dict, work: Path, load: tuple
) -> str:
    out = ["# torchlint lint speed", ""]
    out.append(
        "Measured by `benchmarks/lint_speed.py`"
        + (f" (`{' '.join(args.argv)}`)" if args.argv else "")
        + f". Other processes (tests and builds in the same checkout) may have been running: load average "
        f"{load[0]:.2f} at the start and {load[1]:.2f} at the end on {os.cpu_count()} cores, so treat the "
        "figures as rough."
    )
    out += ["", f"Machine: {machine_line(peers)}.", ""]
    peer_trees = [t.name for t in trees if t.name in args.peer_trees and not args.skip_peers]
    out.append(
        f"Repetitions: {args.reps} for torchlint and the bare parse ({min(args.reps, args.large_reps)} on trees "
        f"over {LARGE_TREE:,} lines), {args.peer_reps} for TorchFix and Fixit, interleaved. Peers run on: " + (", ".join(peer_trees) if peer_trees else "no tree") + "; torchlint and "
        "the bare parse on every tree. Lines/s divides each tree's total line count by the median wall time. "
        "Peak RSS is `ru_maxrss` from `wait4()`: the largest single process of the tree of processes (a pool "
        "worker or the parent), not the sum over workers. \"vs\" columns are speed-ups (reference time / this "
        "time). ¹ TorchFix with its default rules at the same job count, or `--select ALL` where the "
        "default-rules run was not made."
    )
    out += ["", "## Trees", "", "| Tree | Files (.py/.pyi) | Lines | Source |", "|---|---|---|---|"]
    for tree in trees:
        out.append(f"| {tree.name} | {tree.files:,} | {tree.lines:,} | {tree.origin} |")
    out += ["", "## Results", "", render_table(entries, trees), ""]
    goals = goal_lines(entries, trees, args.jobs)
    if goals:
        out += ["## Goals", ""] + goals + [""]
    out += [
        "## Notes",
        "",
        "- torchlint parses only the files whose text contains a string that some selected rule needs (its "
        "`requires`); every other file gets CPython's syntax check only. " + unconditional_rules() + " TorchFix "
        "similarly skips files that never mention `torch`. The bare parse parses every file once and does "
        "nothing else.",
        "- TorchFix's default rules leave out TOR3, TOR4 and TOR9; its performance rule TOR401 (DataLoader "
        "without `num_workers` > 0) runs only with `--select ALL`. TorchFix and Fixit read only `.py` files.",
        "- The trees are copies (`.py`/`.pyi` only) outside any git checkout: torchlint honours the `.gitignore` "
        "of an enclosing work tree, and an installed package under e.g. a pyenv checkout would otherwise be "
        "invisible to it.",
        "- torchlint's warm runs use the result cache in the working directory, filled by one untimed run "
        "(with every core).",
        "",
        "## Commands",
        "",
        "`$WORK` is the scratch directory (`--work-dir`); each command ran in `$WORK/runs/<tree>`.",
        "",
        "```",
    ]
    seen = set()
    for entry in entries:
        text = command_text(entry, work)
        if text not in seen:
            seen.add(text)
            out.append(text)
    out += ["```", ""]
    problems = [e for e in entries if e.problem]
    if problems:
        out += ["## Problems", ""]
        out += [f"- {e.tree.name}, {e.tool} -j{e.jobs}: {e.problem}" for e in problems]
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# Main


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="timm only, 1 repetition, no Fixit (for development)")
    parser.add_argument("--skip-peers", action="store_true", help="run neither TorchFix nor Fixit")
    parser.add_argument("--skip-fixit", action="store_true", help="run TorchFix but not Fixit")
    parser.add_argument(
        "--trees", default="timm,torch", help="built-in trees to measure, comma-separated: timm, torch (default: both)"
    )
    parser.add_argument("--tree", action="append", default=[], metavar="PATH", help="another tree to measure")
    parser.add_argument(
        "--baseline-rev", default=None, metavar="REV",
        help="also time torchlint as it was at commit REV of this checkout (cold runs, interleaved with today's)",
    )  # fmt: skip
    parser.add_argument(
        "--peer-trees", default="timm", help="trees the peers run on, comma-separated (default: timm)"
    )
    parser.add_argument("--reps", type=int, default=None, help="repetitions for torchlint and the bare parse (3)")
    parser.add_argument("--peer-reps", type=int, default=None, help="repetitions for TorchFix and Fixit (1)")
    parser.add_argument(
        "--large-reps", type=int, default=1, help=f"repetitions on trees over {LARGE_TREE:,} lines (1)"
    )
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="N for the -jN runs (all cores)")
    parser.add_argument("--torchfix-j1", action=argparse.BooleanOptionalAction, default=True,
                        help="also time TorchFix with -j1 (default rules)")  # fmt: skip
    parser.add_argument("--torchfix-default", action=argparse.BooleanOptionalAction, default=True,
                        help="time TorchFix with its default rules at -jN (else only --select ALL)")  # fmt: skip
    parser.add_argument("--large-j1", action=argparse.BooleanOptionalAction, default=True,
                        help=f"also time torchlint cold -j1 on trees over {LARGE_TREE:,} lines")  # fmt: skip
    parser.add_argument("--timm-version", default=TIMM_VERSION)
    parser.add_argument("--torchfix-version", default=TORCHFIX_VERSION)
    parser.add_argument("--fixit-spec", default=FIXIT_SPEC, help=f"pip requirement for Fixit ({FIXIT_SPEC})")
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR, help=f"scratch ({DEFAULT_WORK_DIR})")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before one run is killed")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="Markdown file to write")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    if args.quick:
        args.trees = "timm"
        args.skip_fixit = True
        args.torchfix_j1 = False
        args.reps = args.reps or 1
        args.peer_reps = args.peer_reps or 1
    args.reps = args.reps or 3
    args.peer_reps = args.peer_reps or 1
    args.trees = [t.strip() for t in args.trees.split(",") if t.strip()]
    args.peer_trees = [t.strip() for t in args.peer_trees.split(",") if t.strip()]
    unknown = [t for t in args.trees if t not in ("timm", "torch")]
    if unknown:
        parser.error(f"unknown tree(s): {', '.join(unknown)} (choose from timm, torch; use --tree PATH for others)")
    if args.reps < 1 or args.peer_reps < 1 or args.jobs < 1:
        parser.error("--reps, --peer-reps and --jobs must be at least 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    if quiet_call(["git", "-C", str(work), "rev-parse", "--show-toplevel"]).returncode == 0:
        log(f"warning: {work} is inside a git work tree; torchlint will apply its .gitignore")
    load_start = os.getloadavg()[0]
    trees: list[Tree] = []
    if "timm" in args.trees:
        log("preparing timm ...")
        trees.append(prepare_timm(work, args.timm_version))
    if "torch" in args.trees:
        log("preparing torch ...")
        trees.append(prepare_torch(work))
    for index, path in enumerate(args.tree):
        trees.append(prepare_extra(work, path, index))
    for tree in trees:
        count_tree(tree, work)
        log(f"{tree.name}: {tree.files} files, {tree.lines} lines in {tree.path}")

    peers: dict = {}
    if not args.skip_peers and any(t.name in args.peer_trees for t in trees):
        log("preparing TorchFix ...")
        peers["torchfix"] = make_venv(work, f"torchfix-{args.torchfix_version}", f"torchfix=={args.torchfix_version}",
                                      "torchfix")  # fmt: skip
        if not args.skip_fixit:
            log("preparing Fixit ...")
            peers["fixit"] = make_venv(work, "fixit-2", args.fixit_spec, "fixit")
        for name, (tool, text) in peers.items():
            log(f"{name}: {text if tool else 'unavailable: ' + text}")

    entries = build_plan(args, trees, work, peers)
    execute(entries, args.timeout, log)
    load_end = os.getloadavg()[0]

    table = render_table(entries, trees)
    print(table)
    for line in goal_lines(entries, trees, args.jobs):
        print(line)
    if not args.no_write:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(render_report(args, entries, trees, peers, work, (load_start, load_end)), encoding="utf-8")
        log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
