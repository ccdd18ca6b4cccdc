"""Which lines of the user's files ran, to tell a finding whose line never ran from one that ran quietly.

A global trace function (sys.settrace) that returns a line tracer only for frames of the user's files: the
cost inside torch and the standard library is one call per Python function entered.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Optional

from torchlint.trace.frames import UserCode


class LinesRun:
    def __init__(self, user: UserCode) -> None:
        self.user = user
        self.lines: dict[str, set[int]] = {}  # real path -> lines that ran
        self._previous: Optional[Callable] = None
        self._by_name: dict[str, Optional[set[int]]] = {}  # code object's file name -> the set for it
        self._started = False

    def _lines_for(self, filename: str) -> Optional[set[int]]:
        try:
            return self._by_name[filename]
        except KeyError:
            path = self.user.path(filename)
            found = self.lines.setdefault(path, set()) if path is not None else None
            self._by_name[filename] = found
            return found

    def _on_call(self, frame: Any, event: str, arg: Any) -> Optional[Callable]:
        lines = self._lines_for(frame.f_code.co_filename)
        if lines is None:
            return None
        lines.add(frame.f_lineno)
        add = lines.add

        def on_line(frame: Any, event: str, arg: Any) -> Callable:
            if event == "line":
                add(frame.f_lineno)
            return on_line

        return on_line

    def start(self) -> None:
        self._started = True
        self._previous = sys.gettrace()
        sys.settrace(self._on_call)
        threading.settrace(self._on_call)
        # Frames already running (the caller of `with torchlint.trace():`) get a line tracer too.
        frame = sys._getframe(1)
        while frame is not None:
            lines = self._lines_for(frame.f_code.co_filename)
            if lines is not None:
                frame.f_trace = self._on_call(frame, "call", None)
            frame = frame.f_back

    def watch(self, on: bool) -> None:
        """Pause or resume watching (frames already watched resume their line events with it)."""
        if self._started:
            sys.settrace(self._on_call if on else None)

    def stop(self) -> None:
        self._started = False
        sys.settrace(self._previous)
        threading.settrace(self._previous)  # type: ignore[arg-type]
        frame = sys._getframe(1)
        while frame is not None:
            if getattr(frame.f_trace, "__qualname__", "") == "LinesRun._on_call.<locals>.on_line":
                frame.f_trace = None
            frame = frame.f_back

    def ran(self, path: str, first: int, last: int) -> bool:
        lines = self.lines.get(path)
        return bool(lines) and any(first <= line <= last for line in lines)

    def files(self) -> list[str]:
        return sorted(path for path, lines in self.lines.items() if lines)
