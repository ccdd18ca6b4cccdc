"""Loaders built by a factory function of another file: settings given through the factory's parameters,
and batches read through a method of this file that returns the factory's result."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_testing import project_findings as _findings

from torchlint.lint.api import lint_paths

FACTORY = """
import torch.utils.data as data
import torchvision.datasets as datasets

def loader(path, batch_size=32, num_workers=4, pin_memory={pin}):
    return data.DataLoader(datasets.ImageFolder(path), batch_size=batch_size, shuffle=True,
                           num_workers=num_workers, pin_memory=pin_memory)
"""

FINE_TUNER = """
import torch
import dataset

class FineTuner:
    def __init__(self, train_path, test_path, model):
        self.train_data_loader = dataset.loader(train_path{extra})
        self.test_data_loader = dataset.loader(test_path{extra})
        self.model = model
        self.criterion = torch.nn.CrossEntropyLoss()

    def test(self):
        return
        for batch, label in self.test_data_loader:
            print(self.model(batch.cuda()).argmax(1).eq(label).sum())

    def train_batch(self, optimizer, batch, label):
        if args.use_cuda:
            batch = batch.cuda()
            label = label.cuda()
        self.criterion(self.model(batch), label).backward()
        optimizer.step()

    def train_epoch(self, optimizer):
        for i, (batch, label) in enumerate(self.train_data_loader):
            self.train_batch(optimizer, batch, label)
"""


def test_pinned_by_the_factory_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    files = {"dataset.py": FACTORY.format(pin="True"), "finetune.py": FINE_TUNER.format(extra="")}
    # both copies of the training batch, made in the method the loop hands them to; the loop after
    # `return` in `test` never runs
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == [("finetune.py", 19, "TL103"), ("finetune.py", 20, "TL103")]


def test_unpinned_by_the_factory_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    files = {"dataset.py": FACTORY.format(pin="False"), "finetune.py": FINE_TUNER.format(extra="")}
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == [("dataset.py", 6, "TL102")]


@pytest.mark.parametrize("extra", [", pin_memory=True", ", pin_memory=args.pin_memory"])
def test_callers_that_pass_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str) -> None:
    # every caller pins, or passes a switch that pins on the runs that turn it on: not a TL102, but a TL103
    monkeypatch.chdir(tmp_path)
    files = {"dataset.py": FACTORY.format(pin="False"), "finetune.py": FINE_TUNER.format(extra=extra)}
    expected = [("finetune.py", 19, "TL103"), ("finetune.py", 20, "TL103")]
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == expected


DATA_FACTORY = """
from torch.utils.data import DataLoader
from data_loader import SeriesDataset

def data_provider(args, flag):
    data_set = SeriesDataset(args.root_path, flag=flag)
    data_loader = DataLoader(data_set, batch_size=args.batch_size, shuffle=flag == "train",
                             num_workers=args.num_workers, drop_last=True{pin})
    return data_set, data_loader
"""

SERIES = """
import pandas as pd
from torch.utils.data import Dataset

class SeriesDataset(Dataset):
    def __init__(self, root_path, flag="train"):
        self.data = pd.read_csv(root_path).values

    def __getitem__(self, index):
        return self.data[index:index + 96], self.data[index + 96:index + 120]

    def __len__(self):
        return len(self.data) - 120
"""

EXPERIMENT = """
import torch
from data_factory import data_provider

class Exp:
    def __init__(self, args):
        self.args = args
        self.device = torch.device("cuda:{}".format(args.gpu)) if args.use_gpu else torch.device("cpu")
        self.model = torch.nn.Linear(96, 24).to(self.device)

    def _get_data(self, flag):
        data_set, data_loader = data_provider(self.args, flag)
        return data_set, data_loader

    def train(self, optimizer):
        train_data, train_loader = self._get_data(flag="train")
        for i, (batch_x, batch_y) in enumerate(train_loader):
            batch_x = batch_x.float().to(self.device)
            batch_y = batch_y.float().to(self.device)
            ((self.model(batch_x) - batch_y) ** 2).mean().backward()
            optimizer.step()
"""


def test_loader_returned_through_a_method_of_the_experiment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    files = {"data_factory.py": DATA_FACTORY.format(pin=""), "data_loader.py": SERIES, "exp.py": EXPERIMENT}
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == [("data_factory.py", 7, "TL102")]
    files["data_factory.py"] = DATA_FACTORY.format(pin=", pin_memory=True")
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == [("exp.py", 18, "TL103"), ("exp.py", 19, "TL103")]


MOVE_HELPERS = """
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

def to_device(batch):
    return [b.to(device) for b in batch]

def describe(batch):
    return [b.shape for b in batch]
"""

LOADERS = """
from torch.utils.data import DataLoader
from torchvision import datasets

def get_loader(root, batch_size):
    return DataLoader(datasets.ImageFolder(root), batch_size=batch_size, shuffle=True, num_workers=4)

def build_dataloader(cfg):
    return DataLoader(datasets.ImageFolder(cfg.root), batch_size=cfg.batch_size, num_workers=cfg.workers,
                      pin_memory=cfg.pin_memory)
"""

TRAIN = """
import torch
from data import get_loader, build_dataloader
from utils import to_device, describe

def main(args, cfg, model):
    for batch in get_loader(args.root, 32):
        print(describe(batch))
    for batch in get_loader(args.root, 32):
        x, y = to_device(batch)
        model(x).sum().backward()
    for batch in build_dataloader(cfg):
        x, y = to_device(batch)
        model(x).sum().backward()
"""


def test_batches_moved_by_a_helper_of_another_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    files = {"utils.py": MOVE_HELPERS, "data.py": LOADERS, "train.py": TRAIN}
    # the loader of `get_loader` is reported once, for the loop whose helper moves its batches; the one whose
    # pin_memory comes from the config may be pinned already
    assert _findings(tmp_path, files, ["TL102"]) == [("data.py", 6, "TL102")]
    files["train.py"] = TRAIN.replace("x, y = to_device(batch)", "x, y = describe(batch)")
    assert _findings(tmp_path, files, ["TL102"]) == []


SWITCHES = """
import argparse
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--pin_memory", action="store_true")
parser.add_argument("--pin-default", type=bool, default=False)
args = parser.parse_args()

def main(dataset, model, device):
    switched = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=args.pin_memory)
    for x, y in switched:
        model(x.to(device)).sum().backward()
    by_default = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=args.pin_default)
    for x, y in by_default:
        model(x.to(device)).sum().backward()
"""


def test_pin_memory_from_a_command_line_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a switch pins on one path: non_blocking pays there (TL103) and pin_memory=True would override the
    # user's choice (no TL102); a typed option may be given any value: nothing is said
    monkeypatch.chdir(tmp_path)
    assert _findings(tmp_path, {"train.py": SWITCHES}, ["TL102", "TL103"]) == [("train.py", 13, "TL103")]


DATA_MODULE = """
from torch.utils.data import DataLoader
from torchvision import datasets

class CIFARData:
    def __init__(self, args):
        self.args = args

    def train_dataloader(self):
        return DataLoader(datasets.CIFAR10(self.args.root), batch_size=self.args.batch_size, num_workers=4{pin})

class MNISTData:
    def train_dataloader(self):
        return DataLoader(datasets.MNIST("."), batch_size=8, num_workers=2)
"""

FIT = """
import torch
from datamodule import CIFARData

def main(args, model):
    data = CIFARData(args)
    loader = data.train_dataloader()
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        model(x).sum().backward()
"""


def test_loader_returned_by_a_method_of_a_class_of_another_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    files = {"datamodule.py": DATA_MODULE.format(pin=""), "fit.py": FIT}
    # only the loader of the class the program builds; the other class's method of the same name is never called
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == [("datamodule.py", 10, "TL102")]
    files["datamodule.py"] = DATA_MODULE.format(pin=", pin_memory=True")
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == [("fit.py", 9, "TL103"), ("fit.py", 9, "TL103")]


WORKER_FACTORIES = """
from torch.utils.data import DataLoader
from torchvision import datasets

def get_dataloader(root, batch_size=32, num_workers=0):
    return DataLoader(datasets.ImageFolder(root), batch_size=batch_size, shuffle=True, num_workers=num_workers)

def get_test_loader(root, batch_size=32, num_workers=0):
    return DataLoader(datasets.ImageFolder(root), batch_size=batch_size, num_workers=num_workers)
"""

WORKER_CALLERS = """
from utils import get_dataloader, get_test_loader

def main(model):
    for x, y in get_dataloader("train"):
        model(x.cuda()).sum().backward()
    for x, y in get_test_loader("test", num_workers=4):
        model(x.cuda())
"""


def test_num_workers_from_the_factory_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    files = {"utils.py": WORKER_FACTORIES, "train.py": WORKER_CALLERS}
    # the caller that leaves the default loads in the main process; the one that passes 4 does not
    assert _findings(tmp_path, files, ["TL101"]) == [("utils.py", 6, "TL101")]
    results = lint_paths([str(tmp_path / "utils.py")], select=["TL101"])
    assert results[0].findings and results[0].findings[0].fix is None  # the callers choose, not that line


KWARGS_FACTORY = """
from torch.utils.data import DataLoader
from torchvision import datasets

def get_data_loader(data_root=None, batch_size=64, num_workers=8, pin_memory={pin}, **kwargs):
    loader_kwargs = {{"num_workers": num_workers, "pin_memory": pin_memory}}
    return DataLoader(datasets.ImageFolder(data_root), batch_size=batch_size, shuffle=True, **loader_kwargs)
"""

KWARGS_CALLER = """
from utils import get_data_loader

def run(config, G, device):
    loader = get_data_loader(**config)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        G(x, y).mean().backward()
"""


def test_factory_called_with_a_config_dict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `**config` may or may not hold pin_memory: pinned by default is pinned on some path (TL103); unpinned
    # by default may be pinned by the config (no TL102)
    monkeypatch.chdir(tmp_path)
    files = {"utils.py": KWARGS_FACTORY.format(pin="True"), "train.py": KWARGS_CALLER}
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == [("train.py", 7, "TL103"), ("train.py", 7, "TL103")]
    files["utils.py"] = KWARGS_FACTORY.format(pin="False")
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == []


INFINITE_LOADER = """
import torch
from torch.utils.data import DataLoader

class InfiniteDataLoader:
    def __init__(self, dataset, **kwargs):
        sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=int(1e10))
        self.train_loader = DataLoader(dataset, sampler=sampler, **kwargs)
        self.data_iter = iter(self.train_loader)

    def next(self):
        try:
            batch = next(self.data_iter)
        except StopIteration:
            self.data_iter = iter(self.train_loader)
            batch = next(self.data_iter)
        return batch

batch_loader = InfiniteDataLoader(train_dataset, batch_size=32, num_workers=4{pin})
while True:
    batch = batch_loader.next()
    X, Y = [t.to("cuda") for t in batch]
    model(X, Y).backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("pin", "expected"),
    [(", pin_memory=True", [("train.py", 22, "TL103")]), ("", [("train.py", 8, "TL102")])],
    ids=["pinned", "unpinned"],
)
def test_batches_handed_out_by_a_method_of_a_loader_wrapper(tmp_path: Path, pin: str, expected: list) -> None:
    # the wrapper's `next()` returns `next(self.data_iter)`: every call in the loop reads one batch
    assert _findings(tmp_path, {"train.py": INFINITE_LOADER.replace("{pin}", pin)}, ["TL102", "TL103"]) == expected


HELD_DATA_MODULE = """
import torch
from torchvision import datasets, transforms

class DataModule:
    def __init__(self, args):
        train_set = datasets.CIFAR10(args.root, train=True, transform=transforms.ToTensor())
        self.train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.bs, num_workers=4{pin})

class Trainer:
    def __init__(self, args, model):
        self.data = DataModule(args)
        self.model = model.to(args.device)
        self.device = args.device

    def train_epoch(self, optimizer):
        for x, y in self.data.train_loader:
            x, y = x.to(self.device), y.to(self.device)
            torch.nn.functional.cross_entropy(self.model(x), y).backward()
            optimizer.step()
"""


@pytest.mark.parametrize(("pin", "expected"), [("", [("train.py", 8, "TL102")]), (", pin_memory=True", [])])
def test_a_loader_held_by_an_object_another_class_holds(tmp_path: Path, pin: str, expected: list) -> None:
    # `self.data.train_loader`: the loader the data module built, iterated by the trainer
    assert _findings(tmp_path, {"train.py": HELD_DATA_MODULE.replace("{pin}", pin)}, ["TL102"]) == expected
