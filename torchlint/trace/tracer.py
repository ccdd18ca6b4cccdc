"""A trace: installs the torch function mode, the hooks and the loader patches, and collects what they see."""

from __future__ import annotations

import dis
import functools
import os
import warnings
from typing import Any, Optional, Sequence

from torchlint.trace.events import Events, LoaderRecord, SampleLoop
from torchlint.trace.frames import Site, UserCode
from torchlint.trace.lines_run import LinesRun
from torchlint.trace.source_map import enclosing_loop
from torchlint.trace.steps import StepClock, StopTracing

_CALLS = {"CALL", "PRECALL", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX", "CALL_METHOD", "CALL_KW"}


@functools.lru_cache(maxsize=1024)
def _opnames(code: Any) -> dict[int, str]:
    return {i.offset: i.opname for i in dis.get_instructions(code)}


class Tracer:
    """`with Tracer(steps=N) as t: ...`, then `t.report`. Use through `torchlint.trace()`."""

    def __init__(self, steps: int = 0, roots: Optional[Sequence[str]] = None, lint: bool = True) -> None:
        import torch  # noqa: F401  (fails here, clearly, when torch is missing)

        from torchlint.trace.provenance import Provenance

        self.cwd = os.getcwd()
        self.user = UserCode(list(roots) if roots else [self.cwd])
        self.provenance = Provenance(torch.Tensor)
        self.clock = StepClock(limit=steps)
        self.events = Events()
        self.lines_run = LinesRun(self.user)
        self.clock.watch_lines = self.lines_run.watch
        self.lint = lint
        self.loading = False  # a DataLoader is producing a batch (the torch function mode stands aside)
        self.report: Any = None
        self._installed: list[Any] = []

    # What the mode and the hooks report -------------------------------------------------------------

    def host_read(self, kind: str) -> None:
        stack = self.user.stack(2)
        if kind == "bool":
            frame = self.user.innermost(2)
            if frame is not None and _opnames(frame.f_code).get(frame.f_lasti) not in _CALLS:
                kind = "condition"  # `if t:`, `while t:`, `assert t`, `t and ...`
        step = self.clock.index
        self.events.record(kind, stack, step)
        if step is not None and self.clock.current is not None:
            self.clock.current.host_reads += 1

    def sample_loop(self) -> Optional[Site]:
        """The loop (file, first line) around the innermost line of the user's code that sits in a loop."""
        for path, line in self.user.stack(2, limit=8):
            loop = enclosing_loop(path, line)
            if loop is not None:
                return (path, loop)
        return None

    def sample_launch(self, name: str, args: Sequence[Any], kwargs: Optional[dict]) -> Optional[Site]:
        """An operation (or a module) launched on one sample: counted against the loop that sliced it."""
        provenance = self.provenance
        loop = None
        for value in (*args, *(kwargs or {}).values()):
            for item in value if isinstance(value, (list, tuple)) else (value,):
                origin = provenance.origin_of(item)
                if isinstance(origin, tuple):
                    loop = origin
                    break
            if loop is not None:
                break
        step = self.clock.index
        if loop is None or step is None:
            return loop
        record = self.events.loops.get(loop)
        stack = self.user.stack(2)
        if record is None:
            record = self.events.loops[loop] = SampleLoop(loop, stack)
        record.per_step[step] += 1
        record.lines[(stack[0][1] if stack else loop[1], name)] += 1
        return loop

    def moved(self, tensor: Any) -> None:
        origin = self.provenance.origin_of(tensor)
        if isinstance(origin, LoaderRecord):
            origin.moved += 1

    # Installing and removing ------------------------------------------------------------------------

    def __enter__(self) -> "Tracer":
        from torchlint.trace.hooks import Hooks
        from torchlint.trace.loaders import LoaderPatches
        from torchlint.trace.mode import TraceMode

        hooks, loaders, mode = Hooks(self), LoaderPatches(self), TraceMode(self)
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        # torch warns that its global hooks (the trace's) also fire for a torch.compile wrapper: not the program's.
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
        hooks.install()
        loaders.install()
        mode.__enter__()
        self.lines_run.start()
        self._installed = [hooks, loaders, mode]
        return self

    def stop(self) -> None:
        """Remove the mode, the hooks and the patches (idempotent)."""
        if not self._installed:
            return
        self.lines_run.stop()
        hooks, loaders, mode = self._installed
        self._installed = []
        mode.__exit__(None, None, None)
        loaders.remove()
        hooks.remove()
        self._warnings.__exit__(None, None, None)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.stop()
        from torchlint.trace.report import build_report

        self.report = build_report(self, lint=self.lint)
        return exc_type is not None and issubclass(exc_type, StopTracing)
