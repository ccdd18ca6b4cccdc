"""The Python API: lint a string or a set of paths the way `torchlint check` does."""

from __future__ import annotations

import os
from typing import Iterable, Optional, Sequence

from torchlint.config import Settings, find_config, load_settings, validate_selectors
from torchlint.lint.discovery import discover
from torchlint.lint.finding import FileResult, Finding
from torchlint.lint.runner import Job, process_source, run
from torchlint.lint.source import SourceError, decode_python, notebook_from_json


def _settings(select: Optional[Sequence[str]], ignore: Optional[Sequence[str]], base: Optional[Settings] = None) -> Settings:
    settings = base or Settings(root=os.getcwd())
    return settings.with_overrides(
        select=validate_selectors(select, "select") if select is not None else None,
        ignore=validate_selectors(ignore, "ignore") if ignore is not None else None,
    )


def lint_source(
    text: str,
    path: str = "<string>.py",
    *,
    select: Optional[Sequence[str]] = None,
    ignore: Optional[Sequence[str]] = None,
    fix: bool = False,
    unsafe_fixes: bool = False,
) -> FileResult:
    """Lint (and optionally fix) Python source text. `result.findings`; with fix, `result.fixed_text`."""
    settings = _settings(select, ignore)
    source = decode_python(path, text.encode("utf-8"))
    job = Job(settings=settings, fix=fix or unsafe_fixes, unsafe_fixes=unsafe_fixes, diff=True, use_cache=False)
    if not job.fix:
        job = Job(settings=settings, use_cache=False)
    return process_source(source, job)


def lint_paths(
    paths: Iterable[str],
    *,
    select: Optional[Sequence[str]] = None,
    ignore: Optional[Sequence[str]] = None,
    jobs: int = 1,
) -> list[FileResult]:
    """Lint files and directories with the nearest configuration; results in path order."""
    paths = list(paths)
    config = find_config(os.getcwd())
    settings = _settings(select, ignore, load_settings(config))
    items, problems = discover(paths, settings)
    results = [FileResult(path=p.display, error=p.message) for p in problems]
    results.extend(run(items, Job(settings=settings, use_cache=False), jobs=jobs, cache_root=None))
    return results


__all__ = ["lint_source", "lint_paths", "Finding", "FileResult", "SourceError", "notebook_from_json"]
