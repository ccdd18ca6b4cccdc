"""The `torchlint` command: check (lint and fix), rules, rule CODE, and optimize."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import NoReturn, Optional, Sequence

import click

from torchlint.config import ConfigError, Settings, find_config, load_settings, validate_selectors
from torchlint.lint.add_noqa import add_noqa
from torchlint.lint.cache import project_root
from torchlint.lint.discovery import Discovered, discover
from torchlint.lint.finding import FileResult
from torchlint.lint.rule import all_rules
from torchlint.lint.runner import Job, collect_less, default_jobs, process_source, run, unified_diff
from torchlint.lint.source import SourceError, decode_notebook, decode_python, read_source, write_fixed
from torchlint.output import DEFAULT_FORMAT, FORMATS, renderer
from torchlint.output.report import Report
from torchlint.output.terminal import safe, use_color

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _version() -> str:
    from torchlint import __version__

    return __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), prog_name="torchlint")
def cli() -> None:
    """Find and fix the PyTorch code that makes training and inference slow."""


class _Progress:
    """Files done / total and rate on stderr, for long runs in a terminal only."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.started = time.monotonic()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.started
        if elapsed < 2.0 and not self.shown:
            return
        if done != total and done % 8:
            return
        self.shown = True
        width = 30
        filled = int(width * done / max(total, 1))
        rate = done / elapsed if elapsed else 0.0
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} files, {rate:.0f} files/s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 70 + "\r")
            sys.stderr.flush()


def _settings(config: Optional[str], select, ignore, extend_select, fix, unsafe_fixes) -> Settings:
    path = Path(config) if config else find_config(os.getcwd())
    if config and not Path(config).is_file():
        raise ConfigError(f"{config}: no such configuration file")
    settings = load_settings(path)
    cli_select = validate_selectors(_split(select), "--select") if select else None
    config_ignore = settings.ignore
    if cli_select:  # what the command line selects outranks what the file ignores
        config_ignore = tuple(i for i in config_ignore if not any(s.startswith(i) for s in cli_select))
    return settings.with_overrides(
        select=cli_select,
        ignore=(*config_ignore, *validate_selectors(_split(ignore), "--ignore")),
        extend_select=(*settings.extend_select, *validate_selectors(_split(extend_select), "--extend-select"))
        if extend_select
        else None,
        fix=fix,
        unsafe_fixes=unsafe_fixes,
    )


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix/--no-fix", default=None, help="Apply safe fixes.")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply fixes that may change behaviour.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces the configured set).")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable on top of the set.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option(
    "--output-format",
    type=click.Choice(FORMATS),
    default=DEFAULT_FORMAT,
    show_default=True,
    help="full: each finding with its source and fix; concise (or text): one line each; json, sarif, github.",
)
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of each finding.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when problems are found.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only: no summary, no progress.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write .torchlint_cache/.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding.")
@click.option("--force-exclude", is_flag=True, help="Apply excludes to files named on the command line too (for pre-commit).")
@click.option("--stdin-filename", default=None, help="Lint standard input, reported under this file name.")
@click.option("--config", "config", type=click.Path(), default=None, help="Configuration file to use.")
@click.option("--show-files", is_flag=True, help="List the files that would be linted, and lint nothing.")
def check(
    paths: tuple[str, ...],
    fix: Optional[bool],
    unsafe_fixes: Optional[bool],
    diff: bool,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str,
    statistics: bool,
    exit_zero: bool,
    quiet: bool,
    jobs: Optional[int],
    no_cache: bool,
    add_noqa: bool,
    force_exclude: bool,
    stdin_filename: Optional[str],
    config: Optional[str],
    show_files: bool,
) -> None:
    """Lint PATHS (files or directories; default: the current directory)."""
    if statistics and diff:
        _fail("--statistics cannot be combined with --diff (the one counts findings, the other shows fixes)")
    try:
        settings = _settings(config, select, ignore, extend_select, fix, unsafe_fixes)
    except ConfigError as exc:
        _fail(str(exc))
    job = Job(
        settings=settings,
        fix=settings.fix,
        unsafe_fixes=settings.unsafe_fixes,
        diff=diff,
        use_cache=not no_cache,
    )
    if stdin_filename is not None or paths == ("-",):
        sys.exit(_check_stdin(job, stdin_filename or "-", output_format, statistics, exit_zero, quiet))

    items, problems = discover(paths or (".",), settings)
    if force_exclude:
        items = [i for i in items if not settings.is_excluded(i.path)]
    if show_files:
        for item in items:
            click.echo(safe(item.display))
        _print_problems([FileResult(path=p.display, error=p.message) for p in problems])
        sys.exit(EXIT_FINDINGS if problems else EXIT_CLEAN)
    results = [FileResult(path=p.display, error=p.message) for p in problems]
    interactive = sys.stderr.isatty() and not quiet and not os.environ.get("CI")
    progress = _Progress(interactive)
    cache_root = project_root(paths or (".",), settings.source) if not no_cache else None
    if add_noqa:
        job = Job(settings=settings, use_cache=False)
    collect_less()
    try:
        results.extend(run(items, job, jobs or default_jobs(), cache_root, progress))
    finally:
        progress.close()
    global _LINTED
    _LINTED = True
    if add_noqa:
        sys.exit(_add_noqa(items, results, quiet))

    report = Report(
        results,
        unsafe_fixes=settings.unsafe_fixes,
        fixing=job.fix and not diff,
        statistics=statistics,
        quiet=quiet,
        color=use_color(sys.stdout),
    )
    _print_problems(results)
    if diff:
        sys.exit(_print_diff(results, exit_zero, quiet))
    click.echo(renderer(output_format)(report), nl=False, color=report.color)
    sys.exit(EXIT_CLEAN if exit_zero or (report.count == 0 and not report.errors) else EXIT_FINDINGS)


def _fail(message: str) -> NoReturn:
    """A usage or configuration problem: one line on stderr, exit 2."""
    click.echo(f"torchlint: error: {safe(message)}", err=True)
    sys.exit(EXIT_USAGE)


def _print_problems(results: list[FileResult]) -> None:
    for result in results:
        if result.error:
            click.echo(f"{safe(result.path)}: error: {safe(result.error)}", err=True)
        for note in result.notes:
            click.echo(f"{safe(result.path)}: warning: {safe(note)}", err=True)


def _print_diff(results: list[FileResult], exit_zero: bool, quiet: bool) -> int:
    changed = [r for r in results if r.new_text is not None]
    for result in changed:
        click.echo(_safe_diff(unified_diff(result)), nl=False)
    if not quiet:
        fixes = sum(r.fixed for r in changed)
        click.echo(f"Would fix {fixes} problem{'s' if fixes != 1 else ''} in {len(changed)} file{'s' if len(changed) != 1 else ''}.", err=True)
    return EXIT_CLEAN if exit_zero or not changed else EXIT_FINDINGS


def _safe_diff(diff: str) -> str:
    """A diff whose file-name lines cannot drive the terminal (the source lines are the file's own)."""
    return "".join(
        safe(line.rstrip("\n")) + "\n" if line.startswith(("--- ", "+++ ")) else line for line in diff.splitlines(keepends=True)
    )


def _add_noqa(items: list[Discovered], results: list[FileResult], quiet: bool) -> int:
    by_display = {item.display: item for item in items}
    added = 0
    failed = False
    for result in results:
        item = by_display.get(result.path)
        if item is None or not result.findings:
            continue
        try:
            source = read_source(item.path, item.display)
            new_source, count = add_noqa(source, result)
            if count:
                write_fixed(item.path, new_source.to_bytes(), source.read_digest)
                added += count
        except SourceError as exc:
            result.error = str(exc)
        except OSError as exc:
            result.error = f"cannot write the file: {exc.strerror or exc}"
        failed = failed or result.error is not None
    _print_problems(results)
    if not quiet:
        click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.")
    return EXIT_FINDINGS if failed else EXIT_CLEAN


def _check_stdin(job: Job, name: str, output_format: str, statistics: bool, exit_zero: bool, quiet: bool) -> int:
    data = sys.stdin.buffer.read()
    try:
        source = decode_notebook(name, data) if name.endswith(".ipynb") else decode_python(name, data)
    except SourceError as exc:
        click.echo(f"{name}: error: {exc}", err=True)
        return EXIT_FINDINGS
    if job.settings.is_excluded(name) and name != "-":
        return EXIT_CLEAN
    result = process_source(source, job, write_to=None)
    if job.fix and not job.diff:
        # Editors read the fixed source from stdout; what is left to report goes to stderr.
        sys.stdout.buffer.write(result.new_text if result.new_text is not None else data)
        sys.stdout.flush()
        _print_problems([result])
        texts = {name: result.fixed_text if result.fixed_text is not None else source.text}
        remaining = Report(
            [result], unsafe_fixes=job.unsafe_fixes, fixing=True, statistics=statistics, quiet=quiet, texts=texts,
            color=use_color(sys.stderr),
        )
        click.echo(renderer(output_format)(remaining), nl=False, err=True, color=remaining.color)
        return EXIT_CLEAN if exit_zero or not result.findings else EXIT_FINDINGS
    report = Report(
        [result], unsafe_fixes=job.unsafe_fixes, statistics=statistics, quiet=quiet, texts={name: source.text},
        color=use_color(sys.stdout),
    )
    _print_problems([result])
    if job.diff:
        click.echo(_safe_diff(unified_diff(result)), nl=False)
        return EXIT_CLEAN if exit_zero or result.new_text is None else EXIT_FINDINGS
    click.echo(renderer(output_format)(report), nl=False, color=report.color)
    return EXIT_CLEAN if exit_zero or (not result.findings and not result.error) else EXIT_FINDINGS


@cli.command("rules")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--all", "show_all", is_flag=True, help="(Ignored: every rule is always listed.)", hidden=True)
def rules_command(output_format: str, show_all: bool) -> None:
    """List every rule, grouped by family."""
    rules = all_rules()
    if output_format == "json":
        payload = [
            {
                "code": r.code,
                "name": r.name,
                "family": r.family,
                "summary": r.summary,
                "message": r.message,
                "fix": r.fix_safety.value,
                "default_enabled": r.default_enabled,
                "url": r.url(),
            }
            for r in rules.values()
        ]
        click.echo(json.dumps(payload, indent=2))
        return
    families: dict[str, list] = {}
    for rule in rules.values():
        families.setdefault(rule.family, []).append(rule)
    name_width = max(len(r.name) for r in rules.values())
    for family, members in families.items():
        click.echo(family)
        for r in members:
            fix = {"none": "     ", "safe": "fix  ", "unsafe": "fix! ", "sometimes": "fix? "}[r.fix_safety.value]
            off = "" if r.default_enabled else " (off by default)"
            click.echo(f"  {r.code}  {fix} {r.name:<{name_width}}  {r.summary}{off}")
        click.echo("")
    click.echo("fix = safe autofix (--fix); fix! = unsafe autofix (--unsafe-fixes); fix? = safe or unsafe by case")


@cli.command("rule")
@click.argument("code")
def rule_command(code: str) -> None:
    """Print the reference page of a rule, by code (TL101) or name (dataloader-num-workers-zero)."""
    from torchlint.docs import render_page

    rules = all_rules()
    rule = rules.get(code.upper()) or next((r for r in rules.values() if r.name == code.lower()), None)
    if rule is None:
        _fail(f"unknown rule '{code}' (see `torchlint rules`)")
    click.echo(render_page(rule))


def _register_optimize() -> None:
    try:
        from torchlint.optimizer.command import optimize_command
    except ImportError:  # the optimizer's CLI is optional
        return
    cli.add_command(optimize_command, "optimize")


_register_optimize()


def _register_trace() -> None:
    from torchlint.trace.command import trace_command  # imports torch only when the command runs

    cli.add_command(trace_command, "trace")


_register_trace()


# Set once `check` has linted files: the process then holds only what that run built, which nothing needs
# torn down (the result cache and any written fix are finished before the report is printed).
_LINTED = False


def main_and_exit() -> None:
    """`main`, then, after a lint run, end the process at once: freeing the run's trees and analyses node by
    node on the way out cost about a twentieth of a run. Output is flushed and the exit status kept; anything
    unusual (a message as exit status, output that cannot be flushed) takes the normal way out."""
    try:
        main()
    except SystemExit as exc:
        if not _LINTED or not (exc.code is None or isinstance(exc.code, int)):
            raise
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            raise exc from None
        os._exit(exc.code or 0)


def main() -> None:
    # Not click's standalone mode, which turns Ctrl-C into exit code 1: an interrupted run exits 130.
    try:
        cli.main(prog_name="torchlint", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, click.Abort):
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:  # output piped into `head`: stop quietly
        sys.stderr.close()
        sys.exit(1)
