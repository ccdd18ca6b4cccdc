"""Family A: a policy-gradient loss built one step at a time from per-step lists, however the loop is written:
walking the lists by position (`range(len(log_probs))`, `enumerate`), passing a step's value through a method
that keeps it one value per step (`lp.squeeze()`, `ret.detach()`, `torch.tensor(ret)`), appending to an
attribute, or summing the terms with Python's `sum()` before `backward()`. Near misses stay silent: returns
discounted into a list of numbers, a weighted sum of a few task losses, and per-level features walked by
position."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 6  # name combinations for each way of writing the loop

AGENT = """
import torch
import torch.nn as nn
from torch.distributions import Categorical


class Agent:
    def __init__(self, policy):
        self.policy = policy
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
        self.$saved = []
        self.rewards = []
        self.terms = []

    def act(self, state):
        dist = Categorical(self.policy(torch.as_tensor(state, dtype=torch.float32)))
        action = dist.sample()
        self.$saved.append(dist.log_prob(action))
        return action.item()

    def finish_episode(self):
        running, $returns = 0.0, []
        for r in reversed(self.rewards):
            running = r + 0.99 * running
            $returns.insert(0, running)
        $returns = torch.tensor($returns)
        $loss_loop
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
"""

MAIN = """
import gymnasium as gym
import torch.nn as nn
from agent import Agent

env = gym.make("CartPole-v1")
agent = Agent(nn.Sequential(nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 2), nn.Softmax(dim=-1)))
for episode in range(1000):
    state, _ = env.reset()
    done = False
    while not done:
        state, reward, terminated, truncated, _ = env.step(agent.act(state))
        agent.rewards.append(reward)
        done = terminated or truncated
    agent.finish_episode()
"""

PER_STEP_LOSSES = (
    # by position
    "loss = 0\nfor i in range(len(self.$saved)):  # expect: TL401\n    loss = loss - self.$saved[i] * $returns[i]",
    "loss = 0\nfor t in range(len(self.$saved)):  # expect: TL401\n    loss += -self.$saved[t] * $returns[t]",
    "terms = []\nfor i, $lp in enumerate(self.$saved):  # expect: TL401\n    terms.append(-$lp * $returns[i])\nloss = torch.stack(terms).sum()",
    # a step's value through a method that keeps it one value per step
    "terms = []\nfor $lp, $ret in zip(self.$saved, $returns):  # expect: TL401\n    terms.append(-$lp.squeeze() * $ret)\nloss = torch.cat(terms).sum()",
    "terms = []\nfor $lp, $ret in zip(self.$saved, $returns):  # expect: TL401\n    terms.append(-$lp * $ret.detach())\nloss = torch.stack(terms).mean()",
    "terms = []\nfor $lp, $ret in zip(self.$saved, $returns):  # expect: TL401\n    terms.append(-$lp * torch.tensor($ret))\nloss = torch.stack(terms).sum()",
    # collected in an attribute, or summed by Python
    "for $lp, $ret in zip(self.$saved, $returns):  # expect: TL401\n    self.terms.append(-$lp * $ret)\nloss = torch.stack(self.terms).sum()",
    "terms = []\nfor $lp, $ret in zip(self.$saved, $returns):  # expect: TL401\n    terms.append(-$lp * $ret)\nloss = sum(terms)",
    "terms = [-$lp * $ret for $lp, $ret in zip(self.$saved, $returns)]  # expect: TL401\nloss = torch.stack(terms).sum()",
    # already batched: silent
    "loss = -(torch.stack(self.$saved) * $returns).sum()",
)

NAMES = {
    "saved": ("saved_log_probs", "log_probs", "logprob_buffer"),
    "returns": ("returns", "discounted", "g"),
    "lp": ("lp", "log_prob", "a"),
    "ret": ("ret", "R", "b"),
}

SHAPES = [
    Shape(
        name=f"per-step-loss/{number}",
        files={"agent.py": AGENT, "main.py": MAIN},
        slots={**NAMES, "loss_loop": (loop,)},
        select=("TL401",),
    )
    for number, loop in enumerate(PER_STEP_LOSSES)
]

# -- near misses: lists of numbers, a few task losses, feature levels --------------------------------------------------
NEAR_MISSES = """
import torch
import torch.nn as nn

net = nn.Linear(4, 2).cuda()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)


def update(x, y, rewards, log_probs, $items, weights):
    $body


for step in range(1000):
    x = torch.randn(8, 4).cuda()
    update(x, x, [], [], [], [])
    optimizer.step()
"""

NOT_PER_STEP = (
    # returns discounted into a list of numbers, made a tensor afterwards
    "returns = []\nfor t in range(len(rewards)):\n    returns.append(rewards[t] * 0.99)\nloss = -(torch.stack(log_probs) * torch.tensor(returns)).sum()\nloss.backward()",
    "scaled = []\nfor i in range(len(rewards)):\n    scaled.append(rewards[i] * 2)\nprint(sum(scaled))",
    # a weighted sum of a few task losses
    "total = 0\nfor i in range(len($items)):\n    total += weights[i] * $items[i]\ntotal.backward()",
    "parts = []\nfor l, w in zip($items, weights):\n    parts.append(w * l.detach())\nloss = sum(parts)\nloss.backward()",
    # feature levels walked by position
    "outs = []\nfor i in range(len($items)):\n    outs.append($items[i] * weights[i])\nreturn torch.cat(outs, 1)",
    "outs = []\nfor i, f in enumerate($items):\n    outs.append(f.squeeze() * weights[i])\nreturn torch.cat(outs, 1)",
)

NEAR_SHAPES = [
    Shape(
        name=f"not-per-step/{number}",
        files={"train.py": NEAR_MISSES},
        slots={"body": (body,), "items": ("task_losses", "feats", "levels")},
        select=("TL401",),
    )
    for number, body in enumerate(NOT_PER_STEP)
]


@pytest.mark.parametrize("shape", SHAPES + NEAR_SHAPES, ids=lambda s: s.name)
def test_per_step_losses_however_written(shape: Shape) -> None:
    assert differing(shape, LIMIT) is None, differing(shape, LIMIT)
