"""`torchlint trace -- python train.py ARGS`: the command line."""

from __future__ import annotations

import sys
from typing import Optional

import click

EXIT_USAGE = 2


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", type=click.IntRange(min=0), default=20, show_default=True,
              help="Stop the program after this many steps (optimizer steps or batches); 0: run to the end.")
@click.option("--output-format", type=click.Choice(["text", "json", "sarif"]), default="text", show_default=True)
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report here (default: standard error, after the program's own output).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def trace_command(steps: int, output_format: str, output_file: Optional[str], command: tuple[str, ...]) -> None:
    """Run a training or evaluation program and report what slows it down, at its source lines.

    COMMAND is `python train.py ARGS` or `python -m module ARGS` (after `--`). The program's output and
    exit code are its own; the report goes to standard error, or to --output-file.
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        click.echo("torchlint trace: torch is not installed (pip install torch)", err=True)
        sys.exit(EXIT_USAGE)
    from torchlint.trace.runner import CommandError, parse_command, run_program
    from torchlint.trace.tracer import Tracer

    try:
        program = parse_command(command)
    except CommandError as exc:
        click.echo(f"torchlint trace: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    tracer = Tracer(steps=steps, roots=[program.root])

    def traced(run) -> None:
        with tracer:
            run()

    code = run_program(program, traced)
    if tracer.report is None:  # the program ended the trace in a way __exit__ did not see
        tracer.stop()
        from torchlint.trace.report import build_report

        tracer.report = build_report(tracer)
    text = tracer.report.render(output_format)
    if output_file:
        try:
            with open(output_file, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            click.echo(f"{output_file}: error: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_USAGE)
    else:
        sys.stdout.flush()
        sys.stderr.write(text)
        sys.stderr.flush()
    sys.exit(code)
