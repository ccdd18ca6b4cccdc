"""Data-loading rules across the project's files: datasets, loaders and batches defined in one file and used
in another."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from torchlint.lint.api import lint_paths


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _findings(paths: list[Path], select: list[str]) -> list[tuple[str, int, str]]:
    results = lint_paths([str(p) for p in paths], select=select)
    assert all(r.error is None and not r.notes for r in results), [(r.path, r.error, r.notes) for r in results]
    return sorted((Path(r.path).name, f.line, f.code) for r in results for f in r.findings)


DATA_UTILS = """
import torch.utils.data as data

class PairsInMemory(data.Dataset):
    def __init__(self, pairs, labels, extra, training):
        self.pairs, self.labels, self.extra, self.training = pairs, labels, extra, training

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        features = self.extra if self.training else self.pairs
        user = features[idx][0]
        return user, self.labels[idx]

class FromDisk(data.Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, idx):
        return open(self.paths[idx]).read()
"""

MAIN = """
import torch
import torch.utils.data as data

import data_utils

test_dataset = data_utils.PairsInMemory(pairs, labels, [], False)
disk_dataset = data_utils.FromDisk(paths)
test_loader = data.DataLoader(test_dataset, batch_size=100, num_workers=0)
disk_loader = data.DataLoader(disk_dataset, batch_size=100)
for user, label in test_loader:
    model(user.cuda())
for batch in disk_loader:
    model(batch.cuda())
"""


def test_dataset_class_of_a_module_imported_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"data_utils.py": DATA_UTILS, "main.py": MAIN})
    # `import data_utils` ... `data_utils.PairsInMemory(...)`: its items are indexed from memory
    assert _findings([tmp_path / "main.py"], ["TL101"]) == [("main.py", 10, "TL101")]


def _notebook(*cells: str) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
                for c in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def test_a_notebook_cell_that_only_shows_a_loader_does_not_read_it(tmp_path: Path) -> None:
    setup = "import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'\nmodel.eval()\n"
    build = (
        "train_loader = DataLoader(train_data, batch_size=32)\n"
        "test_loader = DataLoader(test_data, batch_size=32)\n"
        "train_loader, test_loader\n"
    )
    train = "for x, y in train_loader:\n    model(x.to(device)).sum().backward()\n"
    path = tmp_path / "nb.ipynb"
    path.write_text(_notebook(setup, build, train), encoding="utf-8")
    first = [f.line for r in lint_paths([str(path)], select=["TL101"]) for f in r.findings]
    assert len(first) == 1  # the training loader only
    # read in a later cell: reported too
    path.write_text(_notebook(setup, build, train + "for x, y in test_loader:\n    model(x.to(device))\n"), encoding="utf-8")
    both = [f.line for r in lint_paths([str(path)], select=["TL101"]) for f in r.findings]
    assert len(both) == 2 and first[0] == min(both)


TEXT_DATA = """
import torch
from torch.utils.data import Dataset

class Sentences(Dataset):
    def __init__(self, examples, vocab):
        self.examples, self.vocab = examples, vocab

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, idx):
        tokens, label = self.examples[idx]
        ids = [self.vocab.get(t, 1) for t in tokens]
        return torch.tensor(ids, dtype=torch.long), torch.tensor(label)

    @classmethod
    def splits(cls, root):
        examples = read_examples(root)
        vocab = build_vocab(examples)
        train = cls(examples[:-100], vocab)
        dev = cls(examples[-100:], vocab)
        return train, dev, vocab

    @classmethod
    def from_files(cls, root):
        return Lazy(root), Lazy(root), None

def pad_batch(batch, min_len=5):
    texts, labels = zip(*batch)
    longest = max(max(len(t) for t in texts), min_len)
    padded = torch.zeros(len(texts), longest, dtype=torch.long)
    for i, t in enumerate(texts):
        padded[i, : len(t)] = t
    return padded, torch.stack(labels)

def augment_batch(batch):
    return [noisy(t) for t in batch]
"""

TEXT_MAIN = """
import torch
from torch.utils.data import DataLoader
import text_data

if args.sst:
    train_ds, dev_ds, vocab = text_data.Sentences.splits(args.root)
    test_ds = None
else:
    train_ds, dev_ds, vocab = text_data.Sentences.splits(args.other_root)
    test_ds = dev_ds
train_iter = DataLoader(train_ds, batch_size=64, collate_fn=text_data.pad_batch)
dev_iter = DataLoader(dev_ds, batch_size=len(dev_ds), collate_fn=text_data.pad_batch)
if test_ds is not None:
    test_iter = DataLoader(test_ds, batch_size=64, collate_fn=text_data.pad_batch)
augmented = DataLoader(train_ds, batch_size=64, collate_fn=text_data.augment_batch)
lazy_train, lazy_dev, _ = text_data.Sentences.from_files(args.root)
lazy = DataLoader(lazy_train, batch_size=64, collate_fn=text_data.pad_batch)
for loader in (train_iter, dev_iter, test_iter, augmented, lazy):
    for x, y in loader:
        model(x.cuda()).sum().backward()
"""


def test_tokenised_dataset_built_by_a_classmethod_and_padded_by_a_collate_of_another_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"text_data.py": TEXT_DATA, "main.py": TEXT_MAIN})
    # in memory, padded only: silent; a collate that does more, or a classmethod that builds other objects: reported
    assert _findings([tmp_path / "main.py"], ["TL101"]) == [("main.py", 16, "TL101"), ("main.py", 18, "TL101")]


LOADERS = """
import torch
from torch.utils.data import DataLoader

def get_training_dataloader(dataset, batch_size=16, num_workers=2):
    training_loader = DataLoader(dataset, shuffle=True, num_workers=num_workers, batch_size=batch_size)
    return training_loader

def create_dataloaders(train_set, test_set, batch_size):
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=4, pin_memory=True)
    test_loader = DataLoader(test_set, batch_size=batch_size, num_workers=4)
    return train_loader, test_loader, train_set.classes

def get_eval_dataloader(dataset):
    return DataLoader(dataset, batch_size=16, num_workers=2)
"""

ENGINE = """
import torch

def train_step(model, dataloader, loss_fn, optimizer, device):
    for batch, (X, y) in enumerate(dataloader):
        X, y = X.to(device), y.to(device)
        loss_fn(model(X), y).backward()
        optimizer.step()

def test_step(model, dataloader, device):
    with torch.inference_mode():
        for X, y in dataloader:
            model(X.to(device))

def train(model, train_dataloader, test_dataloader, loss_fn, optimizer, epochs, device):
    for epoch in range(epochs):
        train_step(model=model, dataloader=train_dataloader, loss_fn=loss_fn, optimizer=optimizer, device=device)
        test_step(model=model, dataloader=test_dataloader, device=device)
"""

TRAIN = """
import torch
import engine
from loaders import get_training_dataloader, get_eval_dataloader
import loaders

device = "cuda" if torch.cuda.is_available() else "cpu"
training_loader = get_training_dataloader(train_set)
eval_loader = get_eval_dataloader(val_set)
train_dataloader, test_dataloader, class_names = loaders.create_dataloaders(train_set, test_set, 32)

def train(epoch):
    for images, labels in training_loader:
        images, labels = images.cuda(), labels.cuda()
        net(images).sum().backward()

for epoch in range(10):
    train(epoch)
print(len(eval_loader))
engine.train(model, train_dataloader, test_dataloader, loss_fn, optimizer, 5, device)
"""


def test_loaders_returned_to_and_passed_from_other_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"loaders.py": LOADERS, "engine.py": ENGINE, "train.py": TRAIN})
    select = ["TL102", "TL103"]
    # the training loader: copied to the GPU in train.py; the evaluation loader: never iterated there
    assert _findings([tmp_path / "loaders.py"], select) == [("loaders.py", 6, "TL102")]
    # engine.py iterates the loaders train.py got from loaders.py: the pinned one's copies block
    assert _findings([tmp_path / "engine.py"], select) == [("engine.py", 6, "TL103"), ("engine.py", 6, "TL103")]
    # a file linted alone and in a full run agree
    together = _findings([tmp_path], select)
    assert [f for f in together if f[0] in ("loaders.py", "engine.py")] == [
        ("engine.py", 6, "TL103"), ("engine.py", 6, "TL103"), ("loaders.py", 6, "TL102")
    ]


def test_a_loader_passed_from_a_file_that_also_calls_with_unknown_loaders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    train = TRAIN + "engine.train(model, external_loader, test_dataloader, loss_fn, optimizer, 5, device)\n"
    _write(tmp_path, {"loaders.py": LOADERS, "engine.py": ENGINE, "train.py": train})
    assert _findings([tmp_path / "engine.py"], ["TL103"]) == []  # one caller passes a loader nothing says is pinned


GAN_LOADERS = """
import torch.utils.data as data_utils

def get_data_loader(args, train_dataset, test_dataset):
    train_dataloader = data_utils.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True)
    test_dataloader = data_utils.DataLoader(test_dataset, batch_size=args.batch_size, shuffle=True)
    return train_dataloader, test_dataloader
"""

GAN_MODEL = """
import torch
from torch.autograd import Variable

class GAN:
    def __init__(self, args):
        self.cuda_index = 0

    def to_variable(self, arg):
        return Variable(arg).cuda(self.cuda_index)

    def train(self, train_loader):
        self.data = self.get_infinite_batches(train_loader)
        for g_iter in range(1000):
            images = self.data.__next__()
            images = self.to_variable(images)
            self.D(images).mean().backward()

    def evaluate(self, test_loader, path):
        self.load_model(path)
        samples = self.G(torch.randn(800, 100, 1, 1).cuda(self.cuda_index))
        return samples

    def get_infinite_batches(self, data_loader):
        while True:
            for i, (images, _) in enumerate(data_loader):
                yield images
"""

GAN_MAIN = """
from loaders import get_data_loader
from gan import GAN

def main(args):
    model = None
    if args.model == "GAN":
        model = GAN(args)
    train_loader, test_loader = get_data_loader(args, train_set, test_set)
    if args.is_train:
        model.train(train_loader)
    else:
        model.evaluate(test_loader, args.path)
"""


def test_a_loader_handed_to_a_method_of_a_class_of_another_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"loaders.py": GAN_LOADERS, "gan.py": GAN_MODEL, "main.py": GAN_MAIN})
    # the training loader: iterated by GAN.train, which moves its batches; the test loader: never iterated
    assert _findings([tmp_path / "loaders.py"], ["TL101", "TL102"]) == [("loaders.py", 5, "TL101"), ("loaders.py", 5, "TL102")]
    evaluates = GAN_MODEL.replace("self.load_model(path)", "self.load_model(path)\n        for x, _ in test_loader:\n            self.D(x)")
    _write(tmp_path, {"gan.py": evaluates})
    assert _findings([tmp_path / "loaders.py"], ["TL101"]) == [("loaders.py", 5, "TL101"), ("loaders.py", 6, "TL101")]


HELPERS = """
from torch.utils.data import DataLoader

def make_loader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)
"""

DATA = """
import torch
from torch.utils.data import TensorDataset

features = torch.load("features.pt")
train_set = TensorDataset(features[:1000], features[1000:2000])
"""

HF_MAIN = """
import torch
from datasets import load_dataset
from helpers import make_loader

raw = load_dataset("imdb")
tokenized = raw.map(lambda b: tokenizer(b["text"], truncation=True), batched=True)
tokenized.set_format("torch")
loader = make_loader(tokenized["train"], 16)
for batch in loader:
    model(**{k: v.cuda() for k, v in batch.items()}).loss.backward()
"""

MEMORY_MAIN = """
import torch
from torch.utils.data import DataLoader
from data import train_set

loader = DataLoader(train_set, batch_size=64)
for x, y in loader:
    model(x.cuda()).sum().backward()
"""


def test_prepared_and_in_memory_datasets_across_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"helpers.py": HELPERS, "data.py": DATA, "main.py": HF_MAIN, "memory.py": MEMORY_MAIN})
    # a tokenised dataset passed through the helper's `dataset` parameter; a dataset built in memory in data.py
    assert _findings([tmp_path / "helpers.py", tmp_path / "memory.py"], ["TL101"]) == []
    images = HF_MAIN.replace('load_dataset("imdb")', 'load_dataset("imagefolder", data_dir="pics")')
    _write(tmp_path, {"main.py": images, "data.py": DATA.replace("TensorDataset(", "FileList(")})
    # items still decoded when read (image columns), a dataset that is not a TensorDataset: reported
    assert _findings([tmp_path / "helpers.py", tmp_path / "memory.py"], ["TL101"]) == [
        ("helpers.py", 5, "TL101"), ("memory.py", 6, "TL101")
    ]


def test_a_loader_returned_to_a_program_that_never_uses_an_accelerator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    loaders = "from torch.utils.data import DataLoader\n\ndef get_loader(ds):\n    return DataLoader(ds, batch_size=32)\n"
    cpu_train = "from loaders import get_loader\n\nfor x, y in get_loader(ds):\n    model(x).sum().backward()\n"
    _write(tmp_path, {"loaders.py": loaders, "train.py": cpu_train})
    assert _findings([tmp_path / "loaders.py"], ["TL101"]) == []  # the whole program runs on the CPU
    _write(tmp_path, {"train.py": cpu_train.replace("model(x)", "model(x.cuda())")})
    assert _findings([tmp_path / "loaders.py"], ["TL101"]) == [("loaders.py", 4, "TL101")]


DATASETS = """
import torch
from torch.utils.data import TensorDataset
from torchvision import datasets, transforms

features = torch.randn(1000, 20)
labels = torch.randint(0, 2, (1000,))
memory_set = TensorDataset(features, labels)


def load_tensors():
    return TensorDataset(torch.randn(100, 20), torch.randint(0, 2, (100,)))


def split_tensors():
    train = TensorDataset(features[:800], labels[:800])
    return train, TensorDataset(features[800:], labels[800:])


def load_images(root):
    return datasets.CIFAR10(root, train=True, transform=transforms.ToTensor())


def split_images(root):
    return load_images(root), datasets.CIFAR10(root, train=False, transform=transforms.ToTensor())
"""

TRAIN_FROM_DATASETS = """
import torch
from torch.utils.data import DataLoader

import datasets_mod
from datasets_mod import load_images, load_tensors, split_images, split_tensors

device = torch.device("cuda")


def fit(model, loader):
    for x, y in loader:
        model(x.to(device)).sum().backward()


def main(model):
    train_set, val_set = split_tensors()
    image_train, image_val = split_images("data")
    loaders = [
        DataLoader(load_tensors(), batch_size=32, shuffle=True),
        DataLoader(train_set, batch_size=32, shuffle=True),
        DataLoader(val_set, batch_size=32),
        DataLoader(datasets_mod.memory_set, batch_size=32),
        DataLoader(load_images("data"), batch_size=32, shuffle=True),
        DataLoader(image_train, batch_size=32, shuffle=True),
    ]
    for loader in loaders:
        fit(model, loader)
"""


def test_datasets_in_memory_built_by_another_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"datasets_mod.py": DATASETS, "train.py": TRAIN_FROM_DATASETS})
    # a TensorDataset returned by a function of another file, one element of a returned pair, a module
    # attribute: silent; torchvision datasets that decode images per item, returned the same ways: reported
    assert _findings([tmp_path / "train.py"], ["TL101"]) == [("train.py", 24, "TL101"), ("train.py", 25, "TL101")]


LOADER_FACTORY = """
from torch.utils.data import DataLoader


def make_data_loader(args, **kwargs):
    train_loader = DataLoader(args.train_set, batch_size=args.batch_size, shuffle=True, **kwargs)
    val_loader = DataLoader(args.val_set, batch_size=args.batch_size, **kwargs)
    return train_loader, val_loader
"""

TRAINER = """
from tqdm import tqdm

from dataloaders import make_data_loader


class Trainer:
    def __init__(self, args, model):
        self.model = model.cuda()
        kwargs = {"num_workers": args.workers, "pin_memory": True}
        self.train_loader, self.val_loader = make_data_loader(args, **kwargs)

    def training(self):
        bar = tqdm(self.train_loader)
        for i, sample in enumerate(bar):
            image, target = sample["image"], sample["label"]
            image, target = image.cuda(), target.cuda()
            self.model(image, target).backward()
"""


def test_settings_passed_through_a_helpers_kwargs_to_loaders_unpacked_into_attributes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"dataloaders.py": LOADER_FACTORY, "train.py": TRAINER})
    files = [tmp_path / "dataloaders.py", tmp_path / "train.py"]
    # pinned through `make_data_loader(args, **kwargs)`: the copies of the training batches block
    assert _findings(files, ["TL102", "TL103"]) == [("train.py", 17, "TL103"), ("train.py", 17, "TL103")]
    _write(tmp_path, {"train.py": TRAINER.replace(', "pin_memory": True', "")})
    # not pinned: the helper's training loader is reported where it is built
    assert _findings(files, ["TL102", "TL103"]) == [("dataloaders.py", 6, "TL102")]


TRAINER_CLASS = """
import torch
import tqdm


class Trainer:
    def __init__(self, model, train_dataloader, test_dataloader=None):
        self.device = torch.device("cuda:0")
        self.model = model.to(self.device)
        self.train_data = train_dataloader
        self.test_data = test_dataloader

    def train(self, epoch):
        self.iteration(epoch, self.train_data)

    def iteration(self, epoch, data_loader):
        data_iter = tqdm.tqdm(enumerate(data_loader), total=len(data_loader))
        for i, data in data_iter:
            data = {key: value.to(self.device) for key, value in data.items()}
            self.model(data).backward()
"""

TRAINER_MAIN = """
from torch.utils.data import DataLoader

from .trainer import Trainer


def main(train_dataset, test_dataset, model):
    train_loader = DataLoader(train_dataset, batch_size=32, num_workers=4)
    test_loader = DataLoader(test_dataset, batch_size=32, num_workers=4)
    trainer = Trainer(model, train_dataloader=train_loader, test_dataloader=test_loader)
    for epoch in range(10):
        trainer.train(epoch)
"""


def test_a_loader_handed_to_a_trainer_class_of_a_package_that_moves_its_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/trainer/__init__.py": "from .pretrain import Trainer\n",
        "pkg/trainer/pretrain.py": TRAINER_CLASS,
        "pkg/main.py": TRAINER_MAIN,
    })
    # the training loader's batches are moved in `iteration`, reached through the constructor and
    # `self.train_data`; the test loader is stored but never iterated
    assert _findings([tmp_path / "pkg" / "main.py"], ["TL102"]) == [("main.py", 8, "TL102")]


def test_a_top_level_loader_imported_by_a_program_that_never_uses_an_accelerator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = """
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    train_set = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    """
    train = """
    import torch
    from data import train_loader

    model = torch.nn.Linear(784, 10)
    for x, y in train_loader:
        torch.nn.functional.cross_entropy(model(x.flatten(1)), y).backward()
    """
    _write(tmp_path, {"data.py": data, "train.py": train})
    # the whole program runs on the CPU: workers would compete with the training threads
    assert _findings([tmp_path / "data.py"], ["TL101"]) == []
    _write(tmp_path, {"train.py": train.replace("(x.flatten(1)), y)", "(x.cuda().flatten(1)), y.cuda())")})
    assert _findings([tmp_path / "data.py"], ["TL101"]) == [("data.py", 6, "TL101")]


def test_loaders_bound_at_the_top_level_of_one_file_and_iterated_in_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = """
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    train_set = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)
    pinned_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
    unused_loader = DataLoader(train_set, batch_size=64, num_workers=4)
    """
    train = """
    import torch
    from data import pinned_loader, train_loader

    device = torch.device("cuda")
    model = torch.nn.Linear(784, 10).to(device)
    for x, y in train_loader:
        x, y = x.to(device), y.to(device)
        torch.nn.functional.cross_entropy(model(x.flatten(1)), y).backward()
    for x, y in pinned_loader:
        x = x.to(device, non_blocking=True)
        y = y.to(device)
        torch.nn.functional.cross_entropy(model(x.flatten(1)), y).backward()
    """
    _write(tmp_path, {"data.py": data, "train.py": train})
    # the unpinned loader whose batches train.py moves; the blocking copy of the pinned one's batches
    assert _findings([tmp_path / "data.py", tmp_path / "train.py"], ["TL102", "TL103"]) == [
        ("data.py", 6, "TL102"), ("train.py", 12, "TL103")
    ]


OPTIONAL_TEST_LOADER = """
from torch.utils.data import DataLoader

def get_loader(args, trainset, testset):
    train_loader = DataLoader(trainset, batch_size=32, num_workers=4, pin_memory=True)
    test_loader = DataLoader(testset, batch_size=32, num_workers=4, pin_memory=True) if testset is not None else None
    return train_loader, test_loader
"""

OPTIONAL_TEST_TRAIN = """
import torch
from data_utils import get_loader

def valid(args, model, test_loader):
    for step, batch in enumerate(test_loader):
        x, y = tuple(t.to(args.device) for t in batch)
        with torch.no_grad():
            model(x)

def train(args, model, trainset, testset):
    train_loader, test_loader = get_loader(args, trainset, testset)
    for step, batch in enumerate(train_loader):
        x, y = tuple(t.to(args.device) for t in batch)
        model(x, y).backward()
        valid(args, model, test_loader)
"""


def test_a_loader_built_only_when_its_dataset_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"data_utils.py": OPTIONAL_TEST_LOADER, "train.py": OPTIONAL_TEST_TRAIN})
    # `DataLoader(...) if testset is not None else None` holds that pinned loader or nothing
    assert _findings([tmp_path / "train.py"], ["TL103"]) == [("train.py", 7, "TL103"), ("train.py", 14, "TL103")]


SYS_PATH_TRAIN = """
import _init_paths
import torch
from core.function import train

loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=4, pin_memory={pin})
for epoch in range(10):
    train(loader, model, optimizer)
"""

SYS_PATH_FUNCTION = """
def train(trainloader, model, optimizer):
    for images, labels in trainloader:
        images = images.cuda()
        labels = labels.long().cuda()
        model(images, labels).mean().backward()
        optimizer.step()
"""


@pytest.mark.parametrize(("pin", "expected"), [("True", [("function.py", 4, "TL103"), ("function.py", 5, "TL103")]),
                                              ("False", [("train.py", 6, "TL102")])])
def test_batches_copied_in_a_module_of_a_folder_scripts_put_on_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pin: str, expected: list
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {
        "tools/_init_paths.py": "import sys\nsys.path.insert(0, '../lib')\n",
        "tools/train.py": SYS_PATH_TRAIN.replace("{pin}", pin),
        "lib/core/__init__.py": "",
        "lib/core/function.py": SYS_PATH_FUNCTION,
    })
    assert _findings([tmp_path], ["TL102", "TL103"]) == expected


LOADER_DICT = """
import torch
from torchvision import datasets, transforms

def get_loaders(root):
    sets = {x: datasets.ImageFolder(root + x, transforms.ToTensor()) for x in ["train", "val"]}
    return {x: torch.utils.data.DataLoader(sets[x], batch_size=4, shuffle=True, num_workers=4{pin}) for x in ["train", "val"]}

class Trainer:
    def __init__(self, model, loaders):
        self.model = model
        self.loaders = loaders

    def run_epoch(self, phase):
        for inputs, labels in self.loaders[phase]:
            inputs, labels = inputs.cuda(), labels.cuda()
            torch.nn.functional.cross_entropy(self.model(inputs), labels).backward()

trainer = Trainer(torch.nn.Linear(4, 2).cuda(), get_loaders("/data/"))
for epoch in range(10):
    trainer.run_epoch("train")
"""


@pytest.mark.parametrize(("pin", "expected"), [("", [("train.py", 7, "TL102")]), (", pin_memory=True", [])])
def test_a_dict_of_loaders_returned_by_a_function_and_held_by_a_trainer(tmp_path: Path, pin: str, expected: list) -> None:
    _write(tmp_path, {"train.py": LOADER_DICT.replace("{pin}", pin)})
    assert _findings([tmp_path / "train.py"], ["TL102"]) == expected


def test_a_notebook_loader_rebound_before_the_training_cell(tmp_path: Path) -> None:
    setup = "import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'\n"
    first = "train_loader = DataLoader(train_data, batch_size=1, num_workers=1)\nimg, label = next(iter(train_loader))\n"
    second = "train_loader = DataLoader(train_data, batch_size=32, num_workers=4, pin_memory=True)\n"
    step = "def train_step(model, loader):\n    for x, y in loader:\n        model(x.to(device)).sum().backward()\n"
    run = "for epoch in range(5):\n    train_step(model, train_loader)\n"
    path = tmp_path / "nb.ipynb"
    # the cells run top to bottom: the training cell gets the pinned loader, the first one is only peeked at
    path.write_text(_notebook(setup, first, second, step, run), encoding="utf-8")
    found = sorted((f.line, f.code) for r in lint_paths([str(path)], select=["TL102", "TL103"]) for f in r.findings)
    assert [code for _, code in found] == ["TL103"]
    # trained before the rebinding: the first loader's batches are the ones copied
    path.write_text(_notebook(setup, first, step, run, second), encoding="utf-8")
    found = sorted((f.line, f.code) for r in lint_paths([str(path)], select=["TL102", "TL103"]) for f in r.findings)
    assert [code for _, code in found] == ["TL102"]
