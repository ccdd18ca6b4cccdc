"""The frames family E's shapes are written in: one loop block (using `$M` the model, `$O` the optimizer,
`$L` the loader, `$dev` the device, `$met` a metric object) placed in a script, a function, a `Trainer`
method with `self.` attributes, a function of another file, or a function another file's function calls.
The model, the loader and the dataset come from this file, another file, torchvision or a factory.

`framed(name, loop)` gives one `Shape` per frame; `gpu=False` builds the same programs with no device."""

from __future__ import annotations

import textwrap

from tests.generalisation import pools
from tests.generalisation.variants import Shape

IMPORTS = """
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader
from tqdm import tqdm
"""

DATA = '''
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class AsDicts(Dataset):
    def __init__(self, pairs):
        self.pairs = pairs

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, index):
        image, label = self.pairs[index]
        return {"image": image, "label": label}


def make_dataset(n=4096, as_dict=False):
    pairs = TensorDataset(torch.randn(n, 3, 32, 32), torch.randint(0, 10, (n,)))
    return AsDicts(pairs) if as_dict else pairs


def make_loader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=4, pin_memory=True)


def unpack(batch, device):
    images, labels = batch
    return images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
'''

MODELS = '''
import torch.nn as nn


class ConvNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def build_model(classes=10):
    return ConvNet(classes)
'''

# helpers a loop may call: a metric fed numbers, a meter of host values, syncs one to three calls deep and
# in a metric object's method
METRICS = '''
import torch


class Accuracy:
    def __init__(self):
        self.correct, self.total = 0, 0

    def update(self, correct, total):
        self.correct += correct
        self.total += total


class AverageMeter:
    def __init__(self):
        self.val = self.avg = self.sum = 0.0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(logits, labels):
    return (logits.argmax(1) == labels).float().mean().item()


def batch_stats(logits, labels, loss):
    return {"acc": accuracy(logits, labels), "loss": loss.detach()}


def log_batch(history, logits, labels, loss):
    history.append(batch_stats(logits, labels, loss))


class TopK:
    def __init__(self, k=5):
        self.k, self.hits = k, 0

    def update(self, logits, labels):
        top = logits.topk(self.k, 1).indices
        self.hits += (top == labels[:, None]).any(1).sum().item()
'''

NET = pools.NET_CLASS.replace("784", "3072")

CONSTRUCT = (
    "Net()",
    "torchvision.models.resnet18(num_classes=10)",
    "nn.Sequential(nn.Flatten(), nn.Linear(3072, 10))",
    "build_model()",
    "ConvNet()",
)

LOADER_BUILD = (
    "$loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)",
    "$loader = make_loader(dataset, 64)",
    'loaders = {"train": DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4)}\n$loader = loaders["train"]',
)

# batch forms: a tuple unpacked in the header, a dict, a helper's unpacking, `next(it)` in a step loop
HEADER = tuple(h.replace("$loader", "$L") for h in pools.HEADER) + (
    "for step, batch in enumerate($L):\n    $x, $y = batch",
    "for batch in $L:\n    $x, $y = batch[0], batch[1]",
    "it = iter($L)\nfor step in range(1000):\n    $x, $y = next(it)",
    "step, max_steps, it = 0, 1000, iter($L)\nwhile step < max_steps:\n    $x, $y = next(it)\n    step += 1",
    "for batch in $L:\n    $x, $y = unpack(batch, $dev)",
)

# dict batches (the dataset yields `{"image": ..., "label": ...}`)
DICT_HEADER = (
    "for batch in $L:\n    $x, $y = batch['image'], batch['label']",
    "for step, batch in enumerate($L):\n    $x = batch['image']\n    $y = batch['label']",
    "for batch in tqdm($L):\n    batch = {k: v.to($dev) for k, v in batch.items()}\n    $x, $y = batch['image'], batch['label']",
)

# One training step on a batch `$x, $y` of `$L`, in the variables the frames bind.
TRAIN_STEP = """
$x, $y = $x.to($dev), $y.to($dev)
$O.zero_grad()
$out = $M($x)
$loss = criterion($out, $y)
$loss.backward()
$O.step()
"""

SETUP = """
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
dataset = $dataset
$model = $construct.to(device)
$loaderbuild
$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)
$metric = $metclass()
"""

CPU_SETUP = """
device = "cpu"
dataset = $dataset
$model = $construct
$loaderbuild
$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)
$metric = $metclass()
"""

PARAMS = "$model, $loader, $optimizer, $metric, device"


def _head(extra: str) -> str:
    return (
        IMPORTS
        + "from data import make_dataset, make_loader, unpack\nfrom models import ConvNet, build_model\n"
        + "$metimport\n"
        + NET
        + extra
    )


def _indent(text: str, spaces: int) -> str:
    return textwrap.indent(textwrap.dedent(text).strip("\n"), " " * spaces)


def _main(setup: str, call: str) -> str:
    return f"\n\ndef main():\n{_indent(setup, 4)}\n{_indent(call, 4)}\n\n\nif __name__ == '__main__':\n    main()\n"


def _frames(setup: str, extra: str) -> dict[str, tuple[dict[str, str], dict[str, tuple[str, ...]]]]:
    plain = {"M": ("$model",), "O": ("$optimizer",), "L": ("$loader",), "met": ("$metric",), "dev": ("device",)}
    function = f"\n\ndef run_epoch({PARAMS}):\n    criterion = nn.CrossEntropyLoss()\n    $loop\n"
    engine = IMPORTS + "from data import unpack\n$metimport\n" + extra + function
    epochs = "for epoch in range(10):\n    run_epoch($model, $loader, $optimizer, $metric, device)"
    method = (
        "\n\nclass Trainer:\n"
        f"    def __init__(self, {PARAMS}):\n"
        "        self.$model, self.$loader, self.$optimizer = $model, $loader, $optimizer\n"
        "        self.$metric, self.device = $metric, device\n\n"
        "    def train_epoch(self, epoch):\n"
        "        criterion = nn.CrossEntropyLoss()\n"
        "        $loop\n"
    )
    return {
        "script": (
            {"main.py": _head(extra) + setup + "criterion = nn.CrossEntropyLoss()\nfor epoch in range(10):\n    $loop\n"},
            plain,
        ),
        "function": ({"main.py": _head(extra) + function + _main(setup, epochs)}, plain),
        "method": (
            {
                "main.py": _head(extra)
                + method
                + _main(setup, f"trainer = Trainer({PARAMS})\nfor epoch in range(10):\n    trainer.train_epoch(epoch)")
            },
            {
                "M": ("self.$model",),
                "O": ("self.$optimizer",),
                "L": ("self.$loader",),
                "met": ("self.$metric",),
                "dev": ("self.device",),
            },
        ),
        "other_file": (
            {"engine.py": engine, "main.py": _head("") + "from engine import run_epoch\n" + _main(setup, epochs)},
            plain,
        ),
        "nested": (
            {
                "engine.py": engine
                + f"\n\ndef fit({PARAMS}, epochs=10):\n    for epoch in range(epochs):\n"
                + "        run_epoch($model, $loader, $optimizer, $metric, device)\n",
                "main.py": _head("") + "from engine import fit\n" + _main(setup, f"fit({PARAMS})"),
            },
            plain,
        ),
    }


def _host_only(text: str) -> str:
    text = text.replace(", pin_memory=True", "").replace(", unpack\n", "\n").replace("from data import unpack\n", "")
    start = text.find("\n\ndef unpack(")
    return text[:start] + "\n" if start >= 0 else text


def framed(
    name: str,
    loop: str,
    slots: dict[str, tuple[str, ...]],
    *,
    metrics: str = "",
    models: str = "",
    extra: str = "",
    files: dict[str, str] | None = None,
    gpu: bool = True,
    select: tuple[str, ...] = ("TL201", "TL202", "TL203", "TL204", "TL205", "TL207"),
    frames: tuple[str, ...] = ("script", "function", "method", "other_file", "nested"),
) -> list[Shape]:
    """One shape per frame: `loop` is the block run once per epoch; `metrics` is metrics.py (helpers the loop
    may call, beside the `Accuracy` metric every frame builds); `extra` is code every file holding the loop has."""
    shapes = []
    for frame, (frame_files, frame_slots) in _frames(SETUP if gpu else CPU_SETUP, extra).items():
        if frame not in frames:
            continue
        project = {"data.py": DATA, "models.py": MODELS + models, "metrics.py": METRICS + metrics, **(files or {}), **frame_files}
        all_slots = {
            "loop": (loop,),
            "header": HEADER,
            "construct": CONSTRUCT,
            "loaderbuild": LOADER_BUILD,
            "dataset": ("make_dataset()",),
            "model": pools.MODEL,
            "loader": pools.LOADER,
            "optimizer": pools.OPTIMIZER,
            "x": pools.INPUT,
            "y": pools.TARGET,
            "loss": pools.LOSS,
            "out": ("out", "logits", "outputs", "pred", "y_hat"),
            "metric": ("metric", "meter", "acc_metric"),
            "metclass": ("Accuracy",),
            "metimport": (
                "from metrics import Accuracy, AverageMeter, TopK, accuracy, batch_stats, log_batch",
                "from metrics import *",
            ),
            **frame_slots,
            **slots,
        }
        if not gpu:  # nothing moves to a device anywhere: no pinned memory, no helper that moves a batch
            project = {n: _host_only(t) for n, t in project.items()}
            all_slots = {k: tuple(_host_only(v) for v in vs if "unpack(" not in v) for k, vs in all_slots.items()}
        shapes.append(Shape(name=f"{name}/{frame}", files=project, slots=all_slots, select=select))
    return shapes
