"""Family B, a target or teacher network run with autograd on inside a loss helper whose only use of its output is
a detached target: held by an agent (`self.<attr>`, whatever it is called: built from a class of the file, a deep
copy of the online network, a module of a project file), or passed in as a parameter by callers in another file
that build it and never train it. Near misses stay silent: the same network when its parameters are trained or
frozen, a detach under `with torch.no_grad():`, a copy of something that is no network, a helper given the
student."""

from __future__ import annotations

import pytest

from tests.generalisation.test_variants_inference import params
from tests.generalisation.variants import Shape, differing

SELECT = ("TL301", "TL305")
MARK = "# expect: TL305"

NETWORK = """
import torch
import torch.nn as nn


class QNet(nn.Module):
    def __init__(self, n_in=4, n_out=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, 64), nn.ReLU(), nn.Linear(64, n_out))

    def forward(self, x):
        return self.body(x)
"""

AGENT = """
import copy
import torch
import torch.nn.functional as F
$imports


class Agent:
    def __init__(self):
        self.device = torch.device("cuda")
        self.$online = QNet().to(self.device)
        self.$frozen = $build
        self.optimizer = torch.optim.Adam(self.$online.parameters(), lr=1e-3)

    def $helper(self, rewards, next_states, dones):
        $target
        return rewards + 0.99 * $best * (1 - dones)

    def learn(self, batch):
        states, actions, rewards, next_states, dones = batch
        q = self.$online(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        loss = F.mse_loss(q, self.$helper(rewards, next_states, dones))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def sync(self):
        self.$frozen.load_state_dict(self.$online.state_dict())


def run(buffer, steps=100000):
    agent = Agent()
    for t in range(steps):
        agent.learn(buffer.sample(64))
        if t % 1000 == 0:
            agent.sync()
"""

BUILD = (
    "copy.deepcopy(self.$online)",
    "QNet().to(self.device)",
    "copy.deepcopy(self.$online).to(self.device)",
)
TARGET = (
    "nxt = self.$frozen(next_states).max(1)[0].detach()  $mark",
    "nxt = self.$frozen(next_states).detach().max(1)[0]  $mark",
    "nxt = self.$frozen(next_states).max(dim=1, keepdim=True)[0].detach().squeeze(1)  $mark",
)
SLOTS = {
    "online": ("online", "q", "learner", "policy_q"),
    "frozen": ("frozen", "lagged", "q_old", "shadow"),
    "helper": ("td_targets", "bootstrap", "make_y"),
    "build": BUILD,
    "target": TARGET,
    "best": ("nxt",),
    "mark": (MARK,),
}

SHAPES = [
    Shape(name="detached-target-attribute/one-file", files={"main.py": NETWORK + AGENT.replace("$imports", "")},
          slots=SLOTS, select=SELECT),
    Shape(name="detached-target-attribute/network-of-another-file",
          files={"nets.py": NETWORK, "main.py": AGENT.replace("$imports", "from nets import QNet")},
          slots=SLOTS, select=SELECT),
]

# -- a teacher passed to a loss helper of another file --------------------------------------------------------
LOSSES = """
import torch
import torch.nn.functional as F


def $helper(s_logits, $teacher, x, T=4.0):
    $t_out
    return F.kl_div(F.log_softmax(s_logits / T, 1), F.softmax(soft / T, 1), reduction="batchmean") * T * T
"""
TRAIN = """
import torch
import torch.nn.functional as F
import torchvision
from losses import $helper
$extra


def main(loader, epochs=10):
    device = torch.device("cuda")
    $big = $origin
    small = torchvision.models.resnet18(num_classes=1000).to(device)
    opt = torch.optim.SGD($trained, lr=0.1)
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            out = small(x)
            loss = F.cross_entropy(out, y) + $helper(out, $passed, x)
            opt.zero_grad()
            loss.backward()
            opt.step()
"""
ORIGIN = (
    "torchvision.models.resnet50(pretrained=True).to(device).eval()",
    "torch.load('teacher.pt').to(device)",
    "Wide().to(device)",
)
T_OUT = (
    "soft = $teacher(x).detach()  $mark",
    "soft = $teacher(x).detach().float()  $mark",
    "soft = $teacher(x)[:, :1000].detach()  $mark",
)
KD_SLOTS = {
    "helper": ("kd_loss", "distill_term", "soft_ce"),
    "teacher": ("teacher", "t", "reference"),
    "big": ("big", "teacher", "t_net"),
    "origin": ORIGIN,
    "t_out": T_OUT,
    "extra": ("from nets import Wide",),
    "passed": ("$big",),
    "trained": ("small.parameters()",),
    "mark": (MARK,),
}
NETS = "import torch.nn as nn\n\n\nclass Wide(nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
       "        self.fc = nn.Linear(8, 1000)\n\n    def forward(self, x):\n        return self.fc(x)\n"
KD_FILES = {"nets.py": NETS, "losses.py": LOSSES, "train.py": TRAIN}

SHAPES.append(Shape(name="detached-teacher-passed-to-loss-helper", files=KD_FILES, slots=KD_SLOTS, select=SELECT))

# -- near misses ------------------------------------------------------------------------------------------
NEAR_SHAPES = [
    # the same attribute's parameters are trained: no frozen network (its detached output is TL301's to judge)
    Shape(name="detached-target-attribute/trained",
          files={"main.py": NETWORK + AGENT.replace("$imports", "").replace(
              "self.optimizer = torch.optim.Adam(self.$online.parameters(), lr=1e-3)",
              "self.optimizer = torch.optim.Adam([*self.$online.parameters(), *self.$frozen.parameters()])")},
          slots={**SLOTS, "mark": ("",)}, select=("TL305",)),
    # already under no-grad
    Shape(name="detached-target-attribute/no-grad",
          files={"main.py": NETWORK + AGENT.replace("$imports", "")},
          slots={**SLOTS, "mark": ("",),
                 "target": tuple(f"with torch.no_grad():\n    {t}" for t in TARGET)}, select=SELECT),
    # the teacher passed in is trained too, frozen where it is built, or run under no-grad; or the student is passed
    Shape(name="passed-to-loss-helper/trained", files=KD_FILES,
          slots={**KD_SLOTS, "mark": ("",), "trained": ("list(small.parameters()) + list($big.parameters())",)},
          select=SELECT),
    Shape(name="passed-to-loss-helper/frozen", files=KD_FILES,
          slots={**KD_SLOTS, "mark": ("",), "origin": tuple(f"{o}.requires_grad_(False)" for o in ORIGIN)},
          select=SELECT),
    Shape(name="passed-to-loss-helper/no-grad", files=KD_FILES,
          slots={**KD_SLOTS, "mark": ("",), "t_out": tuple(f"with torch.no_grad():\n    {t}" for t in T_OUT)},
          select=SELECT),
    Shape(name="passed-to-loss-helper/student", files=KD_FILES,
          slots={**KD_SLOTS, "mark": ("",), "passed": ("small",)}, select=SELECT),
    # a sub-module of a network (trained with it wherever its optimizer is built), its output detached in one place
    Shape(name="detached-sub-module-of-a-network",
          files={"main.py": NETWORK + """

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.$frozen = $sub

    def forward(self, x):
        w = self.$frozen(torch.eye(8, device=x.device)).detach()
        return x @ w + self.$frozen(x)


def train(loader):
    block = Block().cuda()
    opt = torch.optim.Adam(block.parameters())
    for x, y in loader:
        loss = (block(x.cuda()) - y.cuda()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""}, slots={"frozen": SLOTS["frozen"], "sub": ("nn.Linear(8, 8)", "QNet(8, 8)")}, select=SELECT),
    # a deep copy of something that is no network (a table of values), called like a function
    Shape(name="deep-copy-of-no-network",
          files={"main.py": NETWORK + AGENT.replace("$imports", "")},
          slots={**SLOTS, "mark": ("",), "build": ("copy.deepcopy(self.device).index",),
                 "target": ("nxt = rewards.detach()",)}, select=SELECT),
]

LIMIT = 12
XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("shape", params(SHAPES + NEAR_SHAPES, XFAIL))
def test_detached_target_networks_held_by_agents_are_found_however_written(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
