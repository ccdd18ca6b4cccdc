"""Family B, a target network however the agent binds it: built beside the online network in one tuple
assignment (`self.online, self.target = Net(), Net()`), or rebound every update to what a soft-update helper
returns when the helper hands back the network it was given (`self.target = self.soft_update(self.online,
self.target, tau)` ending `return target`). Either way the attribute still holds the network it was built with,
so its forward pass for the TD target, run with autograd on and detached (at once: TL305; later, through the
target value: TL301), is found. Near misses stay silent: the same step under no-grad, or a target that the
loss backpropagates through without a detach while the optimizer trains both networks."""

from __future__ import annotations

import pytest

from tests.generalisation.test_variants_inference import params
from tests.generalisation.variants import Shape, differing

SELECT = ("TL301", "TL305")

PROGRAM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class QNet(nn.Module):
    def __init__(self, n_in=4, n_out=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, 64), nn.ReLU(), nn.Linear(64, n_out))

    def forward(self, x):
        return self.body(x)


def polyak(source, target, tau):
    for t, s in zip(target.parameters(), source.parameters()):
        t.data.copy_(t.data * (1.0 - tau) + s.data * tau)
    return target


class Agent:
    def __init__(self, memory):
        self.memory = memory
        self.device = torch.device("cuda")
        $build
        self.optimizer = torch.optim.Adam($trained, lr=1e-3)

    def soft_update(self, source, target, tau):
        for t, s in zip(target.parameters(), source.parameters()):
            t.data.copy_(t.data * (1.0 - tau) + s.data * tau)
        return target

    def learn(self):
        states, actions, rewards, next_states, dones = self.memory.sample(64)
        states = torch.FloatTensor(states).to(self.device)
        actions = torch.LongTensor(actions).to(self.device)
        rewards = torch.FloatTensor(rewards).to(self.device)
        next_states = torch.FloatTensor(next_states).to(self.device)
        dones = torch.FloatTensor(dones).to(self.device)
        q = self.$online(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        $target
        loss = F.mse_loss(q, $y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        $sync


def run(memory, steps=100000):
    agent = Agent(memory)
    for t in range(steps):
        agent.learn()
"""

BUILT = "QNet().to(self.device)"
TARGETS = (
    "next_q = self.$frozen(next_states).detach()  # expect: TL305\ny = rewards + 0.99 * next_q.max(1)[0] * (1 - dones)",
    "y = rewards + 0.99 * self.$frozen(next_states).detach().max(1)[0] * (1 - dones)  # expect: TL305",
    "next_q = self.$frozen(next_states).max(1)[0]  # expect: TL301\ny = (rewards + 0.99 * next_q * (1 - dones)).detach()",
)
COMMON = {
    "online": ("online", "q_net", "learner"),
    "frozen": ("frozen", "target_net", "lagged"),
    "trained": ("self.$online.parameters()",),
    "target": TARGETS,
    "y": ("y",),
}
# built in one tuple assignment beside the online network, synchronised by `load_state_dict`
TUPLE_SLOTS = {
    **COMMON,
    "build": (
        f"self.$online, self.$frozen = {BUILT}, {BUILT}",
        "(self.$online, self.$frozen) = (QNet().cuda(), QNet().cuda())",
        f"self.$online, self.$frozen = [{BUILT}, {BUILT}]",
    ),
    "sync": ("self.$frozen.load_state_dict(self.$online.state_dict())",),
}
# rebound every update to what a helper returns: the network it was given
REBOUND_SLOTS = {
    **COMMON,
    "build": (f"self.$online = {BUILT}\nself.$frozen = {BUILT}",),
    "sync": (
        "self.$frozen = self.soft_update(self.$online, self.$frozen, 0.01)",
        "self.$frozen = polyak(self.$online, self.$frozen, 0.01)",
        "self.$frozen = polyak(self.$online, tau=0.01, target=self.$frozen)",
        "self.$frozen = self.soft_update(target=self.$frozen, source=self.$online, tau=0.01)",
    ),
}

SHAPES = [
    Shape(name="target-network-built-in-a-tuple", files={"main.py": PROGRAM}, slots=TUPLE_SLOTS, select=SELECT),
    Shape(name="target-network-rebound-by-a-helper", files={"main.py": PROGRAM}, slots=REBOUND_SLOTS, select=SELECT),
]

_QUIET_TARGETS = (
    "next_q = self.$frozen(next_states).detach()\ny = rewards + 0.99 * next_q.max(1)[0] * (1 - dones)",
    "next_q = self.$frozen(next_states).max(1)[0]\ny = (rewards + 0.99 * next_q * (1 - dones)).detach()",
)
NEAR_SHAPES = []
for _shape in SHAPES:
    # the TD target already computed under no-grad
    NEAR_SHAPES.append(Shape(name=f"{_shape.name}/no-grad", files=_shape.files, select=SELECT, slots={
        **_shape.slots, "target": tuple(f"with torch.no_grad():\n    {t}" for t in _QUIET_TARGETS)}))
    # both networks trained, the second one's output part of the loss: the gradient is used
    NEAR_SHAPES.append(Shape(name=f"{_shape.name}/both-trained", files=_shape.files, select=SELECT, slots={
        **_shape.slots, "trained": ("[*self.$online.parameters(), *self.$frozen.parameters()]",),
        "target": ("next_q = self.$frozen(next_states).max(1)[0]\ny = rewards + 0.99 * next_q * (1 - dones)",)}))

LIMIT = 12
XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("shape", params(SHAPES + NEAR_SHAPES, XFAIL))
def test_target_networks_are_found_however_the_agent_binds_them(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
