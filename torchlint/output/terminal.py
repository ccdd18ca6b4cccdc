"""What reaches a terminal: colour when it is wanted, and text that cannot drive the terminal.

A file name or message can hold control characters (a newline that forges an output line, an escape
sequence that sets the window title); they are shown escaped, the way Python's repr shows them.
"""

from __future__ import annotations

import os
import re
import sys
from typing import IO, Optional

import click

# C0 and C1 controls and DEL; tabs included, since one can shift a forged column into place.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def safe(text: str) -> str:
    """`text` with every control character written as an escape (`\\n`, `\\x1b`, `\\u202e`)."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def safe_source_line(text: str) -> str:
    """A source line for display: tabs become spaces, other control characters escapes."""
    return safe(text.expandtabs(4))


def use_color(stream: Optional[IO[str]] = None) -> bool:
    """FORCE_COLOR (any value but empty) forces colour, NO_COLOR (likewise) turns it off; else a terminal gets it."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream if stream is not None else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Painter:
    """click.style when colour is on, plain text otherwise."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, **style: object) -> str:
        return click.style(text, **style) if self.color else text  # type: ignore[arg-type]
