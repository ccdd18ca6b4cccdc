"""Family E (host-device syncs per step) written many ways: a sync in a training step is reported
whatever the names, the loop header, or where the loop, the model and the loader live."""

from __future__ import annotations

import textwrap

import pytest

from tests.generalisation import pools, sync_frames
from tests.generalisation.variants import Shape, check, differing

SELECT = ("TL201", "TL202", "TL203", "TL204")
LIMIT = 6  # spellings per framed shape: the first is the base, the rest drawn at random

IMPORTS = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from tqdm import tqdm
"""

SETUP = """
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
criterion = nn.CrossEntropyLoss()
"""

STEP = """
$header
    $x, $y = $x.to(device), $y.to(device)
    $O.zero_grad()
    $loss = criterion($M($x), $y)
    $loss.backward()
    $O.step()
    $sync
"""

SYNC = (
    "running += $loss.item()  # expect: TL201",
    "history.append(float($loss))  # expect: TL202",
    "print('loss', $loss)  # expect: TL203",
    "if $loss < 0.01:  # expect: TL204\n    break",
)

BUILD = """
$model = $construct.to(device)
$loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)
"""

CONSTRUCT = (
    "Net()",
    "torchvision.models.resnet18(num_classes=10)",
    "nn.Sequential(nn.Flatten(), nn.Linear(784, 10))",
)

FRAMES = {
    "script": {
        "main.py": IMPORTS
        + "import torchvision\n"
        + pools.NET_CLASS
        + SETUP
        + BUILD
        + """
running, history = 0.0, []
for epoch in range(10):
    $step
""",
    },
    "function": {
        "main.py": IMPORTS
        + "import torchvision\n"
        + pools.NET_CLASS
        + SETUP
        + """

def train_epoch($model, $loader, $optimizer):
    running, history = 0.0, []
    $model.train()
    $step
    return running


def main():
"""
        + "    "
        + BUILD.strip().replace("\n", "\n    ")
        + """
    for epoch in range(10):
        train_epoch($model, $loader, $optimizer)


if __name__ == "__main__":
    main()
""",
    },
    "other_file": {
        "engine.py": IMPORTS
        + SETUP
        + """

def train_epoch($model, $loader, $optimizer):
    running, history = 0.0, []
    $model.train()
    $step
    return running
""",
        "main.py": IMPORTS
        + "import torchvision\nfrom engine import train_epoch\n"
        + pools.NET_CLASS
        + SETUP
        + BUILD
        + """
for epoch in range(10):
    train_epoch($model, $loader, $optimizer)
""",
    },
}

SHAPES = [
    Shape(
        name=f"sync-in-step/{frame}",
        files=files,
        slots={
            "step": (STEP,),
            "sync": SYNC,
            "header": pools.HEADER,
            "construct": CONSTRUCT,
            "model": pools.MODEL,
            "loader": pools.LOADER,
            "optimizer": pools.OPTIMIZER,
            "M": ("$model",),
            "O": ("$optimizer",),
            "x": pools.INPUT,
            "y": pools.TARGET,
            "loss": pools.LOSS,
        },
        select=SELECT,
    )
    for frame, files in FRAMES.items()
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_sync_in_a_step_is_found_however_written(shape: Shape) -> None:
    failures = [
        report for choice in shape.choices(limit=24) if (report := check(shape, choice))
    ]
    assert not failures, f"{len(failures)} of 24 variants differ; first:\n{failures[0]}"


# ---- the same shape in more frames, with more syncs, batch forms and origins -----------------------------

STEP_SYNC = (
    "running += $loss.item()  # expect: TL201",
    "history.append(float($loss))  # expect: TL202",
    "print('loss', $loss)  # expect: TL203",
    "if $loss < 0.01:  # expect: TL204\n    break",
    'print(f"loss {$loss:.4f}")  # expect: TL203',
    'print("loss %.4f" % $loss)  # expect: TL203',
    'print("loss {:.4f}".format($loss))  # expect: TL203',
    "torch.cuda.synchronize()  # expect: TL205",
    "history.append($loss.detach().cpu().numpy())  # expect: TL201",
    "correct = ($out.argmax(1) == $y).sum().item()  # expect: TL201",
    "$met.update(($out.argmax(1) == $y).sum().item(), $y.size(0))  # expect: TL201",
)


def _step_loop(tail: str) -> str:
    return "running, history, times = 0.0, [], []\n$header\n" + textwrap.indent(sync_frames.TRAIN_STEP.strip("\n") + "\n" + tail, "    ")


FRAMED = sync_frames.framed("framed-sync-in-step", _step_loop("$sync"), {"sync": STEP_SYNC})

# dict batches
DICT_BATCH = sync_frames.framed(
    "dict-batch",
    _step_loop("$sync"),
    {"sync": STEP_SYNC, "header": sync_frames.DICT_HEADER, "dataset": ("make_dataset(as_dict=True)",)},
)

# a step function of another file: its read is reported once, at the call the loop makes (TL207); the loss it
# returns is a device tensor the loop reads
STEPS = """
import torch


def train_step(model, optimizer, criterion, x, y):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    $stepret
"""

STEP_FUNCTION = sync_frames.framed(
    "step-function-elsewhere/reads",
    "running = 0.0\n$header\n    $x, $y = $x.to($dev), $y.to($dev)\n"
    "    running += train_step($M, $O, criterion, $x, $y)  # expect: TL207",
    {"stepret": ("return loss.item()", "return float(loss)", "return loss.detach().cpu().item()")},
    extra="from steps import train_step\n",
    files={"steps.py": STEPS},
) + sync_frames.framed(
    "step-function-elsewhere/returns",
    "running, history, times = 0.0, [], []\n$header\n    $x, $y = $x.to($dev), $y.to($dev)\n"
    "    $loss = train_step($M, $O, criterion, $x, $y)\n    $sync",
    {"stepret": ("return loss", "return loss.detach()"), "sync": STEP_SYNC[:9]},
    extra="from steps import train_step\n",
    files={"steps.py": STEPS},
)

# progress bars: the bar formats what it is given on every step
PROGRESS = sync_frames.framed(
    "progress-bar",
    "bar = tqdm($L)\nfor $x, $y in bar:\n" + textwrap.indent(sync_frames.TRAIN_STEP.strip("\n") + "\n$show", "    "),
    {
        "show": (
            "bar.set_postfix(loss=$loss)  # expect: TL203",
            'bar.set_postfix({"loss": $loss})  # expect: TL203',
            'bar.set_description(f"loss {$loss:.3f}")  # expect: TL203',
            'bar.set_description("loss %.3f" % $loss)  # expect: TL203',
            'bar.set_postfix_str(f"{$loss:.3f}")  # expect: TL203',
            "bar.set_postfix(loss=$loss.item())  # expect: TL201",
        )
    },
)

# several tensors reach one string: a tuple, unpacked, through `zip`, through a generator
SEVERAL = sync_frames.framed(
    "several-tensors-formatted",
    "$header\n"
    + textwrap.indent(
        "$x, $y = $x.to($dev), $y.to($dev)\n$O.zero_grad()\n$out = $M($x)\n$loss = criterion($out, $y)\n"
        "reg = 1e-4 * sum(p.pow(2).sum() for p in $M.parameters())\n($loss + reg).backward()\n$O.step()\n$fmt",
        "    ",
    ),
    {
        "fmt": (
            'print("loss %.4f reg %.4f" % ($loss, reg))  # expect: TL203',
            'parts = ($loss, reg)\nprint("loss %.4f reg %.4f" % parts)  # expect: TL203',
            'parts = [$loss, reg]\nprint("loss %.4f reg %.4f" % (*parts,))  # expect: TL203',
            'parts = [$loss, reg]\nprint("loss %.4f reg %.4f" % tuple(parts))  # expect: TL203',
            'for name, value in zip(("loss", "reg"), ($loss, reg)):\n    print(f"{name} {value:.4f}")  # expect: TL203',
            'print("loss {:.4f} reg {:.4f}".format(*($loss, reg)))  # expect: TL203',
        )
    },
)

# `torch.cuda.synchronize()` to time each step: the clock does not make it free
TIMED = sync_frames.framed(
    "synchronize-to-time",
    "$header\n"
    + textwrap.indent("t0 = $clock()\n" + sync_frames.TRAIN_STEP.strip("\n") + "\n$sync  # expect: TL205\ntimes.append($clock() - t0)", "    "),
    {
        "clock": ("time.perf_counter", "time.time", "time.monotonic"),
        "sync": ("torch.cuda.synchronize()", "torch.cuda.synchronize($dev)"),
    },
    extra="\ntimes = []\n",
)

# syncs one, two and three calls deep, in this file and another, and in a method of a metric object

DEEP = [
    shape
    for metclass, records in (
        (
            "Accuracy",
            (
                "history.append(accuracy($out, $y))  # expect: TL207",
                "stats = batch_stats($out, $y, $loss)  # expect: TL207",
                "log_batch(history, $out, $y, $loss)  # expect: TL207",
                "history.append(top1($out, $y))  # expect: TL207",
            ),
        ),
        ("TopK", ("$met.update($out, $y)  # expect: TL207",)),
    )
    for shape in sync_frames.framed(
        f"sync-deep-in-helper/{metclass}",
        _step_loop("$record"),
        {"record": records, "metclass": (metclass,)},
        extra="\n\ndef top1(logits, labels):\n    return accuracy(logits, labels)\n",
    )
]

# a `forward()` that reads a device value: it runs on every step wherever the model is called
FORWARD_CLASS = '''

class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3072, 10))

    def forward(self, x):
        $fsync
        return self.body(x) / scale
'''

FORWARD = sync_frames.framed(
    "sync-in-forward",
    _step_loop(""),
    {
        "construct": ("Scaled()",),
        "fsync": (
            "scale = x.abs().max().item()  # expect: TL201",
            "scale = float(x.abs().max())  # expect: TL202",
            "scale = x.abs().max()\nif scale > 100:  # expect: TL204\n    scale = scale / 100",
            "scale = x.abs().max()\nprint('scale', scale)  # expect: TL203",
            "scale = max(x.abs().max().tolist(), 1.0)  # expect: TL201",
        ),
    },
    models="\nimport torch\n" + FORWARD_CLASS,
)

# evaluation: per-batch copies to the host gathered for after the loop
EVAL_HEADER = (
    "for $x, $y in $L:",
    "for i, ($x, $y) in enumerate($L):",
    "for $x, $y in tqdm($L, desc='eval'):",
    "for batch in $L:\n    $x, $y = batch",
)

GATHER = sync_frames.framed(
    "eval-gather",
    "$M.eval()\npreds, trues = [], []\nwith torch.no_grad():\n    $eheader\n"
    "        $x = $x.to($dev)\n        $out = $M($x)\n        $gather\n        trues.append($y.numpy())",
    {
        "eheader": EVAL_HEADER,
        "gather": (
            "preds.append($out.argmax(1).cpu().numpy())  # expect: TL201",
            "preds.append($out.cpu())  # expect: TL201",
            "preds.extend($out.argmax(dim=1).cpu().tolist())  # expect: TL201",
            "preds.extend($out.argmax(1).tolist())  # expect: TL201",
            'preds.append($out.detach().to("cpu"))  # expect: TL201',
            "preds.append($out.softmax(-1).cpu().numpy())  # expect: TL201",
        ),
    },
)

# the same gathering where the model runs in a helper (no forward call in the loop's own body) and the loop
# iterates a name bound to the loader on one path and to a progress bar over it on another (a progress bar
# on the main rank only)
REBOUND_HEADER = (
    "shown = tqdm($L)\nif torch.distributed.is_initialized() and torch.distributed.get_rank() != 0:\n    shown = $L\nfor $x, $y in shown:",
    "if torch.distributed.is_initialized():\n    it = enumerate($L)\nelse:\n    it = enumerate(tqdm($L))\nfor i, ($x, $y) in it:",
)
GATHER_REBOUND = sync_frames.framed(
    "eval-gather/rebound-iterator",
    "def $run(net, inputs):\n    return net(inputs).softmax(1)\n\n\n"
    "$M.eval()\npreds, trues = [], []\nwith torch.no_grad():\n    $eheader\n"
    "        $x = $x.to($dev)\n        $out = $run($M, $x)\n        $gather\n        trues.append($y.numpy())",
    {"eheader": REBOUND_HEADER, "gather": GATHER[0].slots["gather"][:3], "run": ("run_model", "predict", "infer")},
)

# post-processing: a host read per element of a device tensor, in any loop
ELEMENTS = sync_frames.framed(
    "per-element-read",
    "$M.eval()\nkept = []\nwith torch.no_grad():\n    $eheader\n"
    "        scores, labels = $M($x.to($dev)).softmax(-1).max(-1)\n        $perelem",
    {
        "eheader": EVAL_HEADER,
        "perelem": (
            "for i in range(len(scores)):\n    if scores[i] > 0.5:  # expect: TL204\n        kept.append(i)",
            "for s in scores:\n    if s > 0.5:  # expect: TL204\n        kept.append(s)",
            "for i in range(scores.shape[0]):\n    kept.append(int(labels[i]))  # expect: TL202",
            "kept.extend([s.item() for s in scores])  # expect: TL201",
            "for i, s in enumerate(scores):\n    kept.append((i, s.item()))  # expect: TL201",
        ),
    },
)

# post-processing once, outside any step loop: still one wait per element
ONCE_ELEMENTS = sync_frames.framed(
    "per-element-read-once",
    "$M.eval()\nimage = next(iter($L))[0][:1].to($dev)\nwith torch.no_grad():\n"
    "    probs = $M(image).softmax(-1)[0]\nkept = []\n$perelem",
    {
        "perelem": (
            "for c in range(len(probs)):\n    if probs[c] > 0.1:  # expect: TL204\n        kept.append(c)",
            "for c in range(len(probs)):\n    kept.append(probs[c].item())  # expect: TL201",
            "for c, p in enumerate(probs):\n    kept.append(float(p))  # expect: TL202",
            "kept = [p.item() for p in probs]  # expect: TL201",
        ),
    },
)

GENERAL = FRAMED + DICT_BATCH + STEP_FUNCTION + PROGRESS + SEVERAL + TIMED + DEEP + FORWARD + GATHER + GATHER_REBOUND + ELEMENTS + ONCE_ELEMENTS

# Spellings the model does not follow yet: (shape name, reason).
XFAIL: dict[str, str] = {}

SHAPES = SHAPES + GENERAL


def _marks(shape: Shape) -> list:
    reason = XFAIL.get(shape.name)
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


@pytest.mark.parametrize(
    "shape", [pytest.param(s, id=s.name, marks=_marks(s)) for s in GENERAL]
)
def test_sync_is_found_in_every_frame_and_spelling(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
