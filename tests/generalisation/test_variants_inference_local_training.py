"""Family B, training through a function we can read: an agent's `run()` acts every environment step and calls
its own `self.train_model()`, a script's loop acts and calls `update(batch)` of its file, a `main()` trains
through `train_one_epoch(...)` and then scores the validation set inline. The training step runs in that
other function, so each forward pass here is judged by where its result goes: an action sent to the
environment, a prediction counted on the host, a detached target. Near misses stay silent: the forward's
result handed to the training function, kept on the object for the update's loss, or run under no-grad."""

from __future__ import annotations

import pytest

from tests.generalisation.test_variants_inference import params
from tests.generalisation.variants import Shape, differing

SELECT = ("TL301", "TL305")
MARK = "# expect: TL301"

AGENT = """
import numpy as np
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
    def __init__(self, env, device):
        self.env = env
        self.device = device
        self.$net = QNet().to(device)
        self.optimizer = torch.optim.Adam(self.$net.parameters(), lr=1e-3)
        self.memory = []
        self.eval_mode = False

    def $train(self):
        obs, acts, targets = self.memory[-1]
        q = self.$net(obs).gather(1, acts)
        loss = F.mse_loss(q, targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def run(self, max_step):
        obs = self.env.reset()
        done = False
        steps = 0
        $loop
            state = torch.Tensor(obs).to(self.device)
            if self.eval_mode:
                $scores = self.$net(state)  $mark_eval
                action = $to_host
                obs, reward, done, _ = self.env.step(action)
            else:
                $scores = self.$net(state)  $mark
                action = $to_host
                next_obs, reward, done, _ = self.env.step(action)
                self.memory.append((obs, action, reward))
                $call
                obs = next_obs
            steps += 1
        return steps
"""
AGENT_SLOTS = {
    "net": ("qf", "policy", "q_network"),
    "train": ("train_model", "learn", "update"),
    "scores": ("q", "q_values", "logits"),
    "loop": ("while not (done or steps == max_step):", "for _ in range(max_step):"),
    "to_host": (
        "$scores.argmax().detach().cpu().numpy()",
        "$scores.argmax().item()",
        "torch.argmax($scores).tolist()",
        "$scores.detach().cpu().numpy().argmax()",
    ),
    "call": ("self.$train()", "if len(self.memory) > 32:\n    self.$train()"),
    "mark": (MARK,),
    "mark_eval": (MARK,),
}

SCRIPT = """
import torch
import torch.nn as nn

device = torch.device("cuda")
policy = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)


def $update(states, actions, returns):
    logp = torch.log_softmax(policy(states), dim=-1).gather(1, actions)
    loss = -(logp.squeeze(1) * returns).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


$wrapper
    for episode in range(1000):
        s = env.reset()
        for t in range(200):
            out = policy(torch.as_tensor(s, dtype=torch.float32, device=device))  $mark
            a = $pick
            s, r, done, _ = env.step(a)
            buffer.add(s, a, r)
            if done:
                break
        $update(*buffer.batch())
"""
SCRIPT_SLOTS = {
    "update": ("update", "reinforce_step", "train_policy"),
    "wrapper": ("def main(env, buffer):", "if __name__ == '__main__':\n    env, buffer = make_env(), Buffer()"),
    "pick": ("out.argmax().item()", "out.argmax().cpu().numpy()", "torch.multinomial(out.softmax(-1), 1).item()"),
    "mark": (MARK,),
}

VALIDATION = """
import torch
import torch.nn.functional as F


def $train_epoch(model, loader, optimizer, device):
    model.train()
    for x, y in loader:
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def fit(model, train_loader, val_loader, epochs, device):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        $train_epoch(model, train_loader, optimizer, device)
        correct = 0
        for x, y in val_loader:
            $out = model(x.to(device))  $mark
            correct += $count
        print(epoch, correct / len(val_loader.dataset))
"""
VALIDATION_SLOTS = {
    "train_epoch": ("train_one_epoch", "run_epoch", "train"),
    "out": ("logits", "out", "pred"),
    "count": ("($out.argmax(1).cpu() == y).sum().item()", "($out.argmax(dim=1) == y.to(device)).sum().tolist()"),
    "mark": (MARK,),
}

SHAPES = [
    Shape(name="agent-run-trains-through-its-own-method", files={"agent.py": AGENT}, slots=AGENT_SLOTS, select=SELECT),
    Shape(name="script-loop-trains-through-a-function-of-its-file", files={"train.py": SCRIPT}, slots=SCRIPT_SLOTS,
          select=SELECT),
    Shape(name="validation-inline-after-a-training-function", files={"train.py": VALIDATION},
          slots=VALIDATION_SLOTS, select=SELECT),
]

# -- near misses ------------------------------------------------------------------------------------------
# the acting forward's output is what the training method backpropagates through
HANDED_ON = AGENT.replace("    def $train(self):\n        obs, acts, targets = self.memory[-1]\n        q = self.$net(obs).gather(1, acts)",
                          "    def $train(self, q):\n        obs, acts, targets = self.memory[-1]\n        q = q.gather(0, acts)"
                          ).replace("                $call\n", "                self.$train($scores)\n")
# the step's output is kept on the object, and the update's loss is built from it (A2C)
KEPT = AGENT.replace("    def $train(self):\n        obs, acts, targets = self.memory[-1]\n        q = self.$net(obs).gather(1, acts)",
                     "    def $train(self):\n        obs, acts, targets = self.memory[-1]\n        q = self.kept.gather(0, acts)"
                     ).replace("                action = $to_host\n                next_obs",
                               "                self.kept = $scores\n                action = $to_host\n                next_obs")
NO_GRAD = AGENT.replace("            state = torch.Tensor(obs).to(self.device)\n            if self.eval_mode:",
                        "            state = torch.Tensor(obs).to(self.device)\n            with torch.no_grad():\n"
                        "                q_eval = self.$net(state)\n            if self.eval_mode:"
                        ).replace("$scores = self.$net(state)  $mark_eval", "$scores = q_eval"
                                  ).replace("$scores = self.$net(state)  $mark", "$scores = q_eval")
# the function it calls only takes gradients of its own inputs (an attack): the evaluation is the caller's to
# judge, and the rule leaves callers of attacks alone
ATTACKED = """
import torch
import torch.nn.functional as F


def $train_epoch(model, x, y, steps=10):
    x_adv = x.clone().detach()
    for _ in range(steps):
        x_adv.requires_grad_(True)
        grad = torch.autograd.grad(F.cross_entropy(model(x_adv), y), x_adv)[0]
        x_adv = (x_adv.detach() + 0.01 * grad.sign()).clamp(0, 1)
    return x_adv


def fit(model, val_loader, epochs, device):
    for epoch in range(epochs):
        correct = 0
        for x, y in val_loader:
            x_adv = $train_epoch(model, x.to(device), y.to(device))
            $out = model(x_adv)
            correct += $count
        print(epoch, correct / len(val_loader.dataset))
"""
NEAR_SHAPES = [
    Shape(name="evaluation-after-an-attack-helper", files={"attack.py": ATTACKED}, select=SELECT,
          slots={**VALIDATION_SLOTS, "train_epoch": ("pgd", "fgsm_steps", "attack")}),
    Shape(name="acting-output-handed-to-the-training-method", files={"agent.py": HANDED_ON}, select=SELECT,
          slots={**AGENT_SLOTS, "mark": ("",), "to_host": AGENT_SLOTS["to_host"][:2], "call": ("",)}),
    Shape(name="acting-output-kept-for-the-update", files={"agent.py": KEPT}, select=SELECT,
          slots={**AGENT_SLOTS, "mark": ("",)}),
    Shape(name="acting-under-no-grad", files={"agent.py": NO_GRAD}, select=SELECT,
          slots={**AGENT_SLOTS, "mark": ("",), "mark_eval": ("",)}),
]

LIMIT = 12


@pytest.mark.parametrize("shape", params(SHAPES + NEAR_SHAPES, {}))
def test_forwards_beside_a_readable_training_call_are_judged_by_their_results(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
