"""optimize() composed with torch.compile and torch.jit.trace, against each alone, on fixture models.

    python benchmarks/compose.py

Models from fixtures/models (torch.nn only): resnet18 on 8x3x64x64 and a transformer encoder on 8x32x256 (captured
with torch.export). Variants run in alternation under no_grad, one torch thread, after two untimed calls (the
compile happens there); each cell is eager's median latency over the variant's (higher is faster). Writes
benchmarks/results/compose-cpu.md.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = 15


def variants(model, x):
    import torch

    from torchlint.optimizer import optimize

    fast = optimize(model, x, time_budget=None)
    with torch.no_grad():
        yield "torchlint", fast
        torch._dynamo.reset()
        yield "torch.compile", torch.compile(model)
        yield "torch.compile(torchlint)", torch.compile(fast)
        yield "jit.trace(torchlint)", torch.jit.trace(fast, x)


def main() -> None:
    import torch

    sys.path.insert(0, ROOT)
    from fixtures.models import resnet, transformer

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cases = [("resnet18", resnet.resnet18().eval(), torch.randn(8, 3, 64, 64)),
             ("transformer encoder", transformer.encoder().eval(), torch.randn(8, 32, 256))]
    load_before = os.getloadavg()
    rows = []
    for name, model, x in cases:
        fns, setup = {"eager": model}, {}
        for kind, fn in variants(model, x):
            began = time.perf_counter()
            with torch.no_grad():
                fn(x), fn(x)  # compiles here
            setup[kind] = time.perf_counter() - began
            fns[kind] = fn
        samples = {k: [] for k in fns}
        names = list(fns)
        with torch.no_grad():
            for r in range(ROUNDS):
                for k in names[r % len(names):] + names[:r % len(names)]:
                    began = time.perf_counter()
                    fns[k](x)
                    samples[k].append(time.perf_counter() - began)
        medians = {k: statistics.median(v) for k, v in samples.items()}
        rows.append((name, medians, setup))
        print(name, {k: round(medians["eager"] / v, 2) for k, v in medians.items()}, flush=True)
    load_after = os.getloadavg()
    kinds = [k for k in rows[0][1] if k != "eager"]
    lines = ["# optimize() composed with torch.compile and torch.jit.trace (cpu)", "",
             f"Run: `python benchmarks/compose.py`; torch {torch.__version__}, one thread, median of {ROUNDS} "
             f"interleaved rounds; load averages {', '.join(f'{v:.1f}' for v in load_before)} before, "
             f"{', '.join(f'{v:.1f}' for v in load_after)} after (a shared 2-core machine).", "",
             "Speed-up over eager (higher is faster); in brackets, seconds of the first two calls (compilation).", "",
             "| model | eager ms | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]
    for name, medians, setup in rows:
        lines.append(f"| {name} | {medians['eager'] * 1e3:.1f} | " + " | ".join(
            f"{medians['eager'] / medians[k]:.2f} ({setup[k]:.0f} s)" for k in kinds) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(ROOT, "benchmarks", "results", "compose-cpu.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
