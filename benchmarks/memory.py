"""The memory an optimized model takes: tensor bytes it holds and the process's resident memory, with the original
model alive and after deleting it.

    python benchmarks/memory.py --models resnet50,bert --dtypes fp32,bf16

Each model in its own process (resident memory does not go back down within one). Tensor bytes count every
storage once (parameters, buffers, oneDNN-packed weights by their element count, the original tensors an
optimized model keeps for state_dict()); resident memory is read from /proc/self/statm after glibc's malloc_trim.
Models are built as benchmarks/zoo.py builds them (its packages are needed).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def resident_mb() -> float:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one(name: str, dtype: str) -> dict:
    import torch

    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import zoo

    import torchlint

    torch.set_num_threads(1)
    model, make_inputs = zoo.build(name)
    inputs = make_inputs(1)
    given = zoo.weight_megabytes(model)
    before = resident_mb()
    fast = torchlint.optimize(model, inputs, dtype="bf16" if dtype == "bf16" else None, measure=False)
    with torch.no_grad():
        zoo.call(fast, inputs)
    alive = resident_mb()
    del model
    gc.collect()
    gone = resident_mb()
    return {"model": name, "dtype": dtype, "weights_mb": given, "optimized_tensor_mb": zoo.weight_megabytes(fast),
            "rss_added_original_alive_mb": alive - before, "rss_added_original_deleted_mb": gone - before,
            "passes": torchlint.explain(fast).passes_applied}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--dtypes", default="fp32")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.one:
        name, dtype = options.one.split(":")
        print(json.dumps(one(name, dtype)))
        return
    print("| model | dtype | weights MB | optimized tensors MB | ratio | RSS added, original alive | "
          "RSS added, original deleted |")
    print("|---|---|---|---|---|---|---|")
    for name in options.models.split(","):
        for dtype in options.dtypes.split(","):
            out = subprocess.run([sys.executable, __file__, "--one", f"{name}:{dtype}"], capture_output=True, check=False,
                                 text=True, env={**os.environ, **zoo_allocator_env()})
            lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
            if not lines:
                print(f"| {name} | {dtype} | error: {out.stderr.strip().splitlines()[-1:]} |")
                continue
            r = json.loads(lines[-1])
            print(f"| {name} | {dtype} | {r['weights_mb']:.0f} | {r['optimized_tensor_mb']:.0f} | "
                  f"{r['optimized_tensor_mb'] / r['weights_mb']:.2f} | {r['rss_added_original_alive_mb']:+.0f} | "
                  f"{r['rss_added_original_deleted_mb']:+.0f} |", flush=True)


def zoo_allocator_env() -> dict:
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from zoo import ALLOCATOR_ENV

    return ALLOCATOR_ENV


if __name__ == "__main__":
    main()
