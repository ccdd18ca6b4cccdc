"""Family E near misses written many ways: host values, reads behind a logging interval or a switch that is
off, reads once per epoch or once per run, a program with no device, a metric object's host state and values
already copied to the host once. No markers: every spelling must stay silent."""

from __future__ import annotations

import textwrap

import pytest

from tests.generalisation import sync_frames
from tests.generalisation.variants import Shape, differing

LIMIT = 8  # spellings per shape: the first is the base, the rest drawn at random

# loop headers with a step counter, for the interval tests
COUNTED = (
    "for step, ($x, $y) in enumerate($L):",
    "for step, ($x, $y) in enumerate(tqdm($L)):",
    "for step, batch in enumerate($L):\n    $x, $y = batch",
    "it = iter($L)\nfor step in range(1000):\n    $x, $y = next(it)",
    "step, it = 0, iter($L)\nwhile step < 1000:\n    $x, $y = next(it)\n    step += 1",
)

# what a step loop reads on the host when every value is the host's
HOST_VALUES = (
    "seen += int($x.shape[0])",
    "lr_now = float(np.cos(np.pi * epoch / 10))",
    "elapsed = np.float64(time.time()).item()",
    "weights = np.linspace(0, 1, 10)\nif weights.sum() > 1:\n    history.append(weights.max().item())",
    "print('epoch', epoch, 'batches', len($L))",
    "print(f\"epoch {epoch} lr {$O.param_groups[0]['lr']:.4f}\")",
    "progress = np.array([epoch / 10])\nprint(f'{progress.item():.2f}')",
    "counts = np.bincount(np.arange(10))\nif counts[0] > 0:\n    seen += int(counts[0])",
    "print('seen %d samples' % seen)",
)

# the syncs of the positive shapes, each one written behind a gate
SYNCS = (
    "print(f'step {step}: {$loss.item():.4f}')",
    "print('loss', $loss)",
    "history.append(float($loss))",
    "torch.cuda.synchronize()",
    "if $loss < 0.01:\n    break",
    'print("loss %.4f" % $loss)',
)

GATES = (
    "if step % log_every == 0:",
    "if step % 100 == 0:",
    "if (step + 1) % log_every == 0:",
    "if args.verbose:",
)

ARGS = """
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--verbose", action="store_true")
args, _ = parser.parse_known_args()
log_every = 50
"""


def _loop(prelude: str, header: str, tail: str) -> str:
    return prelude + header + "\n" + textwrap.indent(sync_frames.TRAIN_STEP.strip("\n") + "\n" + tail, "    ")


HOST = sync_frames.framed(
    "host-values-in-step", _loop("seen, history = 0, []\n", "$header", "$host"), {"host": HOST_VALUES}
)

INTERVAL = sync_frames.framed(
    "sync-behind-interval",
    _loop("history = []\n", "$counted", "$gate\n    $sync"),
    {"counted": COUNTED, "gate": GATES, "sync": SYNCS},
    extra=ARGS,
)

EPOCH = sync_frames.framed(
    "sync-once-per-epoch",
    _loop("history = []\n", "$header", "") + "\n$sync",
    {"sync": tuple(s.replace("step {step}", "epoch {epoch}") for s in SYNCS if "break" not in s)
     + ("stop = bool($loss < 0.01)",)},
)

PROBE = (
    "print('output', probe.shape, probe.mean().item())",
    "print(probe)",
    "assert float(probe.abs().max()) < 1e3",
    "if torch.isnan(probe).any():\n    raise ValueError('bad initialisation')",
    "torch.cuda.synchronize()",
)

ONCE = sync_frames.framed(
    "sync-once-before-training",
    "sample, _ = next(iter($L))\nwith torch.no_grad():\n    probe = $M(sample.to($dev))\n$probe\n"
    + _loop("", "$header", ""),
    {"probe": PROBE},
)

CPU_SYNCS = (
    "running += $loss.item()",
    "history.append(float($loss))",
    "print('loss', $loss)",
    "if $loss < 0.01:\n    break",
    'print(f"loss {$loss:.4f}")',
    "correct = ($out.argmax(1) == $y).sum().item()",
    "history.append($loss.detach().cpu().numpy())",
)

CPU_ONLY = sync_frames.framed(
    "no-device",
    "running, history = 0.0, []\n$header\n"
    + textwrap.indent(sync_frames.TRAIN_STEP.replace("$x, $y = $x.to($dev), $y.to($dev)\n", "").strip("\n") + "\n$sync", "    "),
    {"sync": CPU_SYNCS},
    gpu=False,
)


HOST_STATE = sync_frames.framed(
    "metric-host-state",
    _loop(
        "data_time, seen = AverageMeter(), 0\nend = time.time()\n",
        "$header",
        "data_time.update(time.time() - end)\nseen += $x.size(0)\n$show\nend = time.time()",
    ),
    {
        "show": (
            'print(f"data {data_time.avg:.3f}s seen {seen}")',
            "print('data', data_time.avg)",
            'print("data %.3f" % data_time.val)',
            "if data_time.avg > 1.0:\n    print('input bound')",
            "history.append(float(data_time.avg))",
            "$met.update(seen, seen)\nprint(f'{$met.correct / max($met.total, 1):.3f}')",
        )
    },
)

GATHERED_ONCE = sync_frames.framed(
    "copied-to-host-once",
    "$M.eval()\npreds, trues = [], []\nwith torch.no_grad():\n    $eheader\n"
    "        preds.append($M($x.to($dev)).argmax(1))\n        $labels\npreds = $copy\nkept, count = [], 0\n$perelem",
    {
        "eheader": ("for $x, $y in $L:", "for i, ($x, $y) in enumerate($L):", "for batch in $L:\n    $x, $y = batch"),
        "labels": ("trues.extend($y.tolist())", "trues.append($y.numpy())", "trues.append($y)"),
        "copy": ("torch.cat(preds).cpu()", "torch.cat(preds).to('cpu')", "torch.cat(preds).cpu().numpy()"),
        "perelem": (
            "for p in preds:\n    if p > 5:\n        count += 1",
            "kept = [int(p) for p in preds]",
            "kept = [p.item() for p in preds]",
            "for i in range(len(preds)):\n    if preds[i] == 3:\n        kept.append(i)",
            "kept = preds.tolist()",
        ),
    },
)

# A batch's outputs copied to the host for Python to walk (the copy is the host's work), their rows then
# unpacked and read: every read is of a host value.
HOST_ROWS = sync_frames.framed(
    "copied-to-host/unpacked-rows",
    "$M.eval()\nkept = []\nwith torch.no_grad():\n    $eheader\n"
    "        rows = $M($x.to($dev)).topk(2, dim=1).values.cpu().numpy()\n        $walk",
    {
        "eheader": ("for $x, $y in $L:", "for i, ($x, $y) in enumerate($L):", "for $x, $y in tqdm($L):"),
        "walk": (
            "for first, second in rows:\n    kept.append(first.item() - second.item())",
            "for first, second in rows:\n    if first > second + 0.5:\n        kept.append(float(first))",
            "for first, second in rows:\n    kept.append(int(first > second))",
        ),
    },
)

# Every element of a tensor read in a loop of a GPU program, where the tensor is on the host: a helper given
# an output its caller copied to the host, a legacy `torch.FloatTensor` built from it, a model run on an input
# that is never moved (a CPU deployment path).
HOST_WALKED_HEAD = sync_frames.IMPORTS + """
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)).to(device)
names = [str(i) for i in range(10)]
"""

HOST_WALKED = [
    Shape(
        name="per-element-read/host-parameter",
        files={
            "main.py": HOST_WALKED_HEAD + """

def $fname($t):
    $derive
    kept = []
    $perelem
    return kept


def predict(img):
    $call
"""
        },
        slots={
            "fname": ("decode", "post_process", "f"),
            "t": ("pred", "out", "heatmap"),
            "m": ("mask", "scores", "m"),
            "derive": (
                "$m = $t.squeeze(0) > 0.1",
                "$m = torch.softmax($t, dim=1)[0]",
                "$m = torch.FloatTensor(torch.cat(($t, $t), 1))[0]",
                "$m = $t.data.view(-1)",
            ),
            "perelem": (
                "for v in $m:\n    if v > 0.5:\n        kept.append(v)",
                "kept = [int(v) for v in $m]",
                "kept = [float(v) for v in $m]",
                "for i in range(len($m)):\n    if $m[i] > 0:\n        kept.append(i)",
            ),
            "call": (
                "$t = model(img.to(device))\n$t = $t.cpu()\nreturn $fname($t)",
                "return $fname(model(img.to(device)).cpu())",
                "return $fname(model(img.to(device)).detach().cpu())",
            ),
        },
        select=("TL201", "TL202", "TL204"),
    ),
    Shape(
        name="per-element-read/input-never-moved",
        files={
            "main.py": HOST_WALKED_HEAD + """

def predict(img):
    start = time.time()
    with torch.inference_mode():
        $probs = torch.softmax(model(img.unsqueeze(0)), dim=1)
    $read
    return labels, time.time() - start
"""
        },
        slots={
            "probs": ("pred_probs", "probs", "p"),
            "read": (
                "labels = {names[i]: float($probs[0][i]) for i in range(len(names))}",
                "labels = [int(v > 0.5) for v in $probs[0]]",
                "labels = {}\nfor i, v in enumerate($probs[0]):\n    if v > 0.1:\n        labels[names[i]] = 1",
            ),
        },
        select=("TL201", "TL202", "TL204"),
    ),
]

# A helper called on every step whose read sits behind its own interval test.
HELPER_GATED = [
    Shape(
        name="helper-read-behind-interval",
        files={
            "main.py": HOST_WALKED_HEAD + """
log_every = 50
history = []
loader = DataLoader(list(zip(torch.randn(512, 3, 32, 32), torch.randint(0, 10, (512,)))), batch_size=32,
                    num_workers=2, pin_memory=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def pick_size():
    sizes = torch.randint(8, 12, (2,), device=device)
    return sizes[0].item(), sizes[1].item()


def $helper(step, $loss):
    if $gate:
        $read


for epoch in range(10):
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad()
        $loss = nn.functional.cross_entropy(model(x), y)
        $loss.backward()
        optimizer.step()
        $helper(step, $loss)
"""
        },
        slots={
            "helper": ("after_iter", "log_step", "f"),
            "loss": ("loss", "l", "total"),
            "gate": ("(step + 1) % 10 == 0", "step % log_every == 0"),
            "read": (
                "print(f'{$loss.item():.3f}')",
                "history.append($loss.item())",
                "size = int(torch.randint(8, 12, (1,), device=device).item())\nprint(size)",
                "size = pick_size()\nprint(size)",
            ),
        },
        select=("TL201", "TL202", "TL204", "TL207"),
    )
]

# ... and the same read done by a method of an object of another file, called behind the interval test.
HELPER_GATED.append(
    Shape(
        name="method-of-another-file-behind-interval",
        files={
            "exp.py": """
import random

import torch


class Exp:
    def __init__(self):
        self.input_size = (640, 640)

    def $resize(self):
        sizes = torch.LongTensor(2).cuda()
        sizes[0] = sizes[1] = random.randint(10, 20) * 32
        return sizes[0].item(), sizes[1].item()
""",
            "trainer.py": """
import torch
import torch.nn as nn

from exp import Exp


class Trainer:
    def __init__(self, loader):
        self.exp = Exp()
        self.model = nn.Linear(10, 2).cuda()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.loader = loader
        self.max_iter = 100

    def train(self):
        for self.epoch in range(10):
            for self.iter in range(self.max_iter):
                self.train_one_iter()
                self.$after()

    def train_one_iter(self):
        x, y = next(self.loader)
        x, y = x.cuda(), y.cuda()
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def $after(self):
        if $gate:
            self.input_size = self.exp.$resize()
""",
        },
        slots={
            "resize": ("random_resize", "pick_size", "f"),
            "after": ("after_iter", "end_step", "g"),
            "gate": ("(self.iter + 1) % 10 == 0", "self.iter % 50 == 0", "self.iter % self.max_iter == 0"),
        },
        select=("TL201", "TL202", "TL204", "TL207"),
    )
)

SHAPES = HOST + INTERVAL + EPOCH + ONCE + CPU_ONLY + HOST_STATE + GATHERED_ONCE + HOST_ROWS + HOST_WALKED + HELPER_GATED
GENERAL = SHAPES

# Near misses the model still reports: (shape name, reason).
XFAIL: dict[str, str] = {}


def _marks(shape: Shape) -> list:
    reason = XFAIL.get(shape.name)
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name, marks=_marks(s)) for s in SHAPES])
def test_near_miss_stays_silent_however_written(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
