"""Family C: whether worker processes could take loading off the training process, told from what the dataset
does and how the program uses the loader, however it is spelt.

Silent: a Dataset class of another file whose `__getitem__` only indexes tensors it holds, also through
`if`/`else` branches (`return self.x[i], self.y[i]` when labels exist, else `self.x[i]`), bound alone or in a
parallel assignment (`train_set, valid_set = Frames(x, y), Frames(vx, vy)`); a loader read only
by `next(iter(loader))`, also once per epoch inside a loop (each fresh iterator yields one batch, and
workers would start again for each); a Dataset class whose `__getitem__` moves each item to the GPU, which
a worker process cannot do; a notebook whose program never puts anything on an accelerator. Near misses
stay reported: a branch that reads a file or applies a transform, an iterator kept across steps
(`it = iter(loader)` then `next(it)` per step), a `__getitem__` that moves items to the CPU, the same
program with its model on the GPU."""

from __future__ import annotations

import json

import pytest

from tests.generalisation.variants import Shape, differing, findings

LIMIT = 8

HELD_DATA = '''
import numpy as np
import torch
from torch.utils.data import Dataset


class $dataset_class(Dataset):
    def __init__(self, x, y=None):
        self.$data = x
        self.$labels = y

    def __len__(self):
        return len(self.$data)

    def __getitem__(self, $index):
        $getitem
'''

HELD_TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from dataset import $dataset_class

features, targets = torch.randn(1000, 39), torch.randint(0, 41, (1000,))
$build
loader = DataLoader(train_set, batch_size=64, shuffle=True)  $expect
model = nn.Linear(39, 41).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

HELD_BRANCHES = (
    """
    if self.$labels is not None:
        return self.$data[$index], self.$labels[$index]
    else:
        return self.$data[$index]
    """,
    """
    if self.$labels is None:
        return self.$data[$index]
    return self.$data[$index], self.$labels[$index]
    """,
    """
    x = self.$data[$index]
    if self.$labels is not None:
        y = self.$labels[$index]
        return x.float(), y
    return x.float()
    """,
    """
    if self.$labels is None: return torch.as_tensor(self.$data[$index])
    return torch.as_tensor(self.$data[$index]), self.$labels[$index]
    """,
)

WORK_IN_BRANCHES = (
    """
    x = self.$data[$index]
    if self.$labels is not None:
        x = np.load("cache/%d.npy" % $index)
    return x, self.$labels[$index]
    """,
    """
    x = self.$data[$index]
    if self.$labels is not None:
        x = self.transform(x)
    return x, self.$labels[$index]
    """,
)

HELD_SLOTS = {
    "dataset_class": ("LibriDataset", "FeatureSet", "Frames"),
    "data": ("data", "features"),
    "labels": ("label", "targets"),
    "index": ("item", "idx"),
    "build": (
        "train_set = $dataset_class(features, targets)",
        "train_set, valid_set = $dataset_class(features, targets), $dataset_class(features[:100], targets[:100])",
        "valid_set, train_set = [$dataset_class(features[:100]), $dataset_class(features, targets)]",
    ),
}

PEEK_TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

train_set = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
test_set = datasets.MNIST("data", train=False, transform=transforms.ToTensor())
train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)
$peeked = DataLoader(test_set, batch_size=100, shuffle=True)  $expect
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10)).to(device)
optimizer = torch.optim.Adam(model.parameters())
$before_loop
for epoch in range($epochs):
    for x, y in train_loader:
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    $read
    print(model(x_eval.to(device)).argmax(1).eq(y_eval.to(device)).float().mean())
"""

PEEK_SLOTS = {
    "peeked": ("test_loader", "eval_loader", "val_dl"),
    "epochs": ("10", "num_epochs"),
}

DEVICE_DATA = '''
import torch
from PIL import Image
from torch.utils.data import Dataset

device = torch.device("$where")


class $dataset_class(Dataset):
    def __init__(self, paths, transform):
        self.paths = paths
        self.transform = transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        image = Image.open(self.paths[idx]).convert("RGB")
        $moved
'''

DEVICE_TRAIN = """
import glob

import torch
from torch.utils.data import DataLoader
from torchvision import models, transforms

$definition
features = models.alexnet(weights="DEFAULT").features.to(device).eval()
$holder = DataLoader($dataset_class(sorted(glob.glob("images/*.png")), transforms.ToTensor()), batch_size=256)  $expect
with torch.no_grad():
    out = [features(images).flatten(1).cpu() for images in $holder]
"""

DEVICE_SLOTS = {
    "dataset_class": ("ImageDataset", "Frames"),
    "holder": ("loader", "images_dataloader"),
    "moved": (
        "return self.transform(image).to(device)",
        "image = self.transform(image)\nreturn image.to(device)",
        "if self.transform:\n    image = self.transform(image).to(device)\nreturn image",
    ),
}

CPU_CELLS = (
    "import torch\nfrom torch.utils import data\nfrom torchvision import datasets, transforms\n$model_line",
    'test_set = datasets.FashionMNIST("./data", train=False, download=True, transform=transforms.ToTensor())\n'
    "test_loader = data.DataLoader(dataset=test_set, batch_size=16)\n",
    "$use",
)

CPU_USES = ("summary(test_loader)", "grid = make_grid(test_loader)", "show_batches(test_loader, 8)")


def _notebook(model_line: str, use: str) -> str:
    cells = [c.replace("$model_line", model_line).replace("$use", use) for c in CPU_CELLS]
    return json.dumps(
        {"cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None} for c in cells],
         "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    )


def _shape(name: str, files: dict[str, str], slots: dict[str, tuple[str, ...]], expect: str) -> Shape:
    return Shape(name, files, {**slots, "expect": (expect,)}, ("TL101",))


SHAPES = [
    _shape(
        "held-tensors-through-branches",
        {"train.py": HELD_TRAIN, "dataset.py": HELD_DATA},
        {**HELD_SLOTS, "getitem": HELD_BRANCHES},
        "",
    ),
    _shape(
        "file-or-transform-in-a-branch",
        {"train.py": HELD_TRAIN, "dataset.py": HELD_DATA},
        {**HELD_SLOTS, "getitem": WORK_IN_BRANCHES},
        "# expect: TL101",
    ),
    _shape(
        "one-batch-per-epoch",
        {"train.py": PEEK_TRAIN},
        {
            **PEEK_SLOTS,
            "before_loop": ("",),
            "read": ("x_eval, y_eval = next(iter($peeked))", "batch = next(iter($peeked))\nx_eval, y_eval = batch"),
        },
        "",
    ),
    _shape(
        "iterator-kept-across-epochs",
        {"train.py": PEEK_TRAIN},
        {**PEEK_SLOTS, "before_loop": ("eval_iter = iter($peeked)",), "read": ("x_eval, y_eval = next(eval_iter)",)},
        "# expect: TL101",
    ),
    _shape(
        "items-moved-to-the-gpu",
        {"train.py": DEVICE_TRAIN.replace("$definition", DEVICE_DATA).replace('"$where"', '"cuda:0"')},
        DEVICE_SLOTS,
        "",
    ),
    _shape(
        "items-moved-to-the-cpu",
        {"train.py": DEVICE_TRAIN.replace("$definition", DEVICE_DATA.replace('"$where"', '"cpu"') + 'gpu = torch.device("cuda")')
         .replace("features.to(device)", "features.to(gpu)").replace("features(images)", "features(images.to(gpu))")},
        DEVICE_SLOTS,
        "# expect: TL101",
    ),
]


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_what_the_dataset_does_and_how_the_loader_is_used_decide(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message


@pytest.mark.parametrize("use", CPU_USES)
@pytest.mark.parametrize(
    ("model_line", "reported"),
    [("", False), ("model = torch.nn.Linear(784, 10).cuda()", True), ('device = torch.device("cuda")', True)],
)
def test_a_notebook_that_never_uses_an_accelerator_is_silent(use: str, model_line: str, reported: bool) -> None:
    got = findings({"explore.ipynb": _notebook(model_line, use)}, ("TL101",))
    assert bool(got) == reported, got
