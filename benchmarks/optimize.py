"""Speed of torchlint.optimize against its peers, on every fixture model, in one interleaved run.

    python benchmarks/optimize.py     # all models, batch 1 and 16; writes benchmarks/results/optimize-cpu.md
    python benchmarks/optimize.py --skip-compile --models resnet18,mlp --batches 16 --runs 5   # a quick look
    python benchmarks/optimize.py --device cuda

Variants, all under torch.no_grad() in eval mode: eager; torch.fx.experimental.optimization.fuse;
fx optimize_for_inference (CPU); torch.jit.script + freeze + optimize_for_inference; torch.compile (inductor);
torch.compile with freezing under bf16 autocast; torchlint.optimize in fp32; torchlint.optimize(autocast="bf16").
Each cell is the median latency of eager divided by the variant's (higher is faster), all variants measured
in turn within each round so that machine load affects them alike. Errors are max|y - y_eager| / max|y_eager|.
BatchNorm statistics are randomised (fixed seed) so folding does real work, as with a trained model.

glibc's default malloc returns freed memory to the OS eagerly, which makes eager conv nets page-fault on every call
and flatters variants that allocate less; the script re-executes itself with
MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_MMAP_THRESHOLD_=33554432 unless --default-allocator is given.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import sys
import time

ALLOCATOR_ENV = {"MALLOC_TRIM_THRESHOLD_": "68719476736", "MALLOC_MMAP_THRESHOLD_": "33554432"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (module, factory, input shape without the batch dimension)
MODELS = {
    "resnet18": ("resnet", "resnet18", (3, 224, 224)),
    "resnet50": ("resnet", "resnet50", (3, 224, 224)),
    "mobilenet_v2": ("mobilenet", "mobilenet_v2", (3, 224, 224)),
    "vgg_small": ("vgg", "vgg_small", (3, 224, 224)),
    "mlp": ("mlp", "mlp", (512,)),
    "transformer": ("transformer", "classifier", (64, 256)),
    "branchy": ("branchy", "branchy", (3, 224, 224)),
}
CONV_NETS = {"resnet18", "resnet50", "mobilenet_v2", "vgg_small", "branchy"}

VARIANTS = ["fx fuse", "fx optimize_for_inference", "jit freeze+ofi", "torch.compile", "compile freeze bf16",
            "torchlint fp32", "torchlint bf16"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: " + ", ".join(MODELS))
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--runs", type=int, default=11, help="timed rounds (batch 1 gets 3x as many)")
    parser.add_argument("--skip-compile", action="store_true", help="leave out the torch.compile variants")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", default=None, help="Markdown file to write (default: results/optimize-DEVICE.md)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--default-allocator", action="store_true", help="do not re-execute with the tuned malloc")
    options = parser.parse_args()

    if not options.default_allocator and any(os.environ.get(k) != v for k, v in ALLOCATOR_ENV.items()):
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **ALLOCATOR_ENV})

    import torch

    if options.threads:
        torch.set_num_threads(options.threads)
    sys.path.insert(0, ROOT)
    models = [m.strip() for m in options.models.split(",") if m.strip()]
    batches = [int(b) for b in options.batches.split(",")]
    variants = [v for v in VARIANTS if not (options.skip_compile and "compile" in v)]
    device = torch.device(options.device)
    if device.type != "cpu":
        variants = [v for v in variants if v != "fx optimize_for_inference"]  # CPU (mkldnn) only

    load_before = os.getloadavg()[0]
    rows = []
    for name in models:
        for batch in batches:
            rows.append(measure(name, batch, variants, device, options.runs * (3 if batch == 1 else 1)))
            print(format_row(rows[-1], variants), flush=True)
    load_after = os.getloadavg()[0]

    text = render(rows, variants, machine_line(torch, device), load_before, load_after, options)
    print()
    print(text)
    path = options.output or os.path.join(ROOT, "benchmarks", "results", f"optimize-{device.type}.md")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    print(f"\nwritten to {os.path.relpath(path)}")


def build(name: str, device):
    import importlib

    import torch

    module_name, factory, shape = MODELS[name]
    torch.manual_seed(0)
    model = getattr(importlib.import_module(f"fixtures.models.{module_name}"), factory)()
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval().to(device), shape


def make_variant(kind: str, model, x, device):
    """(callable, transform seconds) for one variant, or raises if the peer cannot handle the model."""
    import torch

    fresh = copy.deepcopy(model)
    started = time.perf_counter()
    if kind == "fx fuse":
        from torch.fx.experimental.optimization import fuse

        fn = fuse(fresh)
    elif kind == "fx optimize_for_inference":
        from torch.fx.experimental.optimization import optimize_for_inference

        fn = optimize_for_inference(fresh)
    elif kind == "jit freeze+ofi":
        with torch.no_grad():
            fn = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(fresh)))
            fn(x)  # jit specialises on the first calls; count them as transform time
            fn(x)
    elif kind == "torch.compile":
        compiled = torch.compile(fresh)
        with torch.no_grad():
            compiled(x)  # compiles here
        fn = compiled
    elif kind == "compile freeze bf16":
        import torch._inductor.config as inductor_config

        compiled = torch.compile(fresh)

        def fn(inp, compiled=compiled):
            with torch.autocast(device.type, dtype=torch.bfloat16):
                return compiled(inp)

        with inductor_config.patch(freezing=True), torch.no_grad():
            fn(x)
    elif kind == "torchlint fp32":
        from torchlint.optimizer import optimize

        fn = optimize(fresh, x, inplace=True)
    elif kind == "torchlint bf16":
        from torchlint.optimizer import optimize

        fn = optimize(fresh, x, inplace=True, autocast="bf16")
    else:
        raise ValueError(kind)
    sync(device)
    return fn, time.perf_counter() - started


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(name: str, batch: int, variants: list[str], device, runs: int) -> dict:
    import torch

    model, shape = build(name, device)
    x = torch.randn(batch, *shape, device=device)
    with torch.no_grad():
        reference = model(x).float()
    fns, row = {"eager": model}, {"model": name, "batch": batch, "speedup": {}, "error": {}, "transform": {},
                                  "note": {}}
    for kind in variants:
        if kind.startswith("torch.compile") or kind.startswith("compile"):
            torch._dynamo.reset()
        try:
            fn, seconds = make_variant(kind, model, x, device)
            with torch.no_grad():
                y = fn(x).float()
        except Exception as error:  # noqa: BLE001 - a peer that cannot handle a model gets "n/a"
            row["note"][kind] = f"{type(error).__name__}: {str(error).splitlines()[0][:80] if str(error) else ''}"
            continue
        fns[kind] = fn
        row["transform"][kind] = seconds
        row["error"][kind] = ((y - reference).abs().max() / reference.abs().max()).item()
        if kind.startswith("torchlint"):
            from torchlint.optimizer import explain

            report = explain(fn)
            undone = [e.pass_name for e in report.rolled_back]
            if undone:
                row["note"][kind] = "rolled back: " + ", ".join(undone)

    times = {k: [] for k in fns}
    with torch.no_grad():
        for fn in fns.values():  # warm up
            fn(x)
            fn(x)
        for _ in range(runs):
            for kind, fn in fns.items():
                sync(device)
                started = time.perf_counter()
                fn(x)
                sync(device)
                times[kind].append(time.perf_counter() - started)
    eager = statistics.median(times["eager"])
    row["eager_ms"] = eager * 1000
    for kind in fns:
        if kind != "eager":
            row["speedup"][kind] = eager / statistics.median(times[kind])
    return row


def format_row(row: dict, variants: list[str]) -> str:
    cells = [f"{v}={row['speedup'][v]:.2f}x" if v in row["speedup"] else f"{v}=n/a" for v in variants]
    return f"{row['model']} batch {row['batch']}: eager {row['eager_ms']:.1f} ms, " + ", ".join(cells)


def machine_line(torch, device) -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    allocator = ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in ALLOCATOR_ENV)
    gpu = f", GPU {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    return (f"{cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch thread{'s' if torch.get_num_threads() != 1 else ''}{gpu}; torch {torch.__version__}; "
            f"python {platform.python_version()}; allocator: {allocator}")


def render(rows, variants, machine, load_before, load_after, options) -> str:
    load = (f"load average {load_before:.1f} before, {load_after:.1f} after on {os.cpu_count()} cores"
            + (" (measured with other load present: expect noise)" if max(load_before, load_after) > 1.5 else ""))
    lines = [
        f"# torchlint.optimize vs peers ({options.device})",
        "",
        f"Machine: {machine}.  ",
        f"Run: `{' '.join(['python', 'benchmarks/optimize.py'] + sys.argv[1:])}`, median of {options.runs} interleaved "
        f"rounds (batch 1: {options.runs * 3}); {load}.",
        "",
        "## Speed-up over eager (no_grad); higher is faster",
        "",
        "| model | batch | eager ms | " + " | ".join(variants) + " |",
        "|---|---|---|" + "---|" * len(variants),
    ]
    for row in rows:
        cells = [f"{row['speedup'][v]:.2f}" if v in row["speedup"] else "n/a" for v in variants]
        lines.append(f"| {row['model']} | {row['batch']} | {row['eager_ms']:.1f} | " + " | ".join(cells) + " |")
    lines += ["", "## Max relative error vs eager fp32", "", "| model | batch | " + " | ".join(variants) + " |",
              "|---|---|" + "---|" * len(variants)]
    for row in rows:
        cells = [f"{row['error'][v]:.1e}" if v in row["error"] else "n/a" for v in variants]
        lines.append(f"| {row['model']} | {row['batch']} | " + " | ".join(cells) + " |")
    lines += ["", "## Transform time, seconds (compile variants: compile time of the first call)", "",
              "| model | batch | " + " | ".join(variants) + " |", "|---|---|" + "---|" * len(variants)]
    for row in rows:
        cells = [f"{row['transform'][v]:.2f}" if v in row["transform"] else "n/a" for v in variants]
        lines.append(f"| {row['model']} | {row['batch']} | " + " | ".join(cells) + " |")
    notes = [f"- {row['model']} batch {row['batch']}, {kind}: {note}"
             for row in rows for kind, note in row["note"].items()]
    if notes:
        lines += ["", "## Notes", ""] + notes
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
