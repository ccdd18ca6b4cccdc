"""What kind of object a name holds: evidence first, naming conventions only when nothing binds the name."""

from __future__ import annotations

from semantic_probe import ask

from torchlint.semantic.loops import step_kind
from torchlint.semantic.objects import LOADER, MODULE, OPTIMIZER, SCHEDULER, named


def _kinds(source: str) -> list[str]:
    return ask(source, lambda model, call, expr: model.objects.kind(expr))


def test_constructors_resolved_through_imports() -> None:
    source = """
import torch
from torch import nn, optim
from torch.utils.data import DataLoader as DL, TensorDataset
from torch.optim.lr_scheduler import StepLR

net = nn.Sequential(nn.Linear(2, 2)).to("cuda").eval()
opt = optim.AdamW(net.parameters())
sched = StepLR(opt, 10)
scaler = torch.amp.GradScaler()
data = TensorDataset(torch.zeros(4, 2))
batches = DL(data, batch_size=2)
weight = nn.Parameter(torch.zeros(2))
probe(net); probe(opt); probe(sched); probe(scaler); probe(data); probe(batches); probe(weight)
"""
    assert _kinds(source) == ["module", "optimizer", "scheduler", "scaler", "dataset", "loader", "None"]


def test_classes_of_the_file_annotations_and_self_attributes() -> None:
    source = """
import torch.nn as nn
from torch.utils.data import Dataset

class Block(nn.Module):
    pass

class Net(Block):
    def __init__(self):
        self.encoder = Block()
        self.size = 3

    def forward(self, x):
        probe(self.encoder)
        probe(self.size)

class Pairs(Dataset):
    pass

def train(model: nn.Module, steps):
    probe(model)
    probe(steps)
    probe(Pairs())
"""
    assert _kinds(source) == ["module", "None", "module", "None", "dataset"]


def test_names_decide_only_when_nothing_binds_them() -> None:
    source = """
import torch
model = "resnet18"
def run(net, optimizer):
    probe(net)
    probe(model)
    probe(optimizer)
"""
    holds = ask(source, lambda m, call, expr: m.objects.holds(expr, MODULE) or m.objects.holds(expr, OPTIMIZER))
    assert holds == ["True", "False", "True"]


def test_conventions_are_one_table() -> None:
    for name in ("train_loader", "dataloader", "loader", "train_dl", "val_dl", "trainloader", "test_loader", "dl", "train_iter", "dataloaders"):
        assert named(name, LOADER), name
    for name in ("downloader", "uploader", "model", "items", "layers", "data", "batch", "iter"):
        assert not named(name, LOADER), name
    assert named("netG", MODULE) and named("criterion", MODULE) and not named("optimizer", MODULE)
    assert named("optimizer_g", OPTIMIZER) and named("scaler", OPTIMIZER)
    assert not named("lr_scheduler", OPTIMIZER) and named("lr_scheduler", SCHEDULER)
    assert not named("ema_model", OPTIMIZER)


def test_one_answer_to_what_a_step_is() -> None:
    source = """
import torch
from torch.optim.lr_scheduler import CosineAnnealingLR
opt = torch.optim.SGD(params, lr=0.1)
warm = CosineAnnealingLR(opt, 100)
probe(opt.step())
probe(warm.step())
probe(optimizer_d.step())
probe(scheduler.step())
probe(env.step(action))
probe(loss.backward())
"""
    answers = ask(source, lambda m, call, expr: step_kind(m.context, expr))
    assert answers == ["optimizer", "scheduler", "optimizer", "scheduler", "None", "backward"]


def test_verb_led_names_handle_a_model_but_are_not_one() -> None:
    for name in ("save_model", "load_model", "build_net", "get_model", "train_model", "update_target_net"):
        assert not named(name, MODULE), name
    for name in ("model", "target_net", "policy_net", "g_model", "model_ema", "teacher"):
        assert named(name, MODULE), name
