"""Family B, rollouts: an agent runs its policy every environment step and keeps what it needs for the update in
a buffer. Whether those forward passes are inference depends on where each stored element goes: PPO stores the
log probability and the value as data (the update reads them back through `.detach()` and recomputes the log
probabilities it trains on), so the graph of every step is thrown away; the sampled action carries no graph at
all, wherever it goes. Near misses stay silent: A2C/REINFORCE stack the stored log probabilities into the loss
and backpropagate through them, or the step already runs under no-grad."""

from __future__ import annotations

import pytest

from tests.generalisation.test_variants_inference import params
from tests.generalisation.variants import Shape, differing

SELECT = ("TL301", "TL305")
MARK = "# expect: TL301"

PROGRAM = """
import torch
import torch.nn as nn
from torch.distributions import Categorical

device = torch.device("cuda")


class Buffer:
    def __init__(self):
        self.$lp = []
        self.$vals = []
        self.rewards = []

    def clear(self):
        del self.$lp[:]
        del self.$vals[:]
        del self.rewards[:]


class ActorCritic(nn.Module):
    def __init__(self, n_in=8, n_out=4):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(n_in, 64), nn.Tanh(), nn.Linear(64, n_out), nn.Softmax(dim=-1))
        self.critic = nn.Sequential(nn.Linear(n_in, 64), nn.Tanh(), nn.Linear(64, 1))

    def $act(self, state):
        $dist = Categorical(self.actor(state))
        action = $dist.sample()
        $returned

    def evaluate(self, states, actions):
        dist = Categorical(self.actor(states))
        return dist.log_prob(actions), self.critic(states).squeeze(-1)


class Agent:
    def __init__(self):
        self.buffer = Buffer()
        self.policy = ActorCritic().to(device)
        self.policy_old = ActorCritic().to(device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=3e-4)

    def select_action(self, state):  $mark
        state = torch.FloatTensor(state).to(device)
        $unpack = self.policy_old.$act(state)
        self.buffer.$lp.append(lp)
        self.buffer.$vals.append(v)
        $give

    def update(self, states, actions):
        returns = torch.tensor(self.buffer.rewards, dtype=torch.float32).to(device)
        $read_lp
        $read_vals
        for _ in range(4):
            logprobs, values = self.policy.evaluate(states, actions)
            $loss
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        self.policy_old.load_state_dict(self.policy.state_dict())
        self.buffer.clear()


def run(env, memory, episodes=1000):
    agent = Agent()
    for episode in range(episodes):
        state = env.reset()
        for t in range(300):
            action = agent.select_action(state)
            state, reward, done, _ = env.step(action)
            memory.push(state, action, reward)
            agent.buffer.rewards.append(reward)
            if done:
                break
        agent.update(*memory.batch())
"""

# the policy hands back (action, log probability, value); the caller unpacks them
RETURN = (
    "return action, $dist.log_prob(action), self.critic(state)",
    "logp = $dist.log_prob(action)\nvalue = self.critic(state)\nreturn action, logp, value",
    "return (action, $dist.log_prob(action), self.critic(state).squeeze(-1))",
)
UNPACK = ("a, lp, v", "(a, lp, v)", "[a, lp, v]")
# what the caller gets back: the action on the host, or the sampled tensor itself (no graph either way)
GIVE = ("return a.item()", "return a.cpu().numpy()", "return a")
# PPO reads the stored values back as data
READ_LP = (
    "old_lp = torch.stack(self.buffer.$lp).detach()",
    "old_lp = torch.squeeze(torch.stack(self.buffer.$lp, dim=0)).detach().to(device)",
    "old_lp = torch.cat(self.buffer.$lp).to(device).detach()",
)
READ_VALS = (
    "old_v = torch.stack(self.buffer.$vals).detach().squeeze(-1)",
    "old_v = torch.cat(self.buffer.$vals).detach()",
)
PPO_LOSS = (
    "ratio = torch.exp(logprobs - old_lp)\nadv = returns - old_v\n"
    "loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean() + (values - returns).pow(2).mean()",
)
SLOTS = {
    "lp": ("logprobs", "log_probs", "old_logp"),
    "vals": ("values", "state_values", "v_pred"),
    "act": ("act", "step", "get_action"),
    "dist": ("dist", "pi", "m"),
    "returned": RETURN,
    "unpack": UNPACK,
    "give": GIVE,
    "read_lp": READ_LP,
    "read_vals": READ_VALS,
    "loss": PPO_LOSS,
    "mark": (MARK,),
}

SHAPES = [Shape(name="rollout-stored-as-data", files={"agent.py": PROGRAM}, slots=SLOTS, select=SELECT)]

# -- near misses ------------------------------------------------------------------------------------------
NEAR_SHAPES = [
    # A2C: the stored log probabilities and values are the graph the loss backpropagates through
    Shape(name="rollout-stored-for-the-loss", files={"agent.py": PROGRAM}, select=SELECT, slots={
        **SLOTS, "mark": ("",),
        "read_lp": ("old_lp = torch.stack(self.buffer.$lp)", "old_lp = torch.cat(self.buffer.$lp).to(device)"),
        "loss": ("adv = returns - old_v.detach()\n"
                 "loss = -(old_lp * adv).mean() + (old_v - returns).pow(2).mean() - 0.01 * (logprobs * values).mean()",),
        "read_vals": ("old_v = torch.stack(self.buffer.$vals).squeeze(-1)", "old_v = torch.cat(self.buffer.$vals)"),
    }),
    # only the values are trained on (a critic fitted to the stored values), the log probabilities are data
    Shape(name="rollout-values-stored-for-the-loss", files={"agent.py": PROGRAM}, select=SELECT, slots={
        **SLOTS, "mark": ("",),
        "read_vals": ("old_v = torch.stack(self.buffer.$vals).squeeze(-1)",),
        "loss": ("loss = (old_v - returns).pow(2).mean() - (logprobs * old_lp).mean()",),
    }),
    # the step already runs under no-grad
    Shape(name="rollout-under-no-grad", files={"agent.py": PROGRAM.replace(
        "    def select_action(self, state):  $mark", "    @torch.no_grad()\n    def select_action(self, state):  $mark"
    )}, select=SELECT, slots={**SLOTS, "mark": ("",)}),
]

LIMIT = 10
XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("shape", params(SHAPES + NEAR_SHAPES, XFAIL))
def test_rollouts_are_judged_by_where_each_stored_element_goes(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message


# -- a policy class handed in as a parameter's default, acting under no-grad inside its own method -------------
CORE = """
import torch
import torch.nn as nn


class $cls(nn.Module):
    def __init__(self, n_in=3, n_out=1):
        super().__init__()
        self.pi = nn.Sequential(nn.Linear(n_in, 64), nn.ReLU(), nn.Linear(64, n_out), nn.Tanh())
        self.q = nn.Sequential(nn.Linear(n_in + n_out, 64), nn.ReLU(), nn.Linear(64, 1))

    def act(self, obs):
        with torch.no_grad():
            return self.pi(obs).numpy()
"""
ALGO = """
import copy
import numpy as np
import torch
$import


def ddpg(env, $param=$default, steps=100000, noise=0.1):
    ac = $param()
    ac_targ = copy.deepcopy(ac)
    pi_optimizer = torch.optim.Adam(ac.pi.parameters(), lr=1e-3)

    def get_action(o, noise_scale):
        a = ac.act(torch.as_tensor(o, dtype=torch.float32))
        a += noise_scale * np.random.randn(1)
        return np.clip(a, -1, 1)

    o = env.reset()
    for t in range(steps):
        a = get_action(o, noise)
        o, r, d, _ = env.step(a)
        with torch.no_grad():
            for p, p_targ in zip(ac.parameters(), ac_targ.parameters()):
                p_targ.data.mul_(0.995)
                p_targ.data.add_(0.005 * p.data)
"""
DEFAULT_SLOTS = {"cls": ("MLPActorCritic", "ActorCritic"), "param": ("actor_critic", "policy_cls")}
NEAR_SHAPES_DEFAULT = [
    Shape(name="policy-class-default-acting-under-no-grad/module-attribute", select=SELECT,
          files={"core.py": CORE, "algo.py": ALGO},
          slots={**DEFAULT_SLOTS, "import": ("import core",), "default": ("core.$cls",)}),
    Shape(name="policy-class-default-acting-under-no-grad/imported-name", select=SELECT,
          files={"core.py": CORE, "algo.py": ALGO},
          slots={**DEFAULT_SLOTS, "import": ("from core import $cls",), "default": ("$cls",)}),
]


@pytest.mark.parametrize("shape", params(NEAR_SHAPES_DEFAULT, {}))
def test_a_policy_class_given_as_a_default_is_read_for_its_grad_mode(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message


# -- a driver loop that acts, hands the step to a memory object's method, and calls the agent's update ----------
DRIVER = PROGRAM.split("class Agent:")[0] + """
class Memory:
    def __init__(self):
        self.$lp, self.$vals, self.rewards = [], [], []

    def $push(self, log_prob, value, reward):
        self.$lp.append(log_prob)
        self.$vals.append(value)
        self.rewards.append(reward)


class Agent:
    def __init__(self):
        self.memory = Memory()
        self.policy = ActorCritic().to(device)
        self.policy_old = ActorCritic().to(device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=3e-4)

    def $update(self, states, actions):
        returns = torch.tensor(self.memory.rewards, dtype=torch.float32).to(device)
        old_lp = torch.stack(self.memory.$lp)$cut
        old_v = torch.stack(self.memory.$vals).squeeze(-1)$cut
        logprobs, values = self.policy.evaluate(states, actions)
        loss = -(torch.exp(logprobs - old_lp) * (returns - old_v)).mean() + (values - returns).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def main(env, batches, episodes=1000):
    agent = Agent()
    for episode in range(episodes):
        state = env.reset()
        for t in range(300):
            s = torch.FloatTensor(state).to(device)
            $unpack = agent.policy_old.$act(s)  $mark
            state, reward, done, _ = env.step(a.item())
            agent.$holder.$push(lp, v, reward)
            if done:
                break
        agent.$update(*batches.next())
"""
DRIVER_SLOTS = {**{k: SLOTS[k] for k in ("lp", "vals", "act", "dist", "returned", "unpack", "mark")},
                "push": ("push", "store", "add"), "update": ("update", "learn", "train_step"),
                "holder": ("memory",), "cut": (".detach()",)}
SHAPES_DRIVER = [Shape(name="driver-loop-keeps-the-step-in-a-memory-object", files={"agent.py": DRIVER},
                       slots=DRIVER_SLOTS, select=SELECT)]
# the update delegates its optimizer step to another method: the driver's call of it is training, no forward pass
DELEGATED = DRIVER.replace("""        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
""", """        self._apply(loss)

    def _apply(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def _baseline(self, states):  # expect: TL301
        return self.policy.critic(states).squeeze(-1).detach()
""").replace("""        logprobs, values = self.policy.evaluate(states, actions)
""", """        states, actions = torch.FloatTensor(states).to(device), torch.LongTensor(actions).to(device)
        returns = returns - self._baseline(states)
        logprobs, values = self.policy.evaluate(states, actions)
""")
SHAPES_DRIVER.append(Shape(name="driver-loop-update-delegates-its-step", files={"agent.py": DELEGATED},
                           slots=DRIVER_SLOTS, select=SELECT))
NEAR_SHAPES_DRIVER = [
    # the stored log probabilities and values are the graph the loss backpropagates through
    Shape(name="driver-loop-keeps-the-step-for-the-loss", files={"agent.py": DRIVER}, select=SELECT,
          slots={**DRIVER_SLOTS, "mark": ("",), "cut": ("",)}),
]


@pytest.mark.parametrize("shape", params(SHAPES_DRIVER + NEAR_SHAPES_DRIVER, {}))
def test_a_driver_loop_is_judged_by_the_memory_method_and_the_update_it_calls(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message

