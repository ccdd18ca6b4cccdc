"""Forward flow and grad mode: where a forward pass's result goes, how often it runs, who calls it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from torchlint.lint.api import lint_paths
from torchlint.semantic import forward_flow
from torchlint.semantic.forward_flow import BACKWARD, RETURNED, STORED


def reaches(code: str) -> set[str]:
    """Where the result of the call `net(...)` in the first function of `code` goes."""
    module = cst.parse_module(textwrap.dedent(code))
    function = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    seed = _first_call(function, "net")
    return forward_flow.result_reaches(function, seed)


def _first_call(node: cst.CSTNode, name: str) -> cst.Call:
    found = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if isinstance(call.func, cst.Name) and call.func.value == name:
                found.append(call)

    node.visit(Finder())
    return found[0]


def test_host_reads_and_metrics_end_the_flow() -> None:
    assert reaches("""
    def act(net, state):
        return net(state).cpu().numpy()
    """) == set()
    assert reaches("""
    def metrics(net, loader):
        hits = []
        for x, y in loader:
            out = net(x)
            _, top = torch.topk(out, 10)
            hits.append(torch.take(x, top).cpu().tolist())
        return sum(hits)
    """) == set()
    # a name reassigned from a host copy no longer holds the graph
    assert reaches("""
    def act(net, state):
        action = net(state)
        action = action.detach().cpu().numpy()
        return action[0]
    """) == set()


def test_backward_return_and_storage_are_followed() -> None:
    assert reaches("""
    def step(net, x, y):
        out = net(x)
        loss = criterion(out, y)
        scaler.scale(loss).backward()
    """) == {BACKWARD}
    assert reaches("""
    def forward_pass(net, x):
        outs = []
        outs.append(net(x))
        return torch.cat(outs)
    """) == {RETURNED}
    assert reaches("""
    def forward(net, x):
        self.fake = net(x)
    """) == {STORED}
    # the recurrent state carries the graph into the next trip, whose loss is backpropagated
    assert reaches("""
    def train(net, xs, hidden):
        for x in xs:
            out, hidden = net(x, hidden)
        loss = out.sum()
        loss.backward()
    """) == {BACKWARD}
    # either arm of an `if` may hold it
    assert reaches("""
    def maybe(net, x, flag):
        out = net(x)
        if flag:
            out = out.detach()
        else:
            pass
        return out
    """) == {RETURNED}


def test_code_out_of_sight_may_train() -> None:
    code = """
    def learn(net, x):
        loss = net(x).mean()
        self.take_step(loss)
    """
    assert reaches(code) == set()  # without a judge of opaque calls
    module = cst.parse_module(textwrap.dedent(code))
    function = module.body[0]
    assert forward_flow.result_reaches(function, _first_call(function, "net"), opaque=lambda call: True) == {STORED}


def lint(tmp_path: Path, files: dict[str, str], target: str) -> list[tuple[str, int]]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")  # marks the project's folder
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    results = lint_paths([str(tmp_path / target)], select=["TL301"])
    return [(Path(r.path).name, f.line) for r in results for f in r.findings]


AGENT = """
import torch

class Agent:
    def __init__(self, actor):
        self.actor = actor.cuda()

    def select_action(self, state):
        state = torch.as_tensor(state).cuda()
        return self.actor(state).cpu().numpy()
"""


def test_callers_in_other_files_decide_frequency_and_grad(tmp_path: Path) -> None:
    loop = """
    from agent import Agent

    def run(env, agent, steps):
        state = env.reset()
        for _ in range(steps):
            state = env.step(agent.select_action(state))
    """
    assert lint(tmp_path, {"agent.py": AGENT, "main.py": loop}, "agent.py") == [("agent.py", 8)]
    under_no_grad = """
    import torch
    from agent import Agent

    def run(env, agent, steps):
        state = env.reset()
        with torch.no_grad():
            for _ in range(steps):
                state = env.step(agent.select_action(state))
    """
    assert lint(tmp_path, {"agent.py": AGENT, "main.py": under_no_grad}, "agent.py") == []


def test_a_function_called_once_from_main_runs_once(tmp_path: Path) -> None:
    script = """
    import torch

    def demo(model, image):
        model.eval()
        out = model(image.cuda())
        print(out.argmax(1).item())

    if __name__ == "__main__":
        demo(torch.load("m.pt"), torch.load("x.pt"))
    """
    assert lint(tmp_path, {"demo.py": script}, "demo.py") == []
    # called for every image: it runs as often as there are images
    looped = """
    import torch

    def demo(model, image):
        model.eval()
        out = model(image.cuda())
        print(out.argmax(1).item())

    if __name__ == "__main__":
        for path in paths:
            demo(model, torch.load(path))
    """
    assert lint(tmp_path, {"demo.py": looped}, "demo.py") == [("demo.py", 4)]
