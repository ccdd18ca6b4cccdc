"""Family E near misses written many ways: host values, reads behind a logging interval or a switch that is
off, reads once per epoch or once per run, a program with no device, a metric object's host state and values
already copied to the host once. No markers: every spelling must stay silent."""

from __future__ import annotations

import textwrap

import pytest

from tests.generalisation import sync_frames
from tests.generalisation.variants import Shape, check

LIMIT = 8  # spellings per shape: the first is the base, the rest drawn at random

TRAIN_STEP = """
$x, $y = $x.to($dev), $y.to($dev)
$O.zero_grad()
$out = $M($x)
$loss = criterion($out, $y)
$loss.backward()
$O.step()
"""

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
    return prelude + header + "\n" + textwrap.indent(TRAIN_STEP.strip("\n") + "\n" + tail, "    ")


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
    + textwrap.indent(TRAIN_STEP.replace("$x, $y = $x.to($dev), $y.to($dev)\n", "").strip("\n") + "\n$sync", "    "),
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

SHAPES = HOST + INTERVAL + EPOCH + ONCE + CPU_ONLY + HOST_STATE + GATHERED_ONCE
GENERAL = SHAPES

# Near misses the model still reports: (shape name, reason).
XFAIL: dict[str, str] = {}


def _marks(shape: Shape) -> list:
    reason = XFAIL.get(shape.name)
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name, marks=_marks(s)) for s in SHAPES])
def test_near_miss_stays_silent_however_written(shape: Shape) -> None:
    choices = shape.choices(limit=LIMIT)
    failures = [report for choice in choices if (report := check(shape, choice))]
    assert not failures, f"{len(failures)} of {len(choices)} variants differ; first:\n{failures[0]}"
