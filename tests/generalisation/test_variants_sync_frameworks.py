"""Family E: host reads in code a framework or a project object runs on every step, though no loop of the
file shows it.

A Lightning module's `training_step` / `validation_step` and its batch-end hooks, an ignite engine's process
function and its iteration handlers run once per batch; a trainer object's step method (a class of another file
that runs the backward pass and returns the loss) returns a device tensor to the step loop that calls it. Near misses stay silent: a hook under a logging interval or on its first call
only, a hook given no batch (fastai's `after_batch(self)`), an epoch-end hook, a
handler of `Events.ITERATION_COMPLETED(every=100)`, a Python number a step method returns (its own read is
reported in it, and at the call that runs it on every step)."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 12
SELECT = ("TL201", "TL202", "TL207")

LIGHTNING = """
import torch
import torch.nn.functional as F
import pytorch_lightning as pl


class $Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.net(x)

    def $hook(self, batch, batch_idx):
        x, y = batch
        out = self(x)
        loss = F.cross_entropy(out, y)
        $read
        return loss


trainer = pl.Trainer(accelerator="gpu", devices=1)
trainer.fit($Model())
"""

HOOK_READS = (
    'self.log("loss", loss.item())  # expect: TL201',
    "acc = (out.argmax(1) == y).float().mean().item()  # expect: TL201\nself.log(\"acc\", acc)",
    "self.preds.append(out.argmax(1).cpu())  # expect: TL201",
)

HOOKS = Shape(
    "a Lightning step hook reads a device value",
    {"model.py": LIGHTNING},
    {"Model": ("LitClassifier", "Net"), "hook": ("training_step", "validation_step", "test_step"), "read": HOOK_READS},
    SELECT,
)

HOOKS_GATED = Shape(
    "a Lightning step hook reads under a logging interval",
    {"model.py": LIGHTNING},
    {
        "Model": ("LitClassifier",),
        "hook": ("training_step", "validation_step"),
        "read": (
            'if batch_idx % 100 == 0:\n    self.log("loss", loss.item())',
            "if batch_idx == 0:\n    self.preds.append(out.argmax(1).cpu())",
        ),
    },
    SELECT,
)

FIRST_BATCH = Shape(
    "a Lightning step hook reads on its first call only",
    {"model.py": LIGHTNING.replace("super().__init__()\n", "super().__init__()\n        self.logged = False\n")},
    {
        "Model": ("LitClassifier",),
        "hook": ("training_step", "validation_step"),
        "read": (
            "if not self.logged and batch_idx >= 0:\n    self.logged = True\n    self.preds.append(out.argmax(1).cpu())",
            "if batch_idx >= 0 and not self.logged:\n    self.logged = True\n    self.log(\"loss\", loss.item())",
        ),
    },
    SELECT,
)

STATE_HOOK = Shape(
    "a callback hook given no batch, reading the learner's state",
    {
        "callback.py": """
import torch


class $Model(Callback):
    def __init__(self, learn):
        self.learn = learn
        self.learn.model.cuda()

    def before_batch(self):
        self.learn.xb = self.learn.xb.cuda()

    def $hook(self):
        loss = self.learn.loss
        $read
"""
    },
    {
        "Model": ("ProgressCallback",),
        "hook": ("after_batch", "after_step"),
        "read": (HOOK_READS[0].replace("  # expect: TL201", "").replace("self.log", "print"),),
    },
    SELECT,
)

EPOCH_HOOK = Shape(
    "a Lightning epoch hook",
    {"model.py": LIGHTNING},
    {
        "Model": ("LitClassifier",),
        "hook": ("on_train_epoch_end", "on_validation_epoch_end"),
        "read": (HOOK_READS[0].replace("  # expect: TL201", ""),),
    },
    SELECT,
)

IGNITE = """
import torch
from ignite.engine import Engine, Events


def run(model, loader, device):
    model.to(device)

    def process(engine, batch):
        x, y = batch
        return model(x.to(device)), y.to(device)

    evaluator = Engine(process)

    $register
    def on_iteration(engine):
        out, y = engine.state.output
        $read

    evaluator.run(loader)
"""

IGNITE_READS = (
    "print((out.argmax(1) == y).float().mean().item())",
    "scores.append(out.softmax(1).cpu())",
)

IGNITE_HANDLERS = Shape(
    "an ignite handler of every iteration",
    {"run.py": IGNITE},
    {
        "register": ("@evaluator.on(Events.ITERATION_COMPLETED)",),
        "read": tuple(r + "  # expect: TL201" for r in IGNITE_READS),
    },
    SELECT,
)

IGNITE_SOME = Shape(
    "an ignite handler of some iterations or of the epoch",
    {"run.py": IGNITE},
    {
        "register": ("@evaluator.on(Events.ITERATION_COMPLETED(every=100))", "@evaluator.on(Events.EPOCH_COMPLETED)"),
        "read": IGNITE_READS,
    },
    SELECT,
)

TRAINER = """
import torch
import torch.nn.functional as F


class $Trainer:
    def __init__(self, model, optimizer, device):
        self.model = model.to(device)
        self.optimizer = optimizer
        self.device = device

    def $step(self, x, y):
        x, y = x.to(self.device), y.to(self.device)
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        $returned
"""

CALLER = """
import torch
from trainer import $Trainer


def main(model, optimizer, loader):
    $build
    history = []
    for x, y in loader:
        loss = trainer.$step(x, y)
        $read
"""

STEP_METHOD = Shape(
    "the loss a trainer object's step method returns, read by the caller",
    {"trainer.py": TRAINER, "main.py": CALLER},
    {
        "Trainer": ("Trainer", "Solver"),
        "step": ("train_step", "update"),
        "returned": ("return loss", "return loss.detach()"),
        "build": ('trainer = $Trainer(model, optimizer, "cuda")', 'trainer = $Trainer(model, optimizer, torch.device("cuda"))'),
        "read": (
            "history.append(float(loss))  # expect: TL202",
            "history.append(loss.cpu())  # expect: TL201",
            "history.append(loss.item())  # expect: TL201",
        ),
    },
    SELECT,
)

STEP_METHOD_NUMBER = Shape(
    "a trainer object's step method that returns a Python number",
    {"trainer.py": TRAINER, "main.py": CALLER.replace("(x, y)", "(x, y)  # expect: TL207")},
    {
        "Trainer": ("Trainer", "Solver"),
        "step": ("train_step", "update"),
        "returned": ("return loss.item()  # expect: TL201",),
        "build": ('trainer = $Trainer(model, optimizer, "cuda")',),
        "read": ("history.append(float(loss))",),
    },
    SELECT,
)


@pytest.mark.parametrize(
    "shape",
    [HOOKS, HOOKS_GATED, FIRST_BATCH, STATE_HOOK, EPOCH_HOOK, IGNITE_HANDLERS, IGNITE_SOME, STEP_METHOD, STEP_METHOD_NUMBER],
    ids=lambda s: s.name,
)
def test_every_spelling(shape: Shape) -> None:
    report = differing(shape, LIMIT)
    assert report is None, report
