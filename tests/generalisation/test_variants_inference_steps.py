"""Family B, forward passes repeated by their callers: a function that runs a network once per call and hands
back host values is inference when a caller runs it on every trip of a loop on new input (an agent's action
picked every environment step), even in a program that never uses an accelerator; an evaluation function run
under no-grad every epoch and again bare after training is reported too. Near misses stay silent: the same
function given a batch held in memory every epoch on the CPU, a handful of literal trips, a caller under
no-grad, a result kept for the policy-gradient loss, a loss built from given log probabilities beside a detached bootstrap
value, every call under no-grad."""

from __future__ import annotations

import pytest

from tests.generalisation.test_variants_inference import params
from tests.generalisation.variants import Shape, differing

SELECT = ("TL301", "TL305")
MARK = "# expect: TL301"

HEAD = """
import itertools
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self, n_in=4, n_out=2, hidden=64):
        super().__init__()
        self.l1 = nn.Linear(n_in, hidden)
        self.l2 = nn.Linear(hidden, n_out)

    def forward(self, s):
        return F.softmax(self.l2(torch.relu(self.l1(s))), dim=-1)
"""

# how the network's output becomes an action on the host
PICK = (
    "$a = $net($s).detach().numpy().flatten()",
    "$a = $net($s).data.numpy()[0]",
    "$a = int($net($s).argmax(-1).item())",
    "$a = Categorical(probs=$net($s)).sample().item()",
    "$a = $net($s).tolist()",
)

# how the state becomes a tensor
STATE = (
    "$s = torch.tensor($state, dtype=torch.float).unsqueeze(0)",
    "$s = torch.FloatTensor($state).unsqueeze(0)",
    "$s = torch.from_numpy(np.asarray($state)).float()",
    "$s = torch.as_tensor($state, dtype=torch.float32)",
)

# the loop over environment steps around the call
STEPS = (
    "for t in range(max_steps):",
    "for t in itertools.count():",
    "while not done:",
    "for t in range(1, max_steps + 1):",
)

AGENT = """

class Agent:
    def __init__(self):
        self.$attr = Policy()
        self.optimizer = torch.optim.Adam(self.$attr.parameters(), lr=1e-3)

    def $pick(self, $state):  $mark
        $to_tensor
        $choose
        return $a

    def learn(self, states, actions, returns):
        probs = self.$attr(torch.tensor(states, dtype=torch.float))
        loss = -(torch.log(probs.gather(1, torch.tensor(actions).view(-1, 1))).squeeze(1) * torch.tensor(returns)).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
"""

RUN = """

def run(env, agent, episodes=500, max_steps=1000):
    for episode in range(episodes):
        state, done = env.reset(), False
        states, actions, rewards = [], [], []
        $steps
            action = agent.$pick($arg)
            next_state, reward, done, _ = env.step(action)
            states.append(state)
            actions.append(action)
            rewards.append(reward)
            state = next_state
            if done:
                break
        agent.learn(states, actions, rewards)
"""

AGENT_SLOTS = {
    "attr": ("policy", "actor", "q_net", "net"),
    "pick": ("choose_action", "select_action", "act", "get_action", "step_policy"),
    "state": ("s", "state", "obs"),
    "s": ("x", "s_t"),
    "a": ("a", "action", "prob_weights"),
    "net": ("self.$attr",),
    "to_tensor": STATE,
    "choose": PICK,
    "steps": STEPS,
    "arg": ("state", "np.array(state)", "state.copy()"),
    "mark": (MARK,),
}

FUNCTION = """

def $pick($net, $state):  $mark
    $to_tensor
    $choose
    return $a


def main(env, episodes=200, max_steps=500):
    $net = Policy()
    optimizer = torch.optim.Adam($net.parameters(), lr=1e-2)
    for episode in range(episodes):
        state, done = env.reset(), False
        log_probs, rewards = [], []
        $steps
            action = $pick($net, $arg)
            state, reward, done, _ = env.step(action)
            rewards.append(reward)
            log_probs.append(torch.log($net(torch.as_tensor(state, dtype=torch.float32)).max()))
            if done:
                break
        loss = -torch.stack(log_probs).sum() * sum(rewards)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

FUNCTION_SLOTS = {**AGENT_SLOTS, "net": ("policy", "pi", "model", "actor")}

# A closure over the network inside the training function (the policy-gradient examples of course material).
CLOSURE = """

def train(env, epochs=50, batch_size=5000):
    logits_net = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))

    def get_policy(obs):
        return Categorical(logits=logits_net(obs))

    def $pick(obs):  $mark
        return get_policy(obs).sample().item()

    optimizer = torch.optim.Adam(logits_net.parameters(), lr=1e-2)
    for epoch in range(epochs):
        batch_obs, batch_acts, batch_weights = [], [], []
        obs, done, ep_rews = env.reset(), False, []
        $steps
            batch_obs.append(obs.copy())
            act = $pick(torch.as_tensor(obs, dtype=torch.float32))
            obs, rew, done, _ = env.step(act)
            batch_acts.append(act)
            ep_rews.append(rew)
            if len(batch_obs) > batch_size:
                break
        batch_weights += [sum(ep_rews)] * len(batch_obs)
        logp = get_policy(torch.as_tensor(np.array(batch_obs), dtype=torch.float32)).log_prob(torch.as_tensor(batch_acts))
        loss = -(logp * torch.as_tensor(batch_weights)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

STEP_SHAPES = [
    Shape(name="action-per-step-cpu/agent", files={"main.py": HEAD + AGENT + RUN}, slots=AGENT_SLOTS, select=SELECT),
    Shape(name="action-per-step-cpu/agent-other-file",
          files={"agent.py": HEAD + AGENT, "main.py": "from agent import *\n" + RUN}, slots=AGENT_SLOTS, select=SELECT),
    Shape(name="action-per-step-cpu/function", files={"main.py": HEAD + FUNCTION}, slots=FUNCTION_SLOTS,
          select=SELECT),
    Shape(name="action-per-step-cpu/closure", files={"main.py": HEAD + CLOSURE},
          slots={"pick": ("get_action", "sample_action", "pi_act"), "steps": ("while True:", "for t in itertools.count():",
                                                                             "for t in range(batch_size * 2):"),
                 "mark": (MARK,)},
          select=SELECT),
]

# -- an evaluation run under no-grad every epoch, then bare once more after training ------------------------
EVAL_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(16, 10))

    def forward(self, x):
        return self.body(x)


def $fname($model, $loader):  $mark
    $model = $model.eval()
    correct = 0
    for x, y in $loader:
        x, y = x.to(device), y.to(device)
        correct += ($model(x).argmax(1) == y).sum().item()
    $model.train()
    return correct / len($loader.dataset)


def train($model, train_loader, test_loader, optimizer, epochs=30):
    for epoch in range(epochs):
        for x, y in train_loader:
            loss = F.cross_entropy($model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        $quiet
            print(epoch, $fname($model, test_loader))
"""

EVAL_MAIN = """
net = Net().to(device)
data = torchvision.datasets.CIFAR10("data", train=True, transform=torchvision.transforms.ToTensor())
test = torchvision.datasets.CIFAR10("data", train=False, transform=torchvision.transforms.ToTensor())
train_loader = DataLoader(data, batch_size=64, shuffle=True)
test_loader = DataLoader(test, batch_size=256)
train(net, train_loader, test_loader, torch.optim.SGD(net.parameters(), lr=0.1))
net.load_state_dict(torch.load("best.pt"))
$final
"""

EVAL_SLOTS = {
    "fname": ("test", "evaluate", "accuracy", "run_eval"),
    "model": ("model", "net", "student"),
    "loader": ("loader", "data_loader", "val_loader"),
    "quiet": ("with torch.no_grad():", "with torch.inference_mode():", "with torch.set_grad_enabled(False):"),
    "final": ("print('test accuracy', $fname(net, test_loader))", "result = $fname(net, test_loader)\nprint(result)"),
}

MIXED_SHAPES = [
    Shape(name=f"eval-bare-after-training/{frame}", files={"main.py": EVAL_HEAD + body},
          slots={**EVAL_SLOTS, "mark": (MARK,)}, select=SELECT)
    for frame, body in {
        "module": EVAL_MAIN,
        "main_block": "\nif __name__ == '__main__':\n" + "\n".join("    " + line for line in EVAL_MAIN.splitlines()),
    }.items()
]

# -- near misses ------------------------------------------------------------------------------------------
# On the CPU, one prediction on a batch held in memory every epoch: a toy, nothing worth a change.
HELD_BATCH = """

def $pick($net, $state):
    $to_tensor
    $choose
    return $a


def main(X, Y, epochs=200):
    $net = Policy()
    optimizer = torch.optim.Adam($net.parameters(), lr=1e-2)
    for epoch in range(epochs):
        loss = F.nll_loss(torch.log($net(torch.as_tensor(X, dtype=torch.float32))), torch.as_tensor(Y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(epoch, $pick($net, X))
"""

# A handful of literal trips, a caller under no-grad, a result kept for the loss.
AGENT_RUN_NEAR = """

def run(env, agent, episodes=500):
    for episode in range(episodes):
        state = env.reset()
        $loop
            $call
            state, reward, done, _ = env.step(action)
"""

NEAR_LOOPS = ("for t in range(5):", "for t in (0, 1, 2):")
KEPT = """

class Agent:
    def __init__(self):
        self.policy = Policy()
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=1e-3)
        self.log_probs = []

    def $pick(self, state):
        dist = Categorical(probs=self.policy(torch.tensor(state, dtype=torch.float)))
        action = dist.sample()
        self.log_probs.append(dist.log_prob(action))
        return action.item()

    def finish(self, returns):
        loss = -(torch.stack(self.log_probs) * torch.tensor(returns)).sum()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.log_probs = []
"""

QUIET_AGENT = AGENT.replace("  $mark", "")

# A loss built every update from the values and log probabilities it is given, beside one detached bootstrap
# value: the caller backpropagates through what it returns.
LOSS_AGENT = """

class Agent:
    def __init__(self):
        self.critic = Policy(4, 1)
        self.optimizer = torch.optim.Adam(self.critic.parameters(), lr=1e-3)

    def $fname(self, last_state, values, log_probs, rewards):
        next_v = self.critic(torch.tensor([last_state], dtype=torch.float)).detach()
        returns = torch.tensor(rewards, dtype=torch.float) + 0.99 * next_v.squeeze()
        advantage = returns - torch.cat(values).squeeze()
        return -(torch.stack(log_probs) * advantage.detach()).sum() + advantage.pow(2).mean()


def run(env, agent, episodes=500):
    for episode in range(episodes):
        state, done = env.reset(), False
        values, log_probs, rewards = [], [], []
        $steps
            values.append(agent.critic(torch.tensor([state], dtype=torch.float)))
            log_probs.append(torch.log(values[-1].sum()))
            state, reward, done, _ = env.step(0)
            rewards.append(reward)
            loss = agent.$fname(state, values, log_probs, rewards)
            agent.optimizer.zero_grad()
            loss.backward()
            agent.optimizer.step()
"""

NEAR_SHAPES = [
    Shape(name="held-batch-every-epoch-cpu/function", files={"main.py": HEAD + HELD_BATCH},
          slots={**FUNCTION_SLOTS, "state": ("X", "inputs")}, select=SELECT),
    Shape(name="few-literal-steps-cpu/agent", files={"main.py": HEAD + QUIET_AGENT + AGENT_RUN_NEAR},
          slots={**AGENT_SLOTS, "loop": NEAR_LOOPS, "call": ("action = agent.$pick(state)",)}, select=SELECT),
    Shape(name="caller-no-grad-cpu/agent", files={"main.py": HEAD + QUIET_AGENT + AGENT_RUN_NEAR},
          slots={**AGENT_SLOTS, "loop": STEPS[:2],
                 "call": ("with torch.no_grad():\n    action = agent.$pick(state)",
                          "with torch.inference_mode():\n    action = agent.$pick(state)")}, select=SELECT),
    Shape(name="log-prob-kept-for-loss-cpu/agent", files={"main.py": HEAD + KEPT + AGENT_RUN_NEAR},
          slots={"pick": AGENT_SLOTS["pick"], "loop": STEPS[:2], "call": ("action = agent.$pick(state)",)},
          select=SELECT),
    Shape(name="loss-with-detached-bootstrap-cpu/agent", files={"main.py": HEAD + LOSS_AGENT},
          slots={"fname": ("calc_loss", "compute_loss", "update_terms"), "steps": STEPS[:3]}, select=SELECT),
    Shape(name="eval-every-call-quiet/module",
          files={"main.py": EVAL_HEAD + EVAL_MAIN.replace("$final", "with torch.no_grad():\n    print($fname(net, test_loader))")},
          slots={**EVAL_SLOTS, "mark": ("",)}, select=SELECT),
]

SHAPES = STEP_SHAPES + MIXED_SHAPES + NEAR_SHAPES

LIMIT = 10
XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("shape", params(SHAPES, XFAIL))
def test_forward_passes_repeated_by_callers_are_found_however_written(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
