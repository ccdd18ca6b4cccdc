"""Finding the files to lint: .py, .pyi and .ipynb under the given paths, minus excludes and .gitignore.

Inside a git work tree the listing comes from `git ls-files --cached --others --exclude-standard`, which
applies .gitignore, .git/info/exclude and the global excludes exactly as git does. Git runs with the
repository's program-running settings (core.fsmonitor and the like) turned off: linting a tree never
executes code from it. Elsewhere the tree is
walked without following directory links (so link loops cannot trap the walk).
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

from torchlint.config import Settings

EXTENSIONS = (".py", ".pyi", ".ipynb")


def marked_ancestor(directory: str, markers: Iterable[str]) -> Optional[str]:
    """The nearest of `directory` and its parents that holds one of `markers` (`.git`, `pyproject.toml`, ...)."""
    markers = tuple(markers)
    while True:
        if any(os.path.exists(os.path.join(directory, marker)) for marker in markers):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


@dataclass(frozen=True)
class Discovered:
    path: str  # path to open
    display: str  # path to show
    explicit: bool  # named on the command line


@dataclass(frozen=True)
class DiscoveryProblem:
    display: str
    message: str


def display_path(path: str) -> str:
    absolute = os.path.abspath(path)
    cwd = os.getcwd()
    if absolute == cwd or absolute.startswith(cwd + os.sep):
        return os.path.relpath(absolute, cwd)
    return path


# Settings of the linted repository that would make git run a program from it (linting must never
# execute anything from the tree), or write to it.
_GIT = (
    "git",
    "-c", "core.fsmonitor=false",
    "-c", "core.untrackedCache=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.pager=cat",
    "-c", "core.sshCommand=false",
    "-c", "protocol.allow=never",
)
_GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "GIT_EXTERNAL_DIFF": ""}


def _git(directory: str, *args: str, timeout: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(
        [*_GIT, "-C", directory, *args],
        capture_output=True,
        timeout=timeout,
        env={**env, **_GIT_ENV},
        stdin=subprocess.DEVNULL,
    )


def _git_listing(directory: str) -> Optional[list[str]]:
    """Files under `directory` that git does not ignore, or None outside a work tree (or without git).

    A directory named on the command line that git itself ignores (a virtualenv, site-packages inside a
    git-managed tool directory) is walked in full: the user asked for it.
    """
    try:
        ignored = _git(directory, "check-ignore", "-q", ".", timeout=60)
        if ignored.returncode == 0:
            return None
        proc = _git(directory, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".", timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    names = [n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
    return [os.path.join(directory, n) for n in names]


def _walk(directory: str, settings: Settings) -> Iterator[str]:
    for root, dirs, files in os.walk(directory, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not settings.is_excluded(os.path.join(root, d), below=directory))
        for name in sorted(files):
            yield os.path.join(root, name)


def discover(paths: Iterable[str], settings: Settings) -> tuple[list[Discovered], list[DiscoveryProblem]]:
    found: dict[str, Discovered] = {}
    problems: list[DiscoveryProblem] = []
    for raw in paths:
        if not os.path.lexists(raw):
            problems.append(DiscoveryProblem(raw, "no such file or directory"))
            continue
        try:
            is_dir = os.path.isdir(raw)
        except OSError as exc:
            problems.append(DiscoveryProblem(raw, exc.strerror or str(exc)))
            continue
        if not is_dir:
            if not os.path.exists(raw):  # a dangling link or a link loop
                problems.append(DiscoveryProblem(raw, _link_problem(raw)))
                continue
            found.setdefault(os.path.abspath(raw), Discovered(raw, display_path(raw), True))
            continue
        listing = _git_listing(raw)
        candidates = listing if listing is not None else _walk(raw, settings)
        for path in candidates:
            if not path.endswith(EXTENSIONS) or settings.is_excluded(path, below=raw):
                continue
            if os.path.islink(path) and not os.path.exists(path):
                problems.append(DiscoveryProblem(display_path(path), _link_problem(path)))
                continue
            if listing is not None and not os.path.lexists(path):
                continue  # deleted in the work tree but still in the index
            if not _is_regular(path):
                continue  # a FIFO or a device named like source: reading it could block forever
            found.setdefault(os.path.abspath(path), Discovered(path, display_path(path), False))
    ordered = sorted(found.values(), key=lambda d: d.display)
    return ordered, problems


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # let reading it report the problem


def _link_problem(path: str) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            return "symbolic link loop"
        return f"broken symbolic link ({exc.strerror})"
    return "cannot be read"
