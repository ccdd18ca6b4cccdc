"""torchlint.optimize on real architectures (torchvision, timm, transformers) against its peers, in one process.

    python benchmarks/zoo.py                       # every model; writes benchmarks/results/zoo-cpu.md
    python benchmarks/zoo.py --models resnet50,bert --batches 1 --dtypes fp32 --skip-compile   # a quick look

Models are built offline from their configurations with random weights (BatchNorm statistics randomised, as
after training); nothing is downloaded. Each row is one model at one batch size in one dtype; variants run in
turn within each round (interleaved), under torch.no_grad() in eval mode, and each cell is eager's median latency
divided by the variant's (higher is faster). bf16 rows compare everything with eager under bf16 autocast.
Variants: eager; torch.fx.experimental.optimization.fuse (fp32); torch.jit.trace + freeze +
optimize_for_inference (fp32); the model cast with .bfloat16() (bf16); torch.jit.trace + freeze under autocast (bf16);
torch.compile (inductor; bf16: under autocast); torchlint.optimize.

The packages are for this script only (the tests never need them): install them without letting pip touch torch,
e.g. `pip download --no-deps "torchvision<0.29"` (0.28 is the release for torch 2.13) then `pip install --no-deps`
it and timm, and `pip install transformers` (no torch dependency). torchvision's wheel for torch 2.13 is a CUDA
build whose C++ operators do not load with the CPU torch, and `import torchvision` then fails on the missing
`torchvision::nms`: this script registers pure-torch stand-ins for `nms` and `qnms` with torch.library first
(classification and segmentation models never call them).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOCATOR_ENV = {"MALLOC_TRIM_THRESHOLD_": "68719476736", "MALLOC_MMAP_THRESHOLD_": "33554432"}

# name: (library, builder, input kind)
MODELS = {
    "resnet18": ("torchvision", "resnet18", "image"),
    "resnet50": ("torchvision", "resnet50", "image"),
    "mobilenet_v3_large": ("torchvision", "mobilenet_v3_large", "image"),
    "efficientnet_b0": ("torchvision", "efficientnet_b0", "image"),
    "densenet121": ("torchvision", "densenet121", "image"),
    "regnet_y_400mf": ("torchvision", "regnet_y_400mf", "image"),
    "convnext_tiny": ("torchvision", "convnext_tiny", "image"),
    "vit_b_16": ("torchvision", "vit_b_16", "image"),
    "shufflenet_v2": ("torchvision", "shufflenet_v2_x1_0", "image"),
    "squeezenet": ("torchvision", "squeezenet1_1", "image"),
    "googlenet": ("torchvision", "googlenet", "image"),
    "deeplabv3_mobilenet": ("torchvision", "deeplabv3_mobilenet_v3_large", "image"),
    "fcn_resnet50": ("torchvision", "fcn_resnet50", "image"),
    "fasterrcnn_mobilenet_v3": ("torchvision", "fasterrcnn_mobilenet_v3_large_fpn", "image"),
    "timm_resnet50d": ("timm", "resnet50d", "image"),
    "timm_efficientnet_b0": ("timm", "efficientnet_b0", "image"),
    "timm_mobilevitv2_050": ("timm", "mobilevitv2_050", "image"),
    "timm_convnext_nano": ("timm", "convnext_nano", "image"),
    "timm_vit_tiny": ("timm", "vit_tiny_patch16_224", "image"),
    "timm_vit_small": ("timm", "vit_small_patch16_224", "image"),
    "timm_regnety_008": ("timm", "regnety_008", "image"),
    "bert": ("transformers", "bert", "tokens"),
    "gpt2": ("transformers", "gpt2", "tokens"),
}
VARIANTS = ["fx fuse", "jit freeze+ofi", "bf16 weights", "jit freeze (autocast)", "torch.compile", "torchlint"]
FP32_ONLY = {"fx fuse", "jit freeze+ofi"}
BF16_ONLY = {"bf16 weights", "jit freeze (autocast)"}
OWN_PRECISION = {"torchlint", "bf16 weights"}  # run as they are, not under the row's autocast


def register_torchvision_standins() -> None:
    """Pure-torch `torchvision::nms` and `qnms`, so that the CUDA build of torchvision imports on CPU torch."""
    import torch

    try:
        torch.ops.torchvision.nms
        return
    except (AttributeError, RuntimeError):
        pass
    library = torch.library.Library("torchvision", "DEF")
    for name in ("nms", "qnms"):
        library.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        library.impl(name, _nms, "CompositeExplicitAutograd")
    register_torchvision_standins.library = library  # keep the registration alive


def _nms(boxes, scores, iou_threshold):
    import torch

    order, keep = scores.argsort(descending=True), []
    while order.numel():
        best, rest = order[0], order[1:]
        keep.append(best)
        lower = torch.maximum(boxes[best, :2], boxes[rest, :2])
        upper = torch.minimum(boxes[best, 2:], boxes[rest, 2:])
        inter = (upper - lower).clamp(min=0).prod(1)
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        order = rest[inter / (area[best] + area[rest] - inter) <= iou_threshold]
    return torch.stack(keep) if keep else torch.empty(0, dtype=torch.long)


def build(name: str):
    """(model in eval mode, a function batch -> example inputs)."""
    import torch

    library, builder, kind = MODELS[name]
    torch.manual_seed(0)
    register_torchvision_standins()  # transformers imports torchvision too, when it is installed
    if library == "torchvision":
        import torchvision
        import torchvision.ops.boxes

        # Detection models call torchvision.ops.nms, which checks for the C++ operators before calling the
        # registered one: let it call the stand-in (roi_align has a pure-torch path of its own).
        torchvision.ops.boxes._assert_has_ops = lambda: None

        extra = {"weights_backbone": None} if any(k in builder for k in ("deeplab", "fcn", "rcnn")) else {}
        if "rcnn" in builder and os.environ.get("ZOO_RCNN_ALL_BOXES"):
            # Random weights score every box below the default threshold (no detections); keeping them all gives
            # near-tied scores, whose order rounding changes.
            extra["box_score_thresh"] = 0.0
        model = torchvision.models.get_model(builder, weights=None, **extra)
    elif library == "timm":
        import timm

        model = timm.create_model(builder, pretrained=False)
    else:
        model = _transformer(builder)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            with torch.no_grad():
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
        if isinstance(m, torch.nn.Linear) and not m.weight.any():
            # Zero-initialised heads (torchvision's ViT) make every output zero: the error columns would compare
            # zeros and read 0/0. Trained heads are not zero.
            with torch.no_grad():
                m.weight.normal_(0.0, 0.02)
    if kind == "image":
        return model.eval(), lambda batch: torch.randn(batch, 3, 224, 224)
    generator = torch.Generator().manual_seed(0)
    # No key/value cache for GPT-2: the latency of one forward is what is measured, and the cache object's tensors
    # are not outputs torchlint can cast back after autocast.
    extra = {"use_cache": False} if builder == "gpt2" else {}
    return model.eval(), lambda batch: {
        "input_ids": torch.randint(0, 1000, (batch, 128), generator=generator),
        "attention_mask": torch.ones(batch, 128, dtype=torch.long),
        **extra,
    }


def _transformer(kind: str):
    import transformers

    if kind == "bert":
        config = transformers.BertConfig(num_hidden_layers=6, num_labels=2)
        return transformers.BertForSequenceClassification(config)
    config = transformers.GPT2Config(n_layer=6)
    return transformers.GPT2LMHeadModel(config)


def call(fn, inputs):
    return fn(**inputs) if isinstance(inputs, dict) else fn(inputs)


def first_tensor(output):
    import torch
    from torch.utils._pytree import tree_flatten

    if hasattr(output, "to_tuple"):  # transformers' ModelOutput
        output = output.to_tuple()
    if isinstance(output, dict):
        output = list(output.values())
    leaves = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor)]
    return leaves[0].float()


def make_variant(kind: str, model, inputs, dtype: str, time_budget: float | None = 60.0):
    """(callable, transform seconds, note) for one variant; raises when the peer cannot handle the model."""
    import torch

    fresh = copy.deepcopy(model)
    started = time.perf_counter()
    note = ""
    if kind == "fx fuse":
        from torch.fx.experimental.optimization import fuse

        fn = fuse(fresh)
    elif kind == "jit freeze+ofi":
        with torch.no_grad():
            if isinstance(inputs, dict):
                traced = torch.jit.trace(fresh, example_kwarg_inputs=inputs, strict=False)
            else:
                traced = torch.jit.trace(fresh, inputs, strict=False)
            fn = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
            call(fn, inputs)
            call(fn, inputs)
    elif kind == "bf16 weights":  # the whole model cast to bfloat16, float inputs too
        fresh = fresh.bfloat16()

        def fn(*args, **kwargs):
            cast = [a.bfloat16() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
            return fresh(*cast, **kwargs)
    elif kind == "jit freeze (autocast)":
        fresh.requires_grad_(False)  # else freezing refuses autocast's cast copies of the weights as constants
        with torch.no_grad(), _autocast(dtype):
            if isinstance(inputs, dict):
                traced = torch.jit.trace(fresh, example_kwarg_inputs=inputs, strict=False)
            else:
                traced = torch.jit.trace(fresh, inputs, strict=False)
            fn = torch.jit.freeze(traced)
            call(fn, inputs)
            call(fn, inputs)
    elif kind == "torch.compile":
        torch._dynamo.reset()
        fn = torch.compile(fresh)
        with torch.no_grad(), _autocast(dtype):
            call(fn, inputs)  # compiles here
    elif kind == "torchlint":
        from torchlint.optimizer import explain, optimize

        fn = optimize(fresh, inputs if isinstance(inputs, dict) else inputs, inplace=True,
                      dtype="bf16" if dtype == "bf16" else None, time_budget=time_budget)
        report = explain(fn)
        note = ", ".join(report.passes_applied) or "unchanged"
        if report.speedup:
            note += f"; measured {report.speedup:.2f}x"
        if report.untraced:
            note += f"; {len(report.untraced)} modules not traced"
    else:
        raise ValueError(kind)
    seconds = time.perf_counter() - started
    return fn, seconds, note


class _autocast:
    def __init__(self, dtype: str) -> None:
        import torch

        self.context = torch.autocast("cpu", dtype=torch.bfloat16) if dtype == "bf16" else None

    def __enter__(self):
        if self.context is not None:
            self.context.__enter__()

    def __exit__(self, *exc):
        if self.context is not None:
            return self.context.__exit__(*exc)


def weight_megabytes(model) -> float:
    """Memory held by a model's tensors, counting each storage once: parameters, buffers, torchlint's kept
    originals and oneDNN-packed weights."""
    from torchlint.optimizer.footprint import tensor_bytes

    return tensor_bytes(model) / 2**20


def measure_row(name: str, batch: int, dtype: str, variants: list[str], rounds: int,
                time_budget: float | None = 60.0) -> dict:
    import torch

    model, make_inputs = build(name)
    inputs = make_inputs(batch)
    with torch.no_grad(), _autocast(dtype):
        reference = first_tensor(call(model, inputs))
    row = {"model": name, "batch": batch, "dtype": dtype, "speedup": {}, "error": {}, "transform": {}, "note": {},
           "memory": {"eager": weight_megabytes(model)}}
    fns = {"eager": model}
    for kind in variants:
        if (dtype == "bf16" and kind in FP32_ONLY) or (dtype != "bf16" and kind in BF16_ONLY):
            continue
        try:
            fn, seconds, note = make_variant(kind, model, inputs, dtype, time_budget)
            with torch.no_grad(), _autocast("fp32" if kind in OWN_PRECISION else dtype):
                y = first_tensor(call(fn, inputs))
        except Exception as error:  # noqa: BLE001 - a peer that cannot handle a model gets its error listed
            message = str(error).strip().splitlines()[0][:120] if str(error).strip() else ""
            row["note"][kind] = f"error: {type(error).__name__}: {message}"
            continue
        fns[kind] = fn
        row["transform"][kind] = seconds
        row["error"][kind] = ((y - reference).abs().max() / reference.abs().max()).item() if y.numel() else 0.0
        if note:
            row["note"][kind] = note
        if kind == "torchlint":
            row["memory"][kind] = weight_megabytes(fn)

    samples = {k: [] for k in fns}
    names = list(fns)
    with torch.no_grad():
        for k in names:
            with _autocast("fp32" if k in OWN_PRECISION else dtype):
                call(fns[k], inputs)  # warm-up
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]  # rotate who runs first
            for k in order:
                with _autocast("fp32" if k in OWN_PRECISION else dtype):
                    started = time.perf_counter()
                    call(fns[k], inputs)
                    samples[k].append(time.perf_counter() - started)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    row["eager_ms"] = medians["eager"] * 1e3
    for k in fns:
        if k != "eager":
            row["speedup"][k] = medians["eager"] / medians[k]
    return row


def render(rows: list[dict], variants: list[str], header: str) -> str:
    def cell(value, fmt):
        return "n/a" if value is None else format(value, fmt)

    lines = [header, "", "## Speed-up over eager (same dtype); higher is faster", "",
             "| model | batch | dtype | eager ms | " + " | ".join(variants) + " |",
             "|---|---|---|---|" + "---|" * len(variants)]
    for r in rows:
        lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | {r['eager_ms']:.1f} | "
                     + " | ".join(cell(r["speedup"].get(v), ".2f") for v in variants) + " |")
    lines += ["", "## Max relative error vs eager (same dtype)", "",
              "| model | batch | dtype | " + " | ".join(variants) + " |", "|---|---|---|" + "---|" * len(variants)]
    for r in rows:
        lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | "
                     + " | ".join(cell(r["error"].get(v), ".1e") for v in variants) + " |")
    lines += ["", "## Transform time, seconds (torch.compile: its first call; torchlint: includes its timing)", "",
              "| model | batch | dtype | " + " | ".join(variants) + " |", "|---|---|---|" + "---|" * len(variants)]
    for r in rows:
        lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | "
                     + " | ".join(cell(r["transform"].get(v), ".1f") for v in variants) + " |")
    lines += ["", "## Weights in memory, MB (torchlint: parameters, buffers, kept originals, packed weights)", "",
              "| model | batch | dtype | eager | torchlint |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | {r['memory']['eager']:.0f} | "
                     f"{cell(r['memory'].get('torchlint'), '.0f')} |")
    lines += ["", "## What torchlint kept, and errors", ""]
    for r in rows:
        for k, note in r["note"].items():
            lines.append(f"- {r['model']}, batch {r['batch']}, {r['dtype']}, {k}: {note}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: " + ", ".join(MODELS))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (batch 1 gets twice as many)")
    parser.add_argument("--skip-compile", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--time-budget", type=float, default=60.0,
                        help="torchlint.optimize's time_budget in seconds (0: none)")
    parser.add_argument("--output", default=os.path.join(ROOT, "benchmarks", "results", "zoo-cpu.md"))
    parser.add_argument("--rows", help="a JSON-lines file: each measured row is appended to it as it comes, and the "
                                       "table is rendered from every row in it (runs accumulate, a row measured "
                                       "again replaces the old one; a stopped run keeps what it measured)")
    options = parser.parse_args()
    if any(os.environ.get(k) != v for k, v in ALLOCATOR_ENV.items()):
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **ALLOCATOR_ENV})

    import torch

    torch.set_num_threads(options.threads)
    sys.path.insert(0, ROOT)
    variants = [v for v in VARIANTS if not (options.skip_compile and v == "torch.compile")]
    load_before = os.getloadavg()[0]
    rows = []
    for name in [m.strip() for m in options.models.split(",") if m.strip()]:
        for batch in [int(b) for b in options.batches.split(",")]:
            for dtype in options.dtypes.split(","):
                try:
                    row = measure_row(name, batch, dtype, variants, options.rounds * (2 if batch == 1 else 1),
                                      options.time_budget or None)
                except Exception as error:  # noqa: BLE001 - a model that does not build is listed, not fatal
                    print(f"{name} {batch} {dtype}: {type(error).__name__}: {error}", flush=True)
                    continue
                rows.append(row)
                if options.rows:
                    with open(options.rows, "a") as f:
                        f.write(json.dumps(row) + "\n")
                print(name, batch, dtype, f"eager {row['eager_ms']:.1f} ms",
                      {k: round(v, 2) for k, v in row["speedup"].items()}, row["note"], flush=True)
    versions = []
    register_torchvision_standins()  # torchvision imports only with them (also when no model was built)
    for package in ("torchvision", "timm", "transformers"):
        try:
            versions.append(f"{package} {__import__(package).__version__}")
        except ImportError:
            pass
    header = (f"# torchlint.optimize on a model zoo (cpu)\n\nMachine: {platform.processor() or platform.machine()}, "
              f"{os.cpu_count()} cores, {options.threads} torch thread(s); torch {torch.__version__}; "
              f"{', '.join(versions)}; python {platform.python_version()}.  \n"
              f"Run: `python benchmarks/zoo.py {' '.join(sys.argv[1:])}`; median of {options.rounds} interleaved "
              f"rounds (batch 1: {2 * options.rounds}); load average {load_before:.1f} before, "
              f"{os.getloadavg()[0]:.1f} after (a shared machine: expect noise).  \n"
              "torchvision's CPU-incompatible `nms`/`qnms` operators are replaced by pure-torch stand-ins registered "
              "with torch.library (unused by these models). Random weights, built offline from configurations.")
    if options.rows:
        with open(options.rows) as f:
            measured = [json.loads(line) for line in f if line.strip()]
        rows = list({(r["model"], r["batch"], r["dtype"]): r for r in measured}.values())  # a rerun replaces a row
    text = render(rows, variants, header)
    print(text)
    os.makedirs(os.path.dirname(options.output), exist_ok=True)
    with open(options.output, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
