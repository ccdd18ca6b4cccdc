"""`torchlint optimize FILE.py:FACTORY --input-shape 16,3,224,224`: optimize a model, print the report and timings.

Only click and the standard library are imported here; torch is imported when the command runs.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time

import click


class CommandError(click.ClickException):
    """A one-line error (printed as `Error: ...`), exit code 2, no traceback."""

    exit_code = 2


def _parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.replace("x", ",").split(",") if part.strip())
    except ValueError:
        raise CommandError(f"bad --input-shape {text!r}: expected comma-separated integers, e.g. 16,3,224,224")
    if not shape or any(size <= 0 for size in shape):
        raise CommandError(f"bad --input-shape {text!r}: expected positive integers, e.g. 16,3,224,224")
    return shape


def load_factory(target: str):
    """The callable named by FILE.py:FACTORY."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise CommandError(f"expected FILE.py:FACTORY, got {target!r}")
    if not os.path.isfile(path):
        raise CommandError(f"no such file: {path}")
    module_name = "_torchlint_model_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CommandError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    directory = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, directory)  # so the file can import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - any failure of user code is one line
        raise CommandError(f"importing {path} failed: {type(error).__name__}: {_first_line(error)}")
    finally:
        sys.path.remove(directory)
    factory = getattr(module, name, None)
    if factory is None:
        raise CommandError(f"{path} has no {name!r}")
    if not callable(factory):
        raise CommandError(f"{path}:{name} is not callable")
    return factory


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


@click.command("optimize")
@click.argument("target", metavar="FILE.py:FACTORY")
@click.option("--input-shape", "input_shapes", multiple=True, required=True,
              help="Shape of a random example input, e.g. 16,3,224,224 (repeat for several inputs).")
@click.option("--autocast", type=click.Choice(["bf16", "fp16", "auto"]), default=None,
              help="Also run in mixed precision (bf16 on CPU; auto picks for the device).")
@click.option("--device", default="cpu", show_default=True, help="Device to run on, e.g. cpu or cuda.")
@click.option("--runs", type=click.IntRange(1), default=20, show_default=True, help="Timed runs of each variant.")
@click.option("--warmup", type=click.IntRange(0), default=3, show_default=True, help="Untimed runs first.")
@click.option("--no-verify", is_flag=True, help="Do not compare with the original model after each pass.")
@click.option("--time-budget", type=click.FloatRange(min=0), default=60.0, show_default=True, metavar="SECONDS",
              help="Seconds optimize() may take; once spent, no further pass or layer is tried and the report says "
                   "what was left (0: no bound).")
@click.option("--verbose", "-v", is_flag=True, help="Report every decision, layer by layer.")
def optimize_command(target, input_shapes, autocast, device, runs, warmup, no_verify, time_budget, verbose):
    """Optimize the nn.Module returned by FACTORY() in FILE.py (in eval mode) and compare its speed with eager.

    FILE.py is imported and FACTORY() is called: this runs their code, as `python FILE.py` would. Run it
    only on code you trust.

    Prints what was rewritten and why, then the median latency of eager PyTorch under no_grad and of the optimized
    model, measured in alternation.
    """
    shapes = [_parse_shape(s) for s in input_shapes]
    if importlib.util.find_spec("torch") is None:  # before FILE runs: it may need torch itself
        raise CommandError("torch is not installed: pip install 'torchlint[optimize]'")
    factory = load_factory(target)
    import torch
    from torchlint.optimizer import explain, optimize

    try:
        torch_device = torch.device(device)
    except RuntimeError as error:
        raise CommandError(f"bad --device {device!r}: {_first_line(error)}")
    if torch_device.type == "cuda" and not torch.cuda.is_available():
        raise CommandError("--device cuda: no CUDA device is available")

    try:
        model = factory()
    except Exception as error:  # noqa: BLE001
        raise CommandError(f"{target}() failed: {type(error).__name__}: {_first_line(error)}")
    if not isinstance(model, torch.nn.Module):
        raise CommandError(f"{target}() returned {type(model).__name__}, not a torch.nn.Module")
    model = model.eval().to(torch_device)
    inputs = tuple(torch.randn(shape, device=torch_device) for shape in shapes)
    try:
        with torch.no_grad():
            expected = model(*inputs)
    except Exception as error:  # noqa: BLE001
        shown = " and ".join("x".join(map(str, s)) for s in shapes)
        raise CommandError(f"the model fails on input {shown}: {type(error).__name__}: {_first_line(error)}")

    fast = optimize(model, inputs, dtype=autocast, verify=not no_verify, time_budget=time_budget or None)
    report = explain(fast)
    click.echo(report.format(verbose=verbose))
    click.echo()

    timings = _time_interleaved({"eager (no_grad)": model, "torchlint": fast}, inputs, runs, warmup, torch_device)
    with torch.no_grad():
        error = _relative_error(expected, fast(*inputs))
    shown = ", ".join("x".join(map(str, s)) for s in shapes)
    click.echo(f"Timing: input {shown} on {torch_device}, median of {runs} interleaved runs")
    eager = timings["eager (no_grad)"]
    click.echo(f"{'variant':<18}{'median ms':>12}{'speed-up':>11}")
    for name, seconds in timings.items():
        click.echo(f"{name:<18}{seconds * 1000:>12.2f}{eager / seconds:>10.2f}x")
    click.echo(f"transform time {report.transform_seconds:.2f} s, max relative error {error:.1e}")


def _time_interleaved(variants: dict, inputs: tuple, runs: int, warmup: int, device) -> dict:
    import torch

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    samples = {name: [] for name in variants}
    with torch.no_grad():
        for _ in range(warmup):
            for fn in variants.values():
                fn(*inputs)
        for _ in range(runs):
            for name, fn in variants.items():
                sync()
                started = time.perf_counter()
                fn(*inputs)
                sync()
                samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def _relative_error(expected, actual) -> float:
    from torch.utils._pytree import tree_flatten

    worst = 0.0
    for a, b in zip(tree_flatten(expected)[0], tree_flatten(actual)[0]):
        if hasattr(a, "double") and a.is_floating_point() and a.numel():
            scale = a.double().abs().max().item() or 1.0
            worst = max(worst, (a.double() - b.double()).abs().max().item() / scale)
    return worst
