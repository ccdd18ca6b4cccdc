"""Results cached by (file content, path, selected rules, torchlint version) in `.torchlint_cache/`.

One small JSON file per entry, named by the key's hash: concurrent workers never write the same file,
and an unchanged tree costs one read and one hash per file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from functools import lru_cache
from typing import Optional

from torchlint.lint.finding import FileResult, Finding, FindingFix, FixEdit

CACHE_DIR = ".torchlint_cache"


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
        try:
            with open(self._file(key), encoding="utf-8") as handle:
                return _result_from_json(json.load(handle))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, result: FileResult) -> None:
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
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(_result_to_json(result), handle)
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


def _result_from_json(data: dict) -> FileResult:
    findings = []
    for raw in data["findings"]:
        fix = raw.pop("fix")
        if fix is not None:
            fix = FindingFix(fix["message"], fix["safe"], tuple(FixEdit(**e) for e in fix["edits"]))
        findings.append(Finding(**raw, fix=fix))
    cells = [tuple(c) for c in data["cells"]]
    return FileResult(path="", findings=findings, error=data["error"], notes=list(data["notes"]), cells=cells)
