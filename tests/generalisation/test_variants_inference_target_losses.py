"""Family B, a target network held by an agent (`self.<attr>`, whatever it is called) and never trained, run inside
the training step on tensors built from a replay batch, its output reaching the loss as the TD target without a
detach: the backward pass then runs through it for weight gradients no optimizer reads (TL305). Near misses stay
silent: the same network when the optimizer takes its parameters, when the step runs it under no-grad, or when
it is given the output of the online network (the gradient has to flow back through it)."""

from __future__ import annotations

import pytest

from tests.generalisation.test_variants_inference import params
from tests.generalisation.variants import Shape, differing

SELECT = ("TL301", "TL305")
MARK = "# expect: TL305"

PROGRAM = """
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F


class QNet(nn.Module):
    def __init__(self, n_in=4, n_out=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, 64), nn.ReLU(), nn.Linear(64, n_out))

    def forward(self, x):
        return self.body(x)


class Agent:
    def __init__(self, memory):
        self.memory = memory
        self.device = torch.device("cuda")
        self.$online = QNet().to(self.device)
        self.$frozen = $build
        self.optimizer = torch.optim.Adam($trained, lr=1e-3)

    def learn(self):
        states, actions, rewards, next_states, dones = self.memory.sample(64)
        states = $tensor(states).to(self.device)
        actions = torch.LongTensor(actions).to(self.device)
        rewards = $tensor(rewards).to(self.device)
        next_states = $tensor(next_states).to(self.device)
        dones = $tensor(dones).to(self.device)
        q = self.$online(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        $target
        loss = $loss
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def sync(self):
        self.$frozen.load_state_dict(self.$online.state_dict())


def run(memory, steps=100000):
    agent = Agent(memory)
    for t in range(steps):
        agent.learn()
        if t % 1000 == 0:
            agent.sync()
"""

TARGET = (
    "best = self.$frozen($given).max(1)[0]  $mark\ny = rewards + 0.99 * best * (1 - dones)",
    "y = rewards + 0.99 * self.$frozen($given).max(dim=1)[0] * (1 - dones)  $mark",
    "next_q = self.$frozen($given)  $mark\ny = rewards + 0.99 * (1 - dones) * next_q.gather(1, next_q.argmax(1, keepdim=True)).squeeze(1)",
)
SLOTS = {
    "online": ("online", "q_net", "learner"),
    "frozen": ("frozen", "target_net", "lagged"),
    "build": ("QNet().to(self.device)", "copy.deepcopy(self.$online)"),
    "trained": ("self.$online.parameters()",),
    "tensor": ("torch.FloatTensor", "torch.tensor", "torch.Tensor"),
    "target": TARGET,
    "given": ("next_states",),
    "loss": ("F.mse_loss(q, y)", "F.smooth_l1_loss(q, y)", "(q - y).pow(2).mean()"),
    "mark": (MARK,),
}

SHAPES = [Shape(name="target-network-in-the-step", files={"main.py": PROGRAM}, slots=SLOTS, select=SELECT)]

NEAR_SHAPES = [
    # the optimizer takes its parameters too: it is trained
    Shape(name="target-network-in-the-step/trained", files={"main.py": PROGRAM}, select=SELECT, slots={
        **SLOTS, "mark": ("",), "trained": ("[*self.$online.parameters(), *self.$frozen.parameters()]",)}),
    # already under no-grad
    Shape(name="target-network-in-the-step/no-grad", files={"main.py": PROGRAM}, select=SELECT, slots={
        **SLOTS, "mark": ("",), "target": tuple(f"with torch.no_grad():\n    {t}" for t in TARGET)}),
    # both networks train themselves: each class builds an optimizer over its own parameters
    Shape(name="target-network-in-the-step/class-builds-its-optimizer", select=("TL305",), slots={**SLOTS, "mark": ("",)},
          files={"main.py": PROGRAM.replace(
              "        self.body = nn.Sequential(nn.Linear(n_in, 64), nn.ReLU(), nn.Linear(64, n_out))\n",
              "        self.body = nn.Sequential(nn.Linear(n_in, 64), nn.ReLU(), nn.Linear(64, n_out))\n"
              "        self.optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)\n",
          ).replace("        self.optimizer = torch.optim.Adam($trained, lr=1e-3)\n", "").replace(
              "self.optimizer.zero_grad()", "self.$online.optimizer.zero_grad()\n        self.$frozen.optimizer.zero_grad()"
          ).replace("self.optimizer.step()", "self.$online.optimizer.step()\n        self.$frozen.optimizer.step()")}),
    # given the online network's output: the gradient flows back through it
    Shape(name="target-network-in-the-step/fed-by-the-online-network", files={"main.py": PROGRAM}, select=("TL305",),
          slots={**SLOTS, "mark": ("",), "given": ("self.$online(next_states)",)}),
]

# a loss module of torch.nn holds no weights: it is no network the backward pass runs through for nothing
LOSS_PROGRAM = """
import torch
import torch.nn as nn

policy = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 1)).cuda()
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
$crit = $loss_cls()


def finish_episode(states, rewards):
    values = [policy(torch.FloatTensor(s).cuda()) for s in states]
    loss = 0
    for value, r in zip(values, rewards):
        loss += $crit(value, $target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def run(env, episodes=1000):
    for episode in range(episodes):
        states, rewards = env.rollout()
        finish_episode(states, rewards)
"""
NEAR_SHAPES.append(Shape(name="torch-loss-module-in-the-step", files={"main.py": LOSS_PROGRAM}, select=("TL305",), slots={
    "crit": ("mse", "criterion", "value_loss_fn"), "loss_cls": ("nn.MSELoss", "nn.SmoothL1Loss", "nn.L1Loss"),
    "target": ("torch.Tensor([r]).cuda()", "torch.tensor([r], dtype=torch.float32).cuda()", "torch.FloatTensor([r]).cuda()"),
}))

LIMIT = 10
XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("shape", params(SHAPES + NEAR_SHAPES, XFAIL))
def test_target_networks_trained_through_in_the_step_are_found_however_written(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
