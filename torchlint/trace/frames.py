"""Which source files are the user's, and where in them the running code is."""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Optional

Site = tuple[str, int]  # (absolute file name, 1-based line)


def _library_dirs() -> list[str]:
    """Folders that hold installed code (the standard library, site-packages, torch, torchlint itself)."""
    dirs = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    import torchlint

    dirs.add(os.path.dirname(torchlint.__file__))
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        dirs.add(os.path.dirname(torch.__file__))
    # Both spellings: code objects name files as imported (no link resolved), the check compares real paths.
    return sorted({d + os.sep for d in dirs} | {os.path.realpath(d) + os.sep for d in dirs})


class UserCode:
    """Decides, once per file name, whether code belongs to the traced program rather than a library.

    A file is the user's when it lies under one of `roots` and not inside an installed package.
    """

    def __init__(self, roots: list[str]) -> None:
        self.roots = [os.path.realpath(r) + os.sep for r in roots]
        self.excluded = _library_dirs()
        self._known: dict[str, Optional[str]] = {}  # file name as the code object spells it -> real path or None

    def path(self, filename: str) -> Optional[str]:
        """The real path of `filename` when it is the user's code, else None."""
        try:
            return self._known[filename]
        except KeyError:
            pass
        result = None
        # Most frames are the library's: a prefix test settles them without touching the file system.
        if filename and not filename.startswith("<") and not filename.startswith(tuple(self.excluded)):
            real = os.path.realpath(filename)
            if any(real.startswith(r) for r in self.roots) and not any(real.startswith(e) for e in self.excluded):
                if not any(part in ("site-packages", "dist-packages") for part in real.split(os.sep)):
                    result = real
        self._known[filename] = result
        return result

    def stack(self, depth: int = 2, limit: int = 6) -> tuple[Site, ...]:
        """The user's frames on the current stack, innermost first (at most `limit`)."""
        frame = sys._getframe(depth)
        sites: list[Site] = []
        while frame is not None and len(sites) < limit:
            path = self.path(frame.f_code.co_filename)
            if path is not None:
                sites.append((path, frame.f_lineno))
            frame = frame.f_back
        return tuple(sites)

    def innermost(self, depth: int = 2) -> Optional["object"]:
        """The innermost frame of the user's code on the current stack (a frame object), or None."""
        frame = sys._getframe(depth)
        while frame is not None:
            if self.path(frame.f_code.co_filename) is not None:
                return frame
            frame = frame.f_back
        return None
