"""Is a model optimized on one input shape still faster than eager on others?

    python benchmarks/shapes.py --models resnet50,convnext_tiny,mobilenet_v3_large --example 8x224x224 \
        --shapes 1x224x224,8x224x224,1x256x320,8x256x320

Each model is optimized once, on a random batch of the --example shape (as a user would, with one example), then
eager and the optimized model run in alternation on every --shape (under no_grad, one torch thread, the first call
of each shape untimed); each cell is eager's median latency over the optimized model's (higher is faster), in the
same dtype (bf16: eager under torch.autocast). Models are built as benchmarks/zoo.py builds them (its packages are
needed). Writes benchmarks/results/shapes-cpu.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _shape(text: str) -> tuple[int, int, int]:
    batch, height, width = (int(part) for part in text.split("x"))
    return batch, height, width


def measure(name: str, example: tuple, shapes: list[tuple], dtype: str, rounds: int) -> dict:
    import torch

    import zoo
    from torchlint.optimizer import explain, optimize
    from torchlint.optimizer.modules import AutocastForward

    model, _ = zoo.build(name)
    batch, height, width = example
    started = time.perf_counter()
    fast = optimize(model, torch.randn(batch, 3, height, width), dtype="bf16" if dtype == "bf16" else None,
                    time_budget=None)
    seconds = time.perf_counter() - started
    eager = AutocastForward(model, "cpu", torch.bfloat16) if dtype == "bf16" else model
    row = {"model": name, "dtype": dtype, "transform": seconds, "passes": explain(fast).passes_applied, "cells": {}}
    with torch.no_grad():
        for shape in shapes:
            x = torch.randn(shape[0], 3, shape[1], shape[2])
            # first calls (oneDNN primitives for the shape) untimed; a segmentation model's first output compared
            reference, result = zoo.first_tensor(eager(x)).float(), zoo.first_tensor(fast(x)).float()
            error = ((result - reference).abs().max() / reference.abs().max()).item()
            samples = {"eager": [], "torchlint": []}
            for r in range(rounds):
                for kind in (("eager", "torchlint") if r % 2 == 0 else ("torchlint", "eager")):
                    fn = eager if kind == "eager" else fast
                    begin = time.perf_counter()
                    fn(x)
                    samples[kind].append(time.perf_counter() - begin)
            medians = {k: statistics.median(v) for k, v in samples.items()}
            row["cells"]["x".join(map(str, shape))] = (medians["eager"] * 1e3, medians["eager"] / medians["torchlint"],
                                                        error)
            print(name, dtype, shape, row["cells"]["x".join(map(str, shape))], flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,convnext_tiny,mobilenet_v3_large")
    parser.add_argument("--example", default="8x224x224", help="BATCHxHEIGHTxWIDTH optimize() sees")
    parser.add_argument("--shapes", default="1x224x224,8x224x224,1x256x320,8x256x320")
    parser.add_argument("--dtypes", default="fp32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", default=os.path.join(ROOT, "benchmarks", "results", "shapes-cpu.md"))
    options = parser.parse_args()
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from zoo import ALLOCATOR_ENV

    if any(os.environ.get(k) != v for k, v in ALLOCATOR_ENV.items()):
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **ALLOCATOR_ENV})
    import torch

    torch.set_num_threads(1)
    shapes = [_shape(s) for s in options.shapes.split(",")]
    load_before = os.getloadavg()
    rows = [measure(name, _shape(options.example), shapes, dtype, options.rounds)
            for name in options.models.split(",") for dtype in options.dtypes.split(",")]
    load_after = os.getloadavg()
    names = ["x".join(map(str, s)) for s in shapes]
    lines = ["# An optimized model on input shapes other than its example (cpu)", "",
             f"Run: `python benchmarks/shapes.py {' '.join(sys.argv[1:])}`; torch {torch.__version__}, one thread; "
             f"optimized on a {options.example} example; median of {options.rounds} interleaved rounds per shape; "
             f"load averages (1, 5, 15 min) {', '.join(f'{v:.1f}' for v in load_before)} before, "
             f"{', '.join(f'{v:.1f}' for v in load_after)} after (a shared 2-core machine).", "",
             "Each cell: eager ms / speed-up of the optimized model over eager (higher is faster) / max relative "
             "error.", "", "| model | dtype | transform s | " + " | ".join(names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for row in rows:
        cells = [f"{ms:.1f} / {speedup:.2f}x / {error:.0e}" for ms, speedup, error in row["cells"].values()]
        lines.append(f"| {row['model']} | {row['dtype']} | {row['transform']:.0f} | " + " | ".join(cells) + " |")
    lines += ["", "Passes kept: " + "; ".join(f"{r['model']} {r['dtype']}: {', '.join(r['passes']) or 'none'}"
                                             for r in rows)]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(options.output, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
