"""Family E: a host read the program needs by design is not a waste, however a helper hides it.

An action chosen on the device and handed to an environment that steps on the host must reach the host once per
step, whether the loop reads it itself or a helper does (`select_action` returning `.item()` or
`.cpu().numpy()`); so must new priorities written back to a host replay buffer, read inside the helper that
trains. The judgement is made where the value goes, not from the helper's name. A read right after such a read,
with no device work queued between, finds the GPU idle: it costs a copy, not a wait. Near misses stay reported:
a helper whose value is only logged (or saved in a checkpoint at an interval), and a loss read with device work queued after the needed read, or before it."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 12
SELECT = ("TL201", "TL202", "TL207")

AGENT = """
import numpy as np
import torch
import torch.nn as nn

device = torch.device("cuda")


class Agent:
    def __init__(self):
        self.net = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.memory = ReplayBuffer(10000)

    def $act(self, state):
        q = self.net(torch.as_tensor(state, dtype=torch.float32, device=device))
        $choose

    def $learn(self):
        states, actions, targets, idxs = self.memory.sample(64)
        q = self.net(states.to(device)).gather(1, actions.to(device))
        td = (q - targets.to(device)).abs()
        loss = td.mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        $priorities


    def train(self, env, episodes):
        for episode in range(episodes):
            state = env.reset()
            $header
                $loop
"""

SLOTS = {
    "header": ("done = False\nwhile not done:", "for t in range(1000):"),
    "act": ("select_action", "act", "policy"),
    "learn": ("update", "train_step", "optimise"),
    "choose": (
        "return q.argmax().item()",
        "action = q.argmax().cpu().numpy()\nreturn action",
        "return int(q.argmax())",
    ),
    "priorities": (
        "self.memory.update_priorities(idxs, td.detach().cpu().numpy())",
        "new_priorities = td.detach().cpu().numpy() + 1e-6\nself.memory.update_priorities(idxs, new_priorities)",
    ),
    "loop": (
        "action = self.$act(state)\nstate, reward, done, _ = env.step(action)\nself.$learn()",
        "state, reward, done, _ = env.step(self.$act(state))\nself.$learn()",
        "action = self.$act(state)\nnext_state, reward, done, info = env.step(action)\nstate = next_state\nself.$learn()",
    ),
}

HOST_NEEDS = Shape("an action sent to the environment, priorities sent to the buffer", {"train.py": AGENT}, SLOTS, SELECT)

LOGGED = Shape(
    "the helper's value is only logged",
    {"train.py": AGENT},
    {
        **SLOTS,
        "loop": (
            "action = self.$act(state)  # expect: TL207\nhistory.append(action)\nself.$learn()",
            "history.append(self.$act(state))  # expect: TL207\nself.$learn()",
            "p = self.$act(state)  # expect: TL207\nif t % 1000 == 0:\n    torch.save({'p': p}, 'ckpt.pt')\nself.$learn()",
        ),
    },
    SELECT,
)

AFTER_PRIORITIES = Shape(
    "the loss read right after the priorities' read finds the GPU idle",
    {"train.py": AGENT},
    {
        **SLOTS,
        "priorities": (
            "self.memory.update_priorities(idxs, td.detach().cpu().numpy())\nreturn loss.item()",
            "prios = td.detach().cpu().numpy() + 1e-6\nself.memory.update_priorities(idxs, prios)\nreturn loss.item()",
            "self.memory.update_priorities(idxs, td.detach().cpu().numpy())\nself.steps += 1\nreturn loss.item()",
        ),
        "loop": (
            "action = self.$act(state)\nstate, reward, done, _ = env.step(action)\nlosses.append(self.$learn())",
        ),
    },
    SELECT,
)

WORK_BETWEEN = Shape(
    "the loss read after more device work, or before the priorities' read, still waits",
    {"train.py": AGENT},
    {
        **SLOTS,
        "priorities": (
            "self.memory.update_priorities(idxs, td.detach().cpu().numpy())\nself.net.reset_noise()\nreturn loss.item()",
            "logged = loss.item()\nself.memory.update_priorities(idxs, td.detach().cpu().numpy())\nreturn logged",
            "self.memory.update_priorities(idxs, td.detach().cpu().numpy())\nif self.steps % 10 == 0:\n    self.sync_target()\nreturn loss.item()",
        ),
        "loop": (
            "action = self.$act(state)\nstate, reward, done, _ = env.step(action)\nlosses.append(self.$learn())  # expect: TL207",
        ),
    },
    SELECT,
)

@pytest.mark.parametrize("shape", [HOST_NEEDS, LOGGED, AFTER_PRIORITIES, WORK_BETWEEN], ids=lambda s: s.name)
def test_every_spelling(shape: Shape) -> None:
    report = differing(shape, LIMIT)
    assert report is None, report
