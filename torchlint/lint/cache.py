"""Results cached by (file content, path, selected rules, torchlint version) in `.torchlint_cache/` at the
project's root.

One small JSON file per entry, named by the key's hash: concurrent workers never write the same file,
and an unchanged tree costs one read and one hash per file. An entry's time is refreshed when it is read;
entries that no run of the last `KEEP_RUNS` read or wrote are deleted, so the cache does not grow forever.
An entry that cannot be read back exactly as written (damaged, crafted, not a regular file) is a miss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from functools import lru_cache
from typing import Iterable, Optional, Sequence

from torchlint.lint.discovery import marked_ancestor
from torchlint.lint.finding import FileResult, Finding, FindingFix, FixEdit
from torchlint.lint.source import SourceError, read_regular_file

CACHE_DIR = ".torchlint_cache"
KEEP_RUNS = 20
MAX_ENTRY_BYTES = 16 * 1024 * 1024
_RUNS_FILE = "runs"


def project_root(paths: Iterable[str], config: Optional[str]) -> str:
    """Where the cache goes: the directory of the configuration file, else the nearest directory holding
    `.git` above the paths linted, else the deepest directory that holds them all."""
    if config:
        return os.path.dirname(os.path.abspath(config))
    absolute = [os.path.abspath(p) for p in paths] or [os.getcwd()]
    try:
        common = os.path.commonpath(absolute)
    except ValueError:  # paths on different drives
        return os.getcwd()
    if not os.path.isdir(common):
        common = os.path.dirname(common)
    return marked_ancestor(common, (".git",)) or common


def _version() -> str:
    from torchlint import __version__

    return __version__


@lru_cache(maxsize=None)
def _code_digest() -> str:
    """torchlint's release plus the names, sizes and times of its source files: results cached by one
    build of the rules are not reused by another (an editable install changes without a new release)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256(_version().encode())
    for directory, subdirectories, files in os.walk(package):
        subdirectories.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                stat = os.stat(os.path.join(directory, name))
                digest.update(f"{directory}/{name}:{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()


class Cache:
    def __init__(self, root: str, fingerprint: str) -> None:
        self.directory = os.path.join(root, CACHE_DIR, _version())
        self.fingerprint = fingerprint
        self.started = time.time_ns()

    def key(self, display_path: str, data: bytes) -> str:
        digest = hashlib.sha256()
        for part in (_code_digest(), self.fingerprint, display_path):
            digest.update(part.encode("utf-8", "surrogateescape"))
            digest.update(b"\0")
        digest.update(data)
        return digest.hexdigest()

    def _file(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], key[2:] + ".json")

    def get(self, key: str) -> Optional[FileResult]:
        """The stored result, if there is one and none of the project files it depended on has changed."""
        path = self._file(key)
        try:
            data = json.loads(read_regular_file(path, MAX_ENTRY_BYTES))
            result = _result_from_json(data)
            dependencies = _dependencies_from_json(data.get("dependencies", {}))
        except (OSError, SourceError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None
        if any(signature(name) != stored for name, stored in dependencies.items()):
            return None  # an imported project file changed: what this file's findings rest on may have too
        try:
            os.utime(path)  # read by this run: kept by the next pruning
        except OSError:
            pass
        return result

    def finish_run(self) -> None:
        """Record this run; delete the entries none of the last KEEP_RUNS runs used, and other versions' caches."""
        try:
            runs_path = os.path.join(self.directory, _RUNS_FILE)
            try:
                runs = [int(n) for n in read_regular_file(runs_path, 4096).split()]
            except (OSError, SourceError, ValueError):
                runs = []
            runs = [*runs, self.started][-KEEP_RUNS:]
            with open(runs_path, "w", encoding="ascii") as handle:
                handle.write("\n".join(map(str, runs)) + "\n")
            if len(runs) == KEEP_RUNS:
                self._prune(runs[0])
            self._drop_other_versions()
        except OSError:
            pass  # pruning is housekeeping: never worth failing a run

    def _prune(self, cutoff_ns: int) -> None:
        for shard in os.scandir(self.directory):
            if not shard.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(shard.path):
                if entry.name.endswith(".json") and entry.stat(follow_symlinks=False).st_mtime_ns < cutoff_ns:
                    os.unlink(entry.path)

    def _drop_other_versions(self) -> None:
        parent = os.path.dirname(self.directory)
        mine = os.path.basename(self.directory)
        for entry in os.scandir(parent):
            if entry.name != mine and entry.name[:1].isdigit() and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)

    def put(self, key: str, result: FileResult, dependencies: Sequence[str] = ()) -> None:
        """Store `result`; `dependencies` are the project files it was computed from (besides the file itself)."""
        target = self._file(key)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            first = not os.path.exists(os.path.join(self.directory, "..", "CACHEDIR.TAG"))
            if first:
                with open(os.path.join(self.directory, "..", "CACHEDIR.TAG"), "w", encoding="utf-8") as tag:
                    tag.write("Signature: 8a477f597d28d172789f06886806bc55\n# torchlint's result cache\n")
                with open(os.path.join(self.directory, "..", ".gitignore"), "w", encoding="utf-8") as ignore:
                    ignore.write("*\n")
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target))
            data = _result_to_json(result)
            data["dependencies"] = {name: signature(name) for name in dependencies}
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            os.replace(tmp, target)
        except OSError:
            pass  # a cache that cannot be written only costs speed


def _result_to_json(result: FileResult) -> dict:
    return {
        "error": result.error,
        "notes": result.notes,
        "cells": result.cells,
        "findings": [dataclasses.asdict(f) for f in result.findings],
    }


def signature(path: str) -> Optional[list[int]]:
    """What identifies a version of a file cheaply: its modification time and size (None: it is gone)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return [stat.st_mtime_ns, stat.st_size]


def _dependencies_from_json(raw: dict) -> dict[str, Optional[list[int]]]:
    found: dict[str, Optional[list[int]]] = {}
    for name, stored in _typed(raw, dict).items():
        if stored is not None:
            stored = [_typed(v, int) for v in _typed(stored, list)]
        found[_typed(name, str)] = stored
    return found


def _typed(value, kind):
    # bool is an int; a cached count or position must be a real one
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"cache entry holds {type(value).__name__} where {kind.__name__} belongs")
    return value


def _fix_edit(raw: dict) -> FixEdit:
    return FixEdit(
        start=_typed(raw["start"], int),
        end=_typed(raw["end"], int),
        content=_typed(raw["content"], str),
        row=_typed(raw["row"], int),
        column=_typed(raw["column"], int),
        end_row=_typed(raw["end_row"], int),
        end_column=_typed(raw["end_column"], int),
    )


def _finding(raw: dict) -> Finding:
    fix = raw["fix"]
    if fix is not None:
        fix = FindingFix(
            _typed(fix["message"], str), _typed(fix["safe"], bool), tuple(_fix_edit(e) for e in _typed(fix["edits"], list))
        )
    return Finding(
        code=_typed(raw["code"], str),
        message=_typed(raw["message"], str),
        line=_typed(raw["line"], int),
        column=_typed(raw["column"], int),
        end_line=_typed(raw["end_line"], int),
        end_column=_typed(raw["end_column"], int),
        noqa_line=_typed(raw["noqa_line"], int),
        fix=fix,
    )


def _cell(raw: list) -> tuple[int, int]:
    index, first_line = _typed(raw, list)
    return _typed(index, int), _typed(first_line, int)


def _result_from_json(data: dict) -> FileResult:
    """The result stored in an entry; TypeError/KeyError for anything but what `_result_to_json` writes."""
    findings = [_finding(raw) for raw in _typed(data["findings"], list)]
    cells = [_cell(c) for c in _typed(data["cells"], list)]
    error = data["error"]
    if error is not None:
        _typed(error, str)
    notes = [_typed(n, str) for n in _typed(data["notes"], list)]
    return FileResult(path="", findings=findings, error=error, notes=notes, cells=cells)
