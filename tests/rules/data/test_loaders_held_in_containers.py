"""Loaders that a factory of another file returns in a dict, read by key in a training script or a trainer."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_testing import project_findings as _findings

FACTORY = """
from torch.utils.data import DataLoader

def build_loaders(train_set, val_set, batch_size):
    return {{
        "train": DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=4{pin}),
        "val": DataLoader(val_set, batch_size=batch_size, num_workers=4{pin}),
    }}
"""

SCRIPT = """
import torch
from data import build_loaders

def run(model, optimizer, train_set, val_set):
    loaders = build_loaders(train_set, val_set, 64)
    for x, y in loaders["train"]:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

TRAINER = """
import torch
from data import build_loaders

class Trainer:
    def __init__(self, model, train_set, val_set):
        self.model = model.cuda()
        self.loaders = build_loaders(train_set, val_set, 64)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def fit(self):
        for phase in ["train", "val"]:
            for images, labels in self.loaders[phase]:
                images, labels = images.cuda(), labels.cuda()
                loss = torch.nn.functional.cross_entropy(self.model(images), labels)
                if phase == "train":
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
"""


@pytest.mark.parametrize(
    ("reader", "lines"),
    [(SCRIPT, [6]), (TRAINER, [6, 7])],  # `loaders["train"]` reads one entry, `self.loaders[phase]` both
)
def test_unpinned_loaders_of_a_returned_dict(tmp_path: Path, reader: str, lines: list[int]) -> None:
    files = {"data.py": FACTORY.format(pin=""), "train.py": reader}
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == [("data.py", line, "TL102") for line in lines]


def test_pinned_loaders_of_a_returned_dict_copied_synchronously(tmp_path: Path) -> None:
    files = {"data.py": FACTORY.format(pin=", pin_memory=True"), "train.py": TRAINER}
    assert _findings(tmp_path, files, ["TL102", "TL103"]) == [("train.py", 14, "TL103")] * 2  # images and labels


def test_a_dict_of_settings_is_not_a_dict_of_loaders(tmp_path: Path) -> None:
    factory = """
    def build_settings(batch_size):
        return {"batch_size": batch_size, "lr": 0.1}
    """
    reader = """
    from data import build_settings

    def run(model, batches):
        settings = build_settings(64)
        for x in settings["batch_size"]:
            model(x.cuda())
    """
    assert _findings(tmp_path, {"data.py": factory, "train.py": reader}, ["TL102", "TL103"]) == []


TTA = """
from torch.utils.data import DataLoader

def eval_tta(model, datasets):
    iterators = []
    for dataset in datasets:
        iterators.append(iter(DataLoader(dataset, batch_size=64, num_workers=4{pin})))
    try:
        while True:
            for it in iterators:
                data, label = next(it)
                print(model(data.cuda()).argmax(1).eq(label.cuda(non_blocking=True)).sum())
    except StopIteration:
        pass
"""


def test_a_list_of_loader_iterators_filled_by_append(tmp_path: Path) -> None:
    assert _findings(tmp_path, {"tta.py": TTA.format(pin=", pin_memory=True")}, ["TL102", "TL103"]) == [("tta.py", 12, "TL103")]
    assert _findings(tmp_path, {"tta.py": TTA.format(pin="")}, ["TL102", "TL103"]) == [("tta.py", 7, "TL102")]


def test_a_list_of_arrays_filled_by_append_holds_no_loader(tmp_path: Path) -> None:
    script = """
    import numpy as np
    import torch

    def run(model, paths):
        chunks = []
        for path in paths:
            chunks.append(torch.from_numpy(np.load(path)))
        for chunk in chunks:
            model(chunk.cuda())
    """
    assert _findings(tmp_path, {"run.py": script}, ["TL102", "TL103"]) == []
