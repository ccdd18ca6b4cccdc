"""Running the user's program in this process, the way `python X.py ARGS` / `python -m mod ARGS` would."""

from __future__ import annotations

import os
import re
import runpy
import sys
import traceback
from dataclasses import dataclass
from typing import Callable, Sequence

from torchlint.trace.steps import StopTracing

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")
_HARMLESS_FLAGS = {"-u", "-B", "-O", "-OO"}  # nothing to do in-process: output is flushed at the end anyway


class CommandError(ValueError):
    """A command line the trace cannot run, in one line."""


@dataclass
class Program:
    target: str  # a script path, or a module name
    is_module: bool
    args: list[str]

    @property
    def root(self) -> str:
        """Where the user's code lives: the script's folder, or the working directory for `-m`."""
        return os.getcwd() if self.is_module else os.path.dirname(os.path.abspath(self.target))


def parse_command(command: Sequence[str]) -> Program:
    words = list(command)
    if words and _PYTHON.match(os.path.basename(words[0])):
        words = words[1:]
    while words and words[0] in _HARMLESS_FLAGS:
        words = words[1:]
    if not words:
        raise CommandError("no program to run: give `-- python train.py ARGS` or `-- python -m module ARGS`")
    if words[0] == "-m":
        if len(words) < 2:
            raise CommandError("-m needs a module name")
        return Program(words[1], True, words[2:])
    if words[0].startswith("-"):
        raise CommandError(f"unsupported python option {words[0]}: use `python train.py ARGS` or `python -m module ARGS`")
    script = words[0]
    if not os.path.isfile(script):
        raise CommandError(f"{script}: no such file")
    return Program(script, False, words[1:])


def exit_code(exc: SystemExit) -> int:
    """What the interpreter would exit with for this SystemExit (printing a message code, as it does)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_program(program: Program, around: Callable[[Callable[[], None]], None] = lambda run: run()) -> int:
    """Run the program (inside `around`, which installs the trace) and return its exit code."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [program.target if not program.is_module else program.target, *program.args]
    sys.path.insert(0, os.getcwd() if program.is_module else os.path.dirname(os.path.abspath(program.target)))

    def run() -> None:
        if program.is_module:
            runpy.run_module(program.target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(program.target, run_name="__main__")

    try:
        around(run)
        return 0
    except StopTracing:
        return 0
    except SystemExit as exc:
        return exit_code(exc)
    except KeyboardInterrupt as exc:
        _print_error(exc)
        return 130
    except BaseException as exc:  # the program's own error: shown as Python shows it, and exit 1
        _print_error(exc)
        return 1
    finally:
        sys.stdout.flush()
        sys.argv, sys.path[:] = saved_argv, saved_path


def _print_error(exc: BaseException) -> None:
    """The traceback Python would print, without the frames of the trace and of runpy above the program."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the torchlint package
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        name = tb.tb_frame.f_code.co_filename
        if not (name.startswith(here + os.sep) or "runpy" in name):
            break
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)
