"""A run's results, as every output format sees them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator, Optional

from torchlint.lint.finding import FileResult, Finding
from torchlint.lint.fix import applicable


@dataclass
class Report:
    results: list[FileResult]
    unsafe_fixes: bool = False
    fixing: bool = False  # --fix was given: the summary counts what was fixed
    statistics: bool = False
    quiet: bool = False  # findings only, no summary

    def findings(self) -> Iterator[tuple[FileResult, Finding]]:
        for result in self.results:
            for finding in result.findings:
                yield result, finding

    @property
    def errors(self) -> list[FileResult]:
        return [r for r in self.results if r.error]

    @property
    def count(self) -> int:
        return sum(len(r.findings) for r in self.results)

    @property
    def fixed(self) -> int:
        return sum(r.fixed for r in self.results)

    def fixable(self, unsafe: Optional[bool] = None) -> int:
        allow = self.unsafe_fixes if unsafe is None else unsafe
        return sum(1 for _, f in self.findings() if applicable(f, allow))


def location(result: FileResult, finding_line: int) -> tuple[Optional[int], int]:
    """(notebook cell or None, line within it) for showing a line of a file's (joined) text."""
    cells = getattr(result, "cells", None)
    if cells:
        for index, first in reversed(cells):
            if finding_line >= first:
                return index, finding_line - first + 1
    return None, finding_line


def absolute(path: str) -> str:
    return os.path.abspath(path)
