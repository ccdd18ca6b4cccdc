"""Families C and D (DataLoader settings: workers, pinning, blocking copies) written many ways: a loader is
judged by its dataset, its settings and where its batches go, whatever the names, the loop header, or
where the loader is built, held and iterated (here, a factory of another file returning a tuple or a dict,
a trainer attribute, a parameter every caller passes, a training function of another file)."""

from __future__ import annotations

import ast

import pytest

from tests.generalisation import pools
from tests.generalisation.variants import Shape, check, render

IMPORTS = """
import argparse
import glob
import os

import torch
import torch.nn as nn
import torchvision
from PIL import Image
import torch.utils.data as tud
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split
from torchvision import datasets, transforms
from tqdm import tqdm

import tensors
from tensors import make_tensors

CONFIG = {"batch_size": 32, "workers": 4, "pin": True}
LOADER_KWARGS = {"num_workers": 4, "pin_memory": True}
PARAMS = {"batch_size": 32, "shuffle": True}
parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=4)
args, _ = parser.parse_known_args()
"""

# tensors built in memory in another file (a function returning them, and a dataset bound at its top level)
TENSORS = """
import torch
from torch.utils.data import TensorDataset


def make_tensors(n=1000):
    features = torch.randn(n, 1, 28, 28)
    targets = torch.randint(0, 10, (n,))
    return TensorDataset(features, targets)


TRAIN_SET = TensorDataset(torch.randn(1000, 1, 28, 28), torch.randint(0, 10, (1000,)))
"""

# A dataset that decodes an image file on every read: the work worker processes take off the training loop.
IMAGE_FILES = '''
class $dataset_class(Dataset):
    def __init__(self, root):
        self.paths = sorted(glob.glob(os.path.join(root, "*", "*.png")))
        self.classes = sorted(os.listdir(root))

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        path = self.paths[index]
        image = Image.open(path).convert("L").resize((28, 28))
        label = self.classes.index(os.path.basename(os.path.dirname(path)))
        return transforms.functional.to_tensor(image), label


class DictFiles(Dataset):
    def __init__(self, root):
        self.paths = sorted(glob.glob(os.path.join(root, "*", "*.png")))
        self.classes = sorted(os.listdir(root))

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        path = self.paths[index]
        image = Image.open(path).convert("L").resize((28, 28))
        label = self.classes.index(os.path.basename(os.path.dirname(path)))
        return {"image": transforms.functional.to_tensor(image), "label": label}
'''

# the dataset read from disk: an image folder, a Dataset subclass decoding files, torchvision's CIFAR-10
# with a per-item transform
DISK = (
    'datasets.ImageFolder("data/train", transform=transforms.Compose([transforms.Grayscale(), transforms.Resize((28, 28)), transforms.ToTensor()]))',
    '$dataset_class("data/train")',
    'datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())',
)
DATASET_CLASS = ("ImageFiles", "Folder", "Items", "Samples")

DATA_NAMES = ("train_set", "dataset", "ds", "samples", "d")
VAL_LOADER = ("val_loader", "test_loader", "vl", "held_out", "other")

# loop headers over `$L` (the loader, however it is reached) that unpack `$x, $y`
HEADERS = tuple(h.replace("$loader", "$L") for h in pools.HEADER) + (
    "it = iter($L)\nfor step in range(len($L)):\n    $x, $y = next(it)",
    "for batch in $L:\n    $x, $y = batch",
    "for i, batch in enumerate($L):\n    $x, $y = batch[0], batch[1]",
    "stream = iter($L)\nwhile True:\n    try:\n        $x, $y = next(stream)\n    except StopIteration:\n        break",
    # the Python 2 spelling old training scripts kept: `data_iter.next()`
    "data_iter = iter($L)\nfor step in range(len($L)):\n    $x, $y = data_iter.next()",
)

# a helper of another file that moves both parts of a batch
UTILS = """
def $helper(inputs, targets, device):
    return inputs.to(device), targets.to(device)
"""
# the CPU-only program's helper: it never moves anything
CPU_UTILS = """
def $helper(inputs, targets):
    return inputs.float(), targets
"""
HELPER = ("to_device", "prepare", "send", "put")

STEP = """
$header
    $copy
    $O.zero_grad()
    $loss = criterion($M($x), $y)
    $loss.backward()
    $O.step()
"""

EVAL = """
with torch.no_grad():
    for $x, $y in $V:
        $copy
        correct += ($M($x).argmax(1) == $y).sum().item()
"""

GPU = "device = $device\n"
DEVICE = (
    'torch.device("cuda" if torch.cuda.is_available() else "cpu")',
    '"cuda"',
    'torch.device("cuda:0")',
    '"cuda" if torch.cuda.is_available() else "cpu"',
)


NAMES = {
    "model": pools.MODEL,
    "loader": pools.LOADER,
    "val": VAL_LOADER,
    "optimizer": pools.OPTIMIZER,
    "data": DATA_NAMES,
    "x": pools.INPUT,
    "y": pools.TARGET,
    "loss": pools.LOSS,
    "helper": HELPER,
    "dataset_class": DATASET_CLASS,
    "header": HEADERS,
    "M": ("$model",),
    "O": ("$optimizer",),
    "device": DEVICE,
    "DL": ("DataLoader", "torch.utils.data.DataLoader", "tud.DataLoader"),
    "construct": ("Net()", "nn.Sequential(nn.Flatten(), nn.Linear(784, 10))", "build_model()"),
}

# a model built by a factory of another file
MODELS = """
import torch.nn as nn


def build_model(hidden=128):
    return nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))
"""


# Where the loaders are built and iterated. `$build` makes `$loader` and `$val` from `$data`; `$L` and `$V`
# are how the loops reach them.
BUILD = """
full = $dataset
$data, held = random_split(full, [0.9, 0.1])
$loader = $DL($data, shuffle=True, $settings
$val = $DL(held, $settings
"""


def _indent(text: str, by: int = 4) -> str:
    return "\n".join((" " * by + line) if line.strip() else line for line in text.strip("\n").splitlines())


def frames(
    device: str, utils: str, step: str = STEP, evaluate: str = EVAL, build: str = BUILD
) -> dict[str, tuple[dict[str, str], dict[str, tuple[str, ...]]]]:
    """The same program in six frames: `device` is the line that picks the device (or none), `utils` the
    helper file, `build` makes the loaders, `step` and `evaluate` read them."""
    STEP, EVAL, BUILD = step, evaluate, build  # noqa: N806
    head = IMPORTS + "from models import build_model\nfrom utils import $helper\n" + pools.NET_CLASS + IMAGE_FILES
    model = "$model = $construct\n" if "cpu" in device else "$model = $construct.to(device)\n"
    train = model + "$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)\ncriterion = nn.CrossEntropyLoss()\n"
    loops = "for epoch in range(10):\n" + _indent(STEP) + "\ncorrect = 0\n" + EVAL
    refs = {"L": ("$loader",), "V": ("$val",)}
    return {
        "script": (
            {"main.py": head + device + train + BUILD + loops, "utils.py": utils},
            refs,
        ),
        "function": (
            {
                "main.py": head
                + device
                + "\n\ndef train_one_epoch($model, $loader, $optimizer):\n"
                + _indent("criterion = nn.CrossEntropyLoss()\n" + STEP)
                + "\n\n\ndef evaluate($model, $val):\n    correct = 0\n"
                + _indent(EVAL)
                + "\n    return correct\n\n\ndef main():\n"
                + _indent(model + "$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)\n" + BUILD)
                + "\n    for epoch in range(10):\n        train_one_epoch($model, $loader, $optimizer)\n"
                + "        evaluate($model, $val)\n\n\nif __name__ == \"__main__\":\n    main()\n",
                "utils.py": utils,
            },
            refs,
        ),
        "method": (
            {
                "main.py": head
                + device
                + "\n\nclass Trainer:\n    def __init__(self):\n"
                + _indent(
                    (model + "$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)\n" + BUILD)
                    .replace("$model", "self.$model")
                    .replace("$optimizer", "self.$optimizer")
                    .replace("$loader =", "self.$loader =")
                    .replace("$val =", "self.$val ="),
                    8,
                )
                + "\n\n    def fit(self):\n        criterion = nn.CrossEntropyLoss()\n"
                + _indent("for epoch in range(10):\n" + _indent(STEP), 8)
                + "\n\n    def evaluate(self):\n        correct = 0\n"
                + _indent(EVAL, 8)
                + "\n        return correct\n\n\ntrainer = Trainer()\ntrainer.fit()\ntrainer.evaluate()\n",
                "utils.py": utils,
            },
            {"L": ("self.$loader",), "V": ("self.$val",), "M": ("self.$model",), "O": ("self.$optimizer",)},
        ),
        "factory_tuple": (
            {
                "data.py": IMPORTS + IMAGE_FILES + "\n\ndef get_loaders(root):\n" + _indent(BUILD + "return $loader, $val\n"),
                "main.py": head.replace("from utils", "from data import get_loaders\nfrom utils")
                + device
                + train
                + '$loader, $val = get_loaders("data/train")\n'
                + loops,
                "utils.py": utils,
            },
            refs,
        ),
        "factory_dict": (
            {
                "data.py": IMPORTS
                + IMAGE_FILES
                + "\n\ndef build_loaders(root):\n"
                + _indent(BUILD + 'return {"train": $loader, "val": $val}\n'),
                "main.py": head.replace("from utils", "import data\nfrom utils")
                + device
                + train
                + 'loaders = data.build_loaders("data/train")\n'
                + loops,
                "utils.py": utils,
            },
            {"L": ('loaders["train"]',), "V": ('loaders["val"]',)},
        ),
        "engine_file": (
            {
                "engine.py": IMPORTS
                + "from utils import $helper\n"
                + device
                + "\n\ndef train_one_epoch($model, $loader, $optimizer):\n"
                + _indent("criterion = nn.CrossEntropyLoss()\n" + STEP)
                + "\n\n\ndef evaluate($model, $val):\n    correct = 0\n"
                + _indent(EVAL)
                + "\n    return correct\n",
                "main.py": head.replace("from utils", "from engine import evaluate, train_one_epoch\nfrom utils")
                + device
                + model
                + "$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)\n"
                + BUILD
                + "for epoch in range(10):\n    train_one_epoch($model, $loader, $optimizer)\n    evaluate($model, $val)\n",
                "utils.py": utils,
            },
            refs,
        ),
        # a trainer class of another file holds the loaders it is given and iterates them in its methods
        "trainer_file": (
            {
                "trainer.py": IMPORTS
                + "from utils import $helper\n"
                + "\n\nclass Trainer:\n    def __init__(self, model, train_data, eval_data, optimizer, device):\n"
                + "        self.$model, self.$optimizer, self.device = model, optimizer, device\n"
                + "        self.$loader, self.$val = train_data, eval_data\n\n"
                + "    def fit(self, epochs):\n        device = self.device\n        criterion = nn.CrossEntropyLoss()\n"
                + _indent("for epoch in range(epochs):\n" + _indent(STEP), 8)
                + "\n\n    def evaluate(self):\n        device = self.device\n        correct = 0\n"
                + _indent(EVAL, 8)
                + "\n        return correct\n",
                "main.py": head.replace("from utils", "from trainer import Trainer\nfrom utils")
                + device
                + model
                + "$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)\n"
                + BUILD
                + "trainer = Trainer($model, $loader, $val, $optimizer, device)\ntrainer.fit(10)\ntrainer.evaluate()\n",
                "utils.py": utils,
            },
            {"L": ("self.$loader",), "V": ("self.$val",), "M": ("self.$model",), "O": ("self.$optimizer",)},
        ),
        # a trainer's attributes unpacked from a factory of another file
        "factory_in_method": (
            {
                "data.py": IMPORTS + IMAGE_FILES + "\n\ndef get_loaders(root):\n" + _indent(BUILD + "return $loader, $val\n"),
                "main.py": head.replace("from utils", "from data import get_loaders\nfrom utils")
                + device
                + "\n\nclass Trainer:\n    def __init__(self, root):\n"
                + _indent(
                    (model + "$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)\n")
                    .replace("$model", "self.$model")
                    .replace("$optimizer", "self.$optimizer")
                    + "self.$loader, self.$val = get_loaders(root)\n",
                    8,
                )
                + "\n\n    def fit(self):\n        criterion = nn.CrossEntropyLoss()\n"
                + _indent("for epoch in range(10):\n" + _indent(STEP), 8)
                + "\n\n    def evaluate(self):\n        correct = 0\n"
                + _indent(EVAL, 8)
                + '\n        return correct\n\n\ntrainer = Trainer("data/train")\ntrainer.fit()\ntrainer.evaluate()\n',
                "utils.py": utils,
            },
            {"L": ("self.$loader",), "V": ("self.$val",), "M": ("self.$model",), "O": ("self.$optimizer",)},
        ),
        # one epoch function for both phases, given each loader in turn (trains when given an optimizer)
        "shared_epoch": (
            {
                "main.py": head
                + device
                + "\n\ndef run_epoch($model, $loader, $optimizer=None):\n"
                + "    criterion = nn.CrossEntropyLoss()\n    correct = 0\n"
                + _indent(
                    STEP.replace("    $O.zero_grad()\n", "")
                    .replace("    $loss.backward()\n    $O.step()\n", "")
                    .rstrip("\n")
                    + "\n    if $optimizer is not None:\n        $O.zero_grad()\n        $loss.backward()\n        $O.step()\n"
                    + "    correct += ($M($x).argmax(1) == $y).sum().item()\n"
                )
                + "\n    return correct\n\n\ndef main():\n"
                + _indent(model + "$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)\n" + BUILD)
                + "\n    for epoch in range(10):\n        run_epoch($model, $loader, $optimizer)\n"
                + "        with torch.no_grad():\n            run_epoch($model, $val)\n\n\nmain()\n",
                "utils.py": utils,
            },
            refs,
        ),
        # the loop two calls below the code that builds the loaders, in another file
        "deep": (
            {
                "engine.py": IMPORTS
                + "from utils import $helper\n"
                + device
                + "\n\ndef train_one_epoch($model, $loader, $optimizer):\n"
                + _indent("criterion = nn.CrossEntropyLoss()\n" + STEP)
                + "\n\n\ndef evaluate($model, $val):\n    correct = 0\n"
                + _indent(EVAL)
                + "\n    return correct\n",
                "main.py": head.replace("from utils", "from engine import evaluate, train_one_epoch\nfrom utils")
                + device
                + "\n\ndef run(net, loaders, opt, epochs):\n    for epoch in range(epochs):\n"
                + '        train_one_epoch(net, loaders["train"], opt)\n        evaluate(net, loaders["val"])\n\n\n'
                + "def main():\n"
                + _indent(model + "$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)\n" + BUILD)
                + '\n    run($model, {"train": $loader, "val": $val}, $optimizer, 10)\n\n\nmain()\n',
                "utils.py": utils,
            },
            refs,
        ),
    }


def shapes(
    prefix: str,
    device: str,
    slots: dict[str, tuple[str, ...]],
    select: tuple[str, ...],
    utils: str = UTILS,
    extra: dict[str, str] | None = None,
    skip: tuple[str, ...] = (),
    **templates: str,
) -> list[Shape]:
    out = []
    for frame, (files, refs) in frames(device, utils, **templates).items():
        if frame in skip:
            continue
        files = {**files, "tensors.py": TENSORS, "models.py": MODELS, **(extra or {})}
        out.append(Shape(name=f"{prefix}/{frame}", files=files, slots={**NAMES, **refs, **slots}, select=select))
    return out


# Copies of a batch to the GPU that do not overlap (no pinned memory to overlap from), each on one line.
COPY_TO_GPU = (
    "$x, $y = $x.to(device), $y.to(device)",
    "$x, $y = $x.cuda(), $y.cuda()",
    "$x, $y = $x.to(device, non_blocking=True), $y.to(device, non_blocking=True)",
    "$x, $y = $helper($x, $y, device)",
)

# C: a loader over files, feeding a GPU, loading in the training process (TL101 on both loaders).
SETTINGS_C = (
    "batch_size=32)  # expect: TL101",
    "batch_size=32, num_workers=0)  # expect: TL101",
    "batch_size=32, pin_memory=True)  # expect: TL101",
    "batch_size=64, pin_memory=torch.cuda.is_available())  # expect: TL101",
    "batch_size=32, num_workers=0, pin_memory=False)  # expect: TL101",
    'batch_size=CONFIG["batch_size"], num_workers=CONFIG["workers"])',
    "batch_size=32, num_workers=args.workers)",
    "**PARAMS)  # expect: TL101",
    "batch_size=32, **LOADER_KWARGS)",
)
SHAPES_C = shapes(
    "workers-zero/disk",
    GPU,
    {"dataset": DISK, "settings": SETTINGS_C, "copy": COPY_TO_GPU},
    ("TL101",),
)

# D: the same loaders copied to the GPU from pageable memory (TL102 on both), whatever the workers.
SETTINGS_D = (
    "batch_size=32)  # expect: TL102",
    "batch_size=32, num_workers=4)  # expect: TL102",
    "batch_size=32, num_workers=4, pin_memory=False)  # expect: TL102",
    "batch_size=32, num_workers=0)  # expect: TL102",
    "batch_size=32, num_workers=os.cpu_count() or 1)  # expect: TL102",
    'batch_size=CONFIG["batch_size"], num_workers=CONFIG["workers"])  # expect: TL102',
    "batch_size=32, num_workers=args.workers)  # expect: TL102",
    "**PARAMS)  # expect: TL102",
)
SHAPES_D = shapes(
    "pin-missing/disk",
    GPU,
    {"dataset": DISK, "settings": SETTINGS_D, "copy": COPY_TO_GPU},
    ("TL102",),
)

# D: pinned loaders whose batches are copied blocking (TL103 on the copy), or overlapping (silent).
SETTINGS_PINNED = (
    "batch_size=32, pin_memory=True)",
    "batch_size=32, num_workers=4, pin_memory=True)",
    "batch_size=32, num_workers=4, pin_memory=torch.cuda.is_available())",
    "batch_size=32, **LOADER_KWARGS)",
    'batch_size=32, num_workers=args.workers, pin_memory=CONFIG["pin"])',
)
COPY_PINNED = (
    "$x, $y = $x.to(device), $y.to(device)  # expect: TL103",
    "$x, $y = $x.cuda(), $y.cuda()  # expect: TL103",
    "$x, $y = $x.to(device, non_blocking=True), $y.to(device, non_blocking=True)",
    "$x, $y = $x.cuda(non_blocking=True), $y.cuda(non_blocking=True)",
)
SHAPES_PINNED = shapes(
    "pinned-blocking-copy",
    GPU,
    {"dataset": DISK, "settings": SETTINGS_PINNED, "copy": COPY_PINNED},
    ("TL103",),
)


# Near misses. A CPU-only program: nothing to pin, and workers would compete with the training threads.
CPU_ONLY = shapes(
    "cpu-only",
    'device = torch.device("cpu")\n',
    {
        "dataset": DISK,
        "settings": ("batch_size=32)", "batch_size=32, num_workers=0)"),
        "copy": ("pass", "$x = $x.float()", "$x = $x.view($x.size(0), -1)"),
    },
    ("TL101", "TL102", "TL103"),
    utils=CPU_UTILS,
)

# Near misses: tensors already in memory (built here, or in another file), batched in the training process.
MEMORY = (
    "TensorDataset(torch.randn(1000, 1, 28, 28), torch.randint(0, 10, (1000,)))",
    "make_tensors()",
    "tensors.make_tensors(2000)",
    "tensors.TRAIN_SET",
)
IN_MEMORY = shapes(
    "workers-zero/in-memory",
    GPU,
    {
        "dataset": MEMORY,
        "settings": ("batch_size=32)", "batch_size=32, num_workers=0)", "batch_size=32, pin_memory=True)"),
        "copy": COPY_TO_GPU,
    },
    ("TL101",),
)

# D: tensors in memory batched in the training process and copied to the GPU for a training step: pinning
# pays there too (TL102); the evaluation loader, read outside a training step, gains nothing from it.
BUILD_SPLIT_SETTINGS = BUILD.replace("$val = $DL(held, $settings", "$val = $DL(held, $eval_settings")
IN_MEMORY_PIN = shapes(
    "pin-missing/in-memory",
    GPU,
    {
        "dataset": MEMORY,
        "settings": (
            "batch_size=32)  # expect: TL102",
            "batch_size=32, num_workers=0)  # expect: TL102",
            "batch_size=32, pin_memory=False)  # expect: TL102",
        ),
        "eval_settings": ("batch_size=256)", "batch_size=256, num_workers=0)"),
        "copy": COPY_TO_GPU,
    },
    ("TL102",),
    build=BUILD_SPLIT_SETTINGS,
    skip=("shared_epoch",),  # there the evaluation loader goes through the training loop's code
)

# D: batches as dicts, moved by a helper of another file (TL102 on both loaders).
DICT_UTILS = """
def $helper(batch, device):
    return {key: value.to(device) for key, value in batch.items()}
"""
DICT_STEP = """
$bheader
    $move
    $O.zero_grad()
    $loss = criterion($M(batch["image"]), batch["label"])
    $loss.backward()
    $O.step()
"""
DICT_EVAL = """
with torch.no_grad():
    for batch in $V:
        $move
        correct += ($M(batch["image"]).argmax(1) == batch["label"]).sum().item()
"""
DICT_BATCHES = shapes(
    "pin-missing/dict-batch",
    GPU,
    {
        "dataset": ('DictFiles("data/train")',),
        "settings": SETTINGS_D,
        "bheader": ("for batch in $L:", "for i, batch in enumerate($L):", "for batch in tqdm($L):"),
        "move": (
            "batch = $helper(batch, device)",
            "batch = {k: v.to(device) for k, v in batch.items()}",
            "batch = {key: value.cuda() for key, value in batch.items()}",
            "batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}",
        ),
    },
    ("TL102",),
    utils=DICT_UTILS,
    step=DICT_STEP,
    evaluate=DICT_EVAL,
    skip=("shared_epoch",),  # its template reads a tuple batch
)
DICT_HEADERS = ("for batch in $L:", "for i, batch in enumerate($L):", "for batch in tqdm($L):")

# D: pinned loaders of dict batches moved entry by entry, blocking (TL103) or not.
DICT_PINNED = shapes(
    "pinned-blocking-copy/dict-batch",
    GPU,
    {
        "dataset": ('DictFiles("data/train")',),
        "settings": SETTINGS_PINNED,
        "bheader": DICT_HEADERS,
        "move": (
            "batch = {k: v.to(device) for k, v in batch.items()}  # expect: TL103",
            "batch = {key: value.cuda() for key, value in batch.items()}  # expect: TL103",
            "batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}",
        ),
    },
    ("TL103",),
    utils=DICT_UTILS,
    step=DICT_STEP,
    evaluate=DICT_EVAL,
    skip=("shared_epoch",),  # its template reads a tuple batch
)

# Near misses: a loader only looked at (a batch or its length, once) in a program that trains on the GPU
# from a loader set up for it.
PEEK = (
    "$px, $py = next(iter($preview))\nprint($px.shape, $py[:8])",
    "it = iter($preview)\n$px, $py = next(it)\nprint($px.shape)",
    "batch = next(iter($preview))\ngrid = torchvision.utils.make_grid(batch[0])\nprint(grid.shape)",
    'print(len($preview), "batches")',
)
PEEK_FRAMES = {
    "script": ("$preview = DataLoader($data, batch_size=16, shuffle=True)\n$peek\n", ""),
    "function": (
        "show_batch($data)\n",
        "\n\ndef show_batch(dataset):\n    $preview = DataLoader(dataset, batch_size=16, shuffle=True)\n    $peek\n",
    ),
    "other_file": ("from viz import preview_loader\n\n$preview = preview_loader($data)\n$peek\n", ""),
}
VIZ = """
from torch.utils.data import DataLoader


def preview_loader(dataset, n=16):
    return DataLoader(dataset, batch_size=n, shuffle=True)
"""
PEEKED = [
    Shape(
        name=f"peeked/{frame}",
        files={
            "main.py": IMPORTS
            + pools.NET_CLASS
            + IMAGE_FILES
            + helpers
            + GPU
            + "$model = Net().to(device)\n$optimizer = torch.optim.SGD($model.parameters(), lr=0.1)\n"
            + "criterion = nn.CrossEntropyLoss()\n$data = $dataset\n"
            + "$loader = DataLoader($data, batch_size=32, shuffle=True, num_workers=4, pin_memory=True)\n"
            + peek
            + "for epoch in range(10):\n"
            + _indent(STEP),
            "tensors.py": TENSORS,
            **({"viz.py": VIZ} if frame == "other_file" else {}),
        },
        slots={
            **NAMES,
            "L": ("$loader",),
            "dataset": DISK,
            "peek": PEEK,
            "preview": ("preview", "sample_loader", "viz_loader", "p"),
            "px": ("images", "xb", "first"),
            "py": ("labels", "yb", "classes"),
            "copy": ("$x, $y = $x.to(device, non_blocking=True), $y.to(device, non_blocking=True)",),
        },
        select=("TL101", "TL102"),
    )
    for frame, (peek, helpers) in PEEK_FRAMES.items()
]

# Near misses: token ids tokenised ahead of time into a list, batched through a helper's `dataset` parameter
# with a collate that only pads: an item is a list lookup, workers would only add copies.
TEXT = """
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader
from transformers import AutoTokenizer
"""
MAKE = """

def pad_batch(items):
    ids, labels = zip(*items)
    return pad_sequence(list(ids), batch_first=True), torch.tensor(labels)


def $make(dataset, batch_size=32, shuffle=False):
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=pad_batch)
"""
TEXT_NET = """

class TextNet(nn.Module):
    def __init__(self, vocab=30522, width=64):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, width)
        self.head = nn.Linear(width, 2)

    def forward(self, ids):
        return self.head(self.embed(ids))

"""
ENCODE = (
    "$data = [(torch.tensor(tokenizer.encode(text, truncation=True, max_length=128)), int(label)) for text, label in rows]",
    "$data = []\nfor text, label in rows:\n    $data.append((torch.tensor(tokenizer.encode(text)), int(label)))",
    "ids = [torch.tensor(tokenizer.encode(t)) for t, _ in rows]\n$data = list(zip(ids, [int(l) for _, l in rows]))",
)
TEXT_PROGRAM = """
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
with open("train.tsv") as handle:
    rows = [line.rstrip("\\n").split("\\t") for line in handle]
$encode
$loader = $make($arg)
$model = TextNet().to(device)
$optimizer = torch.optim.Adam($model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
for epoch in range(3):
    $step
"""
TEXT_FRAMES = {
    "here": {"main.py": TEXT + MAKE + TEXT_NET + TEXT_PROGRAM},
    "other_file": {"main.py": TEXT + "from loaders import $make\n" + TEXT_NET + TEXT_PROGRAM, "loaders.py": TEXT + MAKE},
    "function": {
        "main.py": TEXT
        + "import loaders\n"
        + TEXT_NET
        + "\ndef main():\n"
        + _indent(TEXT_PROGRAM.replace("$make(", "loaders.$make("))
        + "\n\n\nif __name__ == \"__main__\":\n    main()\n",
        "loaders.py": TEXT + MAKE,
    },
}
PRE_TOKENISED = [
    Shape(
        name=f"pre-tokenised/{frame}",
        files=files,
        slots={
            **NAMES,
            "L": ("$loader",),
            "step": (STEP,),
            "encode": ENCODE,
            "make": ("make_loader", "build_loader", "loader_for", "batches_of"),
            "arg": ("$data", "dataset=$data", "$data, batch_size=16, shuffle=True", "$data, shuffle=True"),
            "copy": COPY_TO_GPU[:3],
        },
        select=("TL101",),
    )
    for frame, files in TEXT_FRAMES.items()
]

# D: the evaluation loader of a factory of another file handed to an evaluator object: its `__call__`
# iterates the parameter (directly, or through an iterator bound first) and moves the batches.
EVALUATOR_DATA = IMPORTS + IMAGE_FILES + """

def get_eval_loader(root):
    full = $dataset
    return $DL(full, shuffle=False, $settings
"""
EVALUATOR_MAIN = IMPORTS + "from data import get_eval_loader\n" + pools.NET_CLASS + GPU + """

class $evaluator:
    def __init__(self, num_classes=10):
        self.num_classes = num_classes

    @torch.no_grad()
    def __call__(self, $model, $dl):
        correct = 0
        $iterate
            $copy
            correct += ($model($x).argmax(1) == $y).sum().item()
        return correct


def main():
    $model = Net().to(device)
    $val = get_eval_loader("data/val")
    $call


main()
"""
EVALUATOR_SLOTS = {
    "evaluator": ("Evaluator", "MscEval", "Scorer", "Metric"),
    "dl": ("dl", "loader", "data_loader", "batches"),
    "iterate": (
        "for $x, $y in $dl:",
        "for i, ($x, $y) in enumerate($dl):",
        "diter = enumerate(tqdm($dl))\nfor i, ($x, $y) in diter:",
        "if args.workers > 8:\n    diter = enumerate($dl)\nelse:\n    diter = enumerate(tqdm($dl))\nfor i, ($x, $y) in diter:",
        "it = iter($dl)\nfor step in range(len($dl)):\n    $x, $y = next(it)",
    ),
    "call": (
        "evaluate = $evaluator()\nprint(evaluate($model, $val))",
        "print($evaluator(10)($model, $val))",
        "scorer = $evaluator(num_classes=10)\naccuracy = scorer($model, $val)\nprint(accuracy)",
    ),
}
EVALUATOR_OBJECT = [
    Shape(
        name=f"{name}/evaluator-object",
        files={"data.py": EVALUATOR_DATA, "main.py": EVALUATOR_MAIN},
        slots={**NAMES, **EVALUATOR_SLOTS, "dataset": DISK, "settings": settings, "copy": copy},
        select=select,
    )
    for name, settings, copy, select in (
        ("pinned-blocking-copy", SETTINGS_PINNED, COPY_PINNED, ("TL103",)),
        ("pin-missing", SETTINGS_D, COPY_TO_GPU[:3], ("TL102",)),
    )
]

# D: pinning switched by a configuration the file cannot see (`config["pin_memory"]`, `cfg.DATA.PIN_MEMORY`):
# it pins on the runs that turn it on, so blocking copies are reported (TL103) and the loader is not (TL102).
CONFIG_IMPORTS = "import yaml\nfrom omegaconf import OmegaConf\n\nconfig = yaml.safe_load(open(\"config.yaml\"))\ncfg = OmegaConf.load(\"config.yaml\")\n"
SETTINGS_SWITCHED = (
    'batch_size=32, num_workers=4, pin_memory=config["pin_memory"])',
    "batch_size=32, num_workers=config[\"num_workers\"], pin_memory=cfg.DATA.PIN_MEMORY)",
    "batch_size=32, pin_memory=cfg.pin_mem)",
)
CONFIG_SWITCH = shapes(
    "pinned-blocking-copy/config-switch",
    GPU,
    {"dataset": DISK, "settings": SETTINGS_SWITCHED, "copy": COPY_PINNED},
    ("TL102", "TL103"),
)
for shape in CONFIG_SWITCH:
    shape.files.update({k: v.replace("CONFIG = {", CONFIG_IMPORTS + "CONFIG = {", 1) for k, v in shape.files.items()})

# D: batches handed on the host to a DataParallel model, which copies them to its GPUs on every call: pinning
# pays (TL102 on an unpinned loader), and there is no copy to make non-blocking (TL103 silent when pinned).
PARALLEL_MAIN = IMPORTS + pools.NET_CLASS + GPU + """

def $run(cfg, $model, dataset):
    $wrap
    $loader = $DL(dataset, shuffle=False, $settings
    with torch.no_grad():
        $header
            $call
            print($out.shape)
"""
PARALLEL_SLOTS = {
    "run": ("evaluate", "run_eval", "predict_all"),
    "wrap": (
        "$model = nn.DataParallel($model)\n$model = $model.cuda()",
        "$model = nn.DataParallel($model).cuda()",
        "$model = torch.nn.DataParallel($model, device_ids=[0, 1]).to(device)",
    ),
    "call": ("$out = $model($x)", "$out = $model($x.float())", "$out = $model($x)[0]"),
    "out": ("outputs", "out", "y_hat"),
    "header": tuple(h.replace("$loader", "$L") for h in pools.HEADER),
    "L": ("$loader",),
}
DATA_PARALLEL = [
    Shape(
        name=f"{name}/data-parallel-input",
        files={"main.py": PARALLEL_MAIN},
        slots={**NAMES, **PARALLEL_SLOTS, "settings": settings},
        select=("TL102", "TL103"),
    )
    for name, settings in (("pin-missing", SETTINGS_D), ("pinned-blocking-copy", SETTINGS_PINNED))
]

SHAPES = SHAPES_C + SHAPES_D + SHAPES_PINNED + EVALUATOR_OBJECT + CONFIG_SWITCH + DATA_PARALLEL + DICT_BATCHES + DICT_PINNED + IN_MEMORY_PIN + CPU_ONLY + IN_MEMORY + PEEKED + PRE_TOKENISED

LIMIT = 6

# Shapes the model does not judge right yet, with what it lacks.
MISSING: dict[str, str] = {
    f"pin-missing/in-memory/{frame}": (
        "tensors in memory batched in the main process are reported only when a training step of the loader's own "
        "file reads them: following the step into another file reported small batches (token ids, GAIL expert "
        "pairs) that the tune labels judge false positives; what tells them apart (bytes per batch) is not known"
    )
    for frame in ("factory_tuple", "factory_dict", "engine_file", "trainer_file", "factory_in_method", "deep")
}


def _cases() -> list:
    return [
        pytest.param(shape, id=shape.name, marks=[pytest.mark.xfail(strict=True, reason=MISSING[shape.name])] if shape.name in MISSING else [])
        for shape in SHAPES
    ]


@pytest.mark.parametrize("shape", _cases())
def test_loader_findings_do_not_depend_on_spelling(shape: Shape) -> None:
    failures = [report for choice in shape.choices(limit=LIMIT) if (report := check(shape, choice))]
    assert not failures, f"{len(failures)} of {LIMIT} variants differ; first:\n{failures[0]}"


def _canonical(frame: str) -> list[dict[str, str]]:
    """The base spelling of the unpinned, single-process loader shape in a frame, with each setting that
    leaves both workers and pinning to be chosen, and each plain copy to the GPU."""
    shape = next(s for s in SHAPES_C if s.name.endswith(f"/{frame}"))
    base = shape.choices(limit=1)[0]
    return [
        render(shape, {**base, "settings": settings, "copy": copy})
        for settings in (0, 1, 4)  # num_workers missing or 0, pin_memory missing or False
        for copy in (0, 1)
        if copy == 0 or settings == 0
    ]


def _loader_settings(text: str) -> list[set[str]]:
    calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "DataLoader"]
    return [{k.arg for k in c.keywords if k.arg is not None and not (isinstance(k.value, ast.Constant) and k.value.value in (0, False))} for c in calls]


@pytest.mark.parametrize("frame", ["script", "function", "method"])
def test_worker_and_pinning_fixes_compose_in_one_run(frame: str) -> None:
    from torchlint.lint.api import lint_source

    select = ["TL101", "TL102", "TL103"]
    for files in _canonical(frame):
        fixed = lint_source(files["main.py"], "main.py", select=select, fix=True, unsafe_fixes=True)
        assert fixed.fixed_text is not None and not fixed.findings, fixed.findings
        settings = _loader_settings(fixed.fixed_text)  # parses, and every loader got both settings
        assert len(settings) == 2 and all({"num_workers", "pin_memory"} <= s for s in settings), fixed.fixed_text
        assert "non_blocking=True" in fixed.fixed_text  # the copies from the now pinned loaders overlap
        again = lint_source(fixed.fixed_text, "main.py", select=select, fix=True, unsafe_fixes=True)
        assert not again.findings and again.fixed_text in (None, fixed.fixed_text)


def test_fixes_compose_across_files_in_one_cli_run(tmp_path) -> None:
    """`torchlint check --fix --unsafe-fixes` on a project whose loaders are built by a factory of another
    file: one run gives the factory's loaders both workers and pinning. The copies in the training file
    become blocking copies from pinned memory only then (TL103): the next run makes them `non_blocking`,
    and one more changes nothing."""
    from click.testing import CliRunner

    from torchlint.cli import cli

    for name, text in _canonical("factory_tuple")[0].items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    command = ["check", "--fix", "--unsafe-fixes", "--no-cache", "--select", "TL101,TL102,TL103", str(tmp_path)]
    first = CliRunner().invoke(cli, command)
    assert first.exit_code == 0, first.output
    settings = _loader_settings((tmp_path / "data.py").read_text(encoding="utf-8"))
    assert len(settings) == 2 and all({"num_workers", "pin_memory"} <= s for s in settings)
    second = CliRunner().invoke(cli, command)
    main = (tmp_path / "main.py").read_text(encoding="utf-8")
    assert second.exit_code == 0 and main.count("non_blocking=True") == 4, main  # two copies in each loop
    ast.parse(main)
    before = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()}
    third = CliRunner().invoke(cli, command)
    assert third.exit_code == 0 and {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()} == before
