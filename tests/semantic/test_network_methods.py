"""Networks run through methods of their own class, train/eval functions switched by a flag, loops over runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
from lint_testing import lines as shared_lines

from torchlint.lint.api import lint_paths
from torchlint.semantic import forward_flow


def lint(tmp_path: Path, files: dict[str, str], target: str) -> list[tuple[str, int]]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")  # marks the project's folder
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    results = lint_paths([str(tmp_path / target)], select=["TL301"])
    return [(Path(r.path).name, f.line) for r in results for f in r.findings]


def lines(code: str) -> list[int]:
    return shared_lines(code, "TL301", path="train.py")


MODEL = """
import torch
import torch.nn as nn

class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, state):
        return self.fc(state).chunk(2, -1)

    def sample(self, state):
        mean, log_std = self.forward(state)
        return mean + log_std.exp() * torch.randn_like(mean)
"""

SAC = """
import torch
from model import GaussianPolicy

class SAC:
    def __init__(self):
        self.policy = GaussianPolicy().to("cuda")

    def select_action(self, state):
        state = torch.FloatTensor(state).to("cuda").unsqueeze(0)
        action = self.policy.sample(state)
        return action.detach().cpu().numpy()[0]

def run(env, agent, steps):
    state = env.reset()
    for _ in range(steps):
        state = env.step(agent.select_action(state))
"""


def test_a_method_of_a_project_class_that_runs_the_module_is_a_forward_pass(tmp_path: Path) -> None:
    assert lint(tmp_path, {"model.py": MODEL, "sac.py": SAC}, "sac.py") == [("sac.py", 9)]


def test_a_method_that_turns_grad_off_itself_is_not(tmp_path: Path) -> None:
    decorated = MODEL.replace("    def sample(", "    @torch.no_grad()\n    def sample(")
    assert lint(tmp_path, {"model.py": decorated, "sac.py": SAC}, "sac.py") == []


def test_a_receiver_annotated_with_a_class_whose_method_runs_no_network() -> None:
    code = """
    import torch

    class Decoder:
        def decode(self, probs):
            return [p.argmax(-1).tolist() for p in probs]

    def transcribe(model, decoder: Decoder, chunks):
        outs = []
        with torch.no_grad():
            for chunk in chunks:
                outs.append(model(chunk.cuda()).cpu())
        for out in outs:
            print(decoder.decode(out))
    """
    assert lines(code) == []


def test_an_unknown_class_needs_a_network_receiver_and_an_inference_method_name() -> None:
    code = """
    import torch

    def evaluate_users(model, users, items):
        return [model.predict(u, items[u].cuda()).argmax().item() for u in users]

    def refresh(model, batches):
        return [model.rebuild(b.cuda()).sum().item() for b in batches]

    def score(store, users, items):
        return [store.predict(u, items[u].cuda()).argmax().item() for u in users]
    """
    assert lines(code) == [4]


def test_a_flag_in_a_string_comparison_and_a_default_switch_training_off() -> None:
    code = """
    import torch
    import torch.nn.functional as F

    def step_all(model, loader, optimizer, mode="train"):
        for x, y in loader:
            loss = F.mse_loss(model(x.cuda()), y.cuda())
            if mode == "train":
                loss.backward()
                optimizer.step()

    def validate(model, loader):
        step_all(model, loader, None, mode="val")

    def fit(model, loader, optimizer):
        for epoch in range(3):
            step_all(model, loader, optimizer)
    """
    assert lines(code) == [12]


def test_a_function_that_switches_grad_by_its_flag_is_left_alone() -> None:
    code = """
    import torch
    import torch.nn.functional as F

    def run_epoch(model, loader, optimizer, train):
        with torch.set_grad_enabled(train):
            for x, y in loader:
                loss = F.mse_loss(model(x.cuda()), y.cuda())
                if train:
                    loss.backward()
                    optimizer.step()

    def validate(model, loader):
        run_epoch(model, loader, None, False)
    """
    assert lines(code) == []


def test_training_outside_the_flag_keeps_the_call_silent() -> None:
    code = """
    import torch
    import torch.nn.functional as F

    def run_epoch(model, loader, optimizer, train=True):
        for x, y in loader:
            loss = F.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            if train:
                optimizer.step()

    def validate(model, loader):
        run_epoch(model, loader, None, train=False)
    """
    assert lines(code) == []


def test_comprehension_names_hide_the_outer_ones() -> None:
    code = textwrap.dedent("""
    def act(net, envs, obs):
        actions, _ = net(obs)
        actions = actions.detach().cpu().numpy()
        actions = [envs.sample() for _ in range(4)]
        return actions
    """)
    function = cst.parse_module(code).body[0]
    assert forward_flow.result_reaches(function, _forward(function)) == set()
    returned = code.replace("[envs.sample() for _ in range(4)]", "[x for x in _]")  # now it iterates the result
    function = cst.parse_module(returned).body[0]
    assert forward_flow.result_reaches(function, _forward(function)) == {forward_flow.RETURNED}


def _forward(function: cst.FunctionDef) -> cst.Call:
    """The `net(obs)` call of the first statement."""
    return function.body.body[0].body[0].value  # type: ignore[attr-defined,return-value]


def test_a_loop_that_builds_the_network_afresh_repeats_whole_runs() -> None:
    code = """
    import torch
    import torch.nn.functional as F

    embeds = encoder(features.cuda()).detach()
    for run in range(50):
        probe = LogReg(64, 10).cuda()
        opt = torch.optim.Adam(probe.parameters())
        for _ in range(100):
            opt.zero_grad()
            F.cross_entropy(probe(embeds), labels).backward()
            opt.step()
        print((probe(test_embeds).argmax(1) == test_labels).float().mean())

    probe = LogReg(64, 10).cuda()
    opt = torch.optim.Adam(probe.parameters())
    for epoch in range(100):
        opt.zero_grad()
        F.cross_entropy(probe(embeds), labels).backward()
        opt.step()
        print((probe(test_embeds).argmax(1) == test_labels).float().mean())
    """
    assert lines(code) == [21]
