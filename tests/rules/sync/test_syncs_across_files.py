"""Host reads that another project file runs on every step: helpers, library modules, metric loggers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchlint.lint.api import lint_paths

SYNC = ["TL201", "TL202", "TL203", "TL204", "TL205", "TL207"]

HELPERS = """
import torch

def grad_norm(parameters):
    total = 0.0
    for p in parameters:
        total += torch.norm(p.grad).item()
    return total

def final_report(losses):
    return torch.stack(losses).mean().item()

class MetricLogger:
    def __init__(self):
        self.meters = {}

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            self.meters.setdefault(k, []).append(v)
"""

TRAIN = """
import torch
from helpers import MetricLogger, final_report, grad_norm

def train(model, loader, optimizer, criterion, lr):
    logger = MetricLogger()
    losses = []
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        norm = grad_norm(model.parameters())
        optimizer.step()
        logger.update(loss=loss)
        logger.update(lr=lr)
        losses.append(loss.detach())
    print(final_report(losses))
"""

PPO = """
import torch

class PPO:
    def __init__(self, net, optimizer):
        self.net, self.optimizer = net, optimizer

    def update(self, batches):
        total = 0.0
        for obs, ret in batches:
            loss = (self.net(obs) - ret).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total


if __name__ == "__main__":  # a self-test on the CPU: runs only when this file is the script
    net = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(100):
        loss = net(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""

GPU_MAIN = """
import torch
from ppo import PPO

net = torch.nn.Linear(4, 1).cuda()
agent = PPO(net, torch.optim.Adam(net.parameters()))
"""

CPU_MAIN = """
import torch
from ppo import PPO

net = torch.nn.Linear(4, 1)
agent = PPO(net, torch.optim.Adam(net.parameters()))
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")


def _findings(root: Path, name: str) -> list[tuple[int, str]]:
    results = lint_paths([str(root / name)], select=SYNC)
    assert all(r.error is None and not r.notes for r in results), [(r.path, r.error, r.notes) for r in results]
    return sorted((f.line, f.code) for r in results for f in r.findings)


def test_helper_run_every_step_by_another_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"helpers.py": HELPERS, "train.py": TRAIN})
    # the read inside `grad_norm` (called every step) is reported once, at the call in train.py; `final_report`
    # runs once after the loop: silent. The logger's `.item()` only reads the tensors it is handed
    assert _findings(tmp_path, "helpers.py") == []
    # at the call sites: `grad_norm` syncs; `logger.update(loss=loss)` hands it a tensor, `update(lr=lr)` does not
    assert _findings(tmp_path, "train.py") == [(13, "TL207"), (15, "TL207")]


@pytest.mark.parametrize(("main", "expected"), [(GPU_MAIN, [(15, "TL201")]), (CPU_MAIN, [])], ids=["gpu", "cpu"])
def test_library_module_runs_on_its_importers_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, main: str, expected: list[tuple[int, str]]
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"ppo.py": PPO, "main.py": main})
    assert _findings(tmp_path, "ppo.py") == expected


META = """
import torch

class Meta(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(4, 2)

    def finetune(self, x, y):
        correct = 0
        for _ in range(10):
            pred = self.net(x).argmax(1)
            correct += torch.eq(pred, y).sum().item()
        return correct
"""

META_TRAIN = """
import torch
from meta import Meta

device = torch.device("cuda")
maml = Meta().{placement}
for x, y in test_loader:
    x, y = x.to(device), y.to(device)
    accs = maml.finetune(x, y)
"""


@pytest.mark.parametrize("placement", ["to(device)", "cuda().eval()"])
def test_method_of_a_model_built_then_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, placement: str) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"meta.py": META, "train.py": META_TRAIN.replace("{placement}", placement)})
    # `Meta().to(device)` is the `Meta` it was called on: its method reads on the host for each test task
    assert _findings(tmp_path, "train.py") == [(9, "TL207")]


SCORES = """
import numpy as np
import torch

def confusion(label, pred, num_class):
    output = pred.cpu().numpy().argmax(1)
    seg_gt = label.cpu().numpy()
    return np.bincount(seg_gt.ravel() * num_class + output.ravel(), minlength=num_class ** 2)

def pixel_correct(output, target):
    return torch.sum(output.argmax(1) == target).item()

class SegmentationMetric:
    def __init__(self, nclass):
        self.nclass = nclass
        self.correct = 0

    def update(self, preds, labels):
        def worker(self, pred, label):
            self.correct += pixel_correct(pred, label)
        worker(self, preds, labels)

    def count(self, n):
        self.correct += n
"""

EVALUATE = """
import numpy as np
import torch
from scores import SegmentationMetric, confusion

class Trainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.metric = SegmentationMetric(21)

    def validation(self):
        hist = np.zeros(21 * 21)
        for image, target in self.loader:
            image, target = image.cuda(), target.cuda()
            with torch.no_grad():
                outputs = self.model(image)
            hist += confusion(target, outputs, 21)
            self.metric.update(outputs, target)
            self.metric.count(image.shape[0])
            hist += confusion(np.zeros(4), np.zeros((4, 21)), 21)
"""


def test_helpers_of_another_file_that_read_the_tensors_they_are_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"scores.py": SCORES, "evaluate.py": EVALUATE})
    # `confusion` copies its arguments to the host: a sync where the loop hands it device tensors, not arrays;
    # the metric held in `self.metric` reads `.item()` in its `update`, its `count` only adds numbers
    assert _findings(tmp_path, "evaluate.py") == [(18, "TL207"), (19, "TL207")]
