"""A run's results, as every output format sees them."""

from __future__ import annotations

import os
from collections import Counter
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
    color: bool = False  # ANSI colours (a terminal, or FORCE_COLOR)
    texts: dict[str, str] = field(default_factory=dict)  # sources not on disk (stdin), by path

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

    @property
    def found_by_fixes(self) -> int:
        return sum(r.fixed_new for r in self.results)

    def fixable(self, unsafe: Optional[bool] = None) -> int:
        allow = self.unsafe_fixes if unsafe is None else unsafe
        return sum(1 for _, f in self.findings() if applicable(f, allow))

    def statistics_rows(self) -> list[tuple[str, int, int]]:
        """(code, findings, fixable findings) per rule, most frequent first."""
        counts = Counter(f.code for _, f in self.findings())
        fixable = Counter(f.code for _, f in self.findings() if applicable(f, self.unsafe_fixes))
        return [(code, n, fixable[code]) for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]

    def source_text(self, result: FileResult) -> Optional[str]:
        """The (current) text a result's findings point into, for showing source lines."""
        if result.path in self.texts:
            return self.texts[result.path]
        if result.fixed_text is not None and not result.cells:
            return result.fixed_text
        from torchlint.lint.source import SourceError, read_source

        try:
            return read_source(result.path).text
        except (SourceError, OSError):
            return None


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
