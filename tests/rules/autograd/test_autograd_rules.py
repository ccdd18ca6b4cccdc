"""Decision edges of the autograd and inference rules (TL301-TL307)."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchlint.lint.api import lint_source
from torchlint.semantic.modules import (
    eval_name_strength,
    is_model_like,
    is_network_callee,
)


def lines(code: str, rule: str, path: str = "train.py") -> list[int]:
    result = lint_source(textwrap.dedent(code), path, select=[rule])
    assert result.error is None and not result.notes, (result.error, result.notes)
    return [f.line for f in result.findings if f.code == rule]


def fixed(code: str, rule: str, path: str = "train.py") -> str:
    result = lint_source(textwrap.dedent(code), path, select=[rule], unsafe_fixes=True)
    assert not result.notes, result.notes
    assert result.fixed_text is not None
    cst.parse_module(result.fixed_text)
    return result.fixed_text


# -- helpers ------------------------------------------------------------------------------------------------------


def test_model_like_names() -> None:
    for name in ("model", "self.model", "net", "netG", "ema_model", "model_ema", "policy_net", "self.teacher", "unet"):
        assert is_model_like(name), name
    for name in ("Model", "build_model", "get_model", "criterion", "loss_fn", "self.policy", "optimizer", "load_net"):
        assert not is_model_like(name), name


def test_network_callees() -> None:
    for name in ("netG", "generator", "self.generator", "self.model.decoder", "net.encoder", "trainer.model",
                 "agent.policy_net", "model_ema.ema"):
        assert is_network_callee(name), name
    for name in ("writer.generator", "tokenizer.decoder", "self.tokenizer.decoder", "json.encoder", "cfg.ema"):
        assert not is_network_callee(name), name


def test_eval_names() -> None:
    assert eval_name_strength("evaluate") == 2
    assert eval_name_strength("run_validation") == 2
    assert eval_name_strength("testModel") == 2
    assert eval_name_strength("generate") == 1
    assert eval_name_strength("sample_images") == 1
    assert eval_name_strength("train_one_epoch") == 0


# -- TL301 --------------------------------------------------------------------------------------------------------


def test_tl301_resolves_aliased_no_grad() -> None:
    code = """
    import torch as th
    from torch import no_grad as ng

    def evaluate(model, loader):
        model.eval()
        with ng():
            return [model(x) for x in loader]

    @th.inference_mode()
    def predict(model, loader):
        model.eval()
        return [model(x) for x in loader]
    """
    assert lines(code, "TL301") == []


def test_tl301_needs_torch_import() -> None:
    code = """
    import paddle

    def evaluate(model, loader):
        model.eval()
        return [model(x) for x in loader]
    """
    assert lines(code, "TL301") == []


def test_tl301_torch_used_without_import() -> None:
    # a snippet or a star import (`from utils import *`): `torch.` in the code, or `.cuda()` with no other
    # framework imported, marks the file as PyTorch code
    star = """
    from utils import *

    def evaluate(model, loader):
        model.eval()
        return [model(x.to(torch.device("cuda"))) for x in loader]
    """
    assert lines(star, "TL301") == [4]
    out = fixed(star, "TL301")
    assert "import torch\n" in out and "@torch.no_grad()\ndef evaluate" in out
    snippet = """
    from tqdm import tqdm

    def evaluate(model, dataloader):
        model.eval()
        for X, y in tqdm(dataloader):
            pred = model(X.cuda())
    """
    assert lines(snippet, "TL301") == [4]
    paddle = snippet.replace("from tqdm import tqdm", "import paddle")
    assert lines(paddle, "TL301") == []
    ported = paddle.replace("model.eval()", 'model.eval()  # as torch.no_grad\n        print("like torch.no_grad")')
    assert lines(ported, "TL301") == []
    commented = """
    from utils import *

    def evaluate(model, loader):  # torch.no_grad is not needed here?
        model.eval()
        return [model(x) for x in loader]
    """
    assert lines(commented, "TL301") == []


def test_tl301_validation_forward_after_the_training_step() -> None:
    code = """
    import torch

    def train(epoch):
        model.train()
        optimizer.zero_grad()
        x = x.cuda()
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        if validate:
            model.eval()
        out = model(x_val)
        print(out.sum().item())
    """
    assert lines(code, "TL301") == [12]
    # a program that never uses an accelerator: one forward pass per evaluation costs too little to matter
    assert lines(code.replace("x = x.cuda()", "pass"), "TL301") == []
    # the forward pass is not in the eval's block: the fix wraps it where it stands
    assert "        model.eval()\n    with torch.no_grad():\n        out = model(x_val)\n    print" in fixed(code, "TL301")
    # no step before the eval: the graph may be for the caller
    no_step = code.replace("loss.backward()", "pass").replace("optimizer.step()", "pass")
    assert lines(no_step, "TL301") == []
    # a backward pass after the forward uses the graph
    used = code.replace("print(out.sum().item())", "out.sum().backward()")
    assert lines(used, "TL301") == []


def test_tl301_no_wrap_fix_over_a_training_statement() -> None:
    code = """
    import torch

    def train(model, optimizer, x, x_val):
        x_val = x_val.cuda()
        model(x).sum().backward()
        optimizer.step()
        model.eval()
        if log:
            out = model(x_val)
            model.train()
            print(out.mean().item())
        for p in model.parameters():
            print(p.grad)
    """
    assert lines(code, "TL301") == [8]
    # the `if` block holds `model.train()`: only the forward pass goes under no_grad
    assert "with torch.no_grad():\n            out = model(x_val)\n        model.train()" in fixed(code, "TL301")
    # wrapping both forward passes would put the training step of the `if` block under no_grad: no fix
    in_span = """
    import torch

    def train(model, optimizer, x, x_val):
        x_val = x_val.cuda()
        model(x).sum().backward()
        optimizer.step()
        model.eval()
        out = model(x_val)
        if log:
            extra = model(x_val * 2)
            model.train()
            model(x).sum().backward()
    """
    result = lint_source(textwrap.dedent(in_span), "train.py", select=["TL301"])
    assert [(f.line, f.fix) for f in result.findings] == [(8, None)]


def test_tl301_silent_in_test_files_and_pytest_cases() -> None:
    code = """
    import torch

    def evaluate(model, loader):
        model.eval()
        return [model(x) for x in loader]
    """
    assert lines(code, "TL301", "tests/test_eval.py") == []
    pytest_case = """
    import pytest
    import torch

    def test_forward_shape():
        model = torch.nn.Linear(2, 2)
        model.eval()
        assert model(torch.zeros(1, 2)).shape == (1, 2)
    """
    assert lines(pytest_case, "TL301") == []


def test_tl301_caller_wraps_transitively() -> None:
    code = """
    import torch

    def evaluate(model, loader):
        model.eval()
        return [model(x) for x in loader]

    def run(model, loader):
        return evaluate(model, loader)

    @torch.no_grad()
    def main(model, loader):
        run(model, loader)
    """
    assert lines(code, "TL301") == []


def test_tl301_forward_after_train_is_not_evaluation() -> None:
    code = """
    import torch

    def toggle(model, x):
        model.eval()
        model.train()
        return model(x)
    """
    assert lines(code, "TL301") == []


def test_tl301_thin_wrapper_is_silent_but_host_values_count() -> None:
    code = """
    import torch

    def predict(model, x):
        return model(x)

    def predict_label(model, x):
        return model(x).argmax(1).item()
    """
    assert lines(code, "TL301") == [7]


def test_tl301_frozen_model_is_silent() -> None:
    code = """
    import torch

    def load(path):
        model = torch.load(path)
        model.requires_grad_(False)
        return model

    def evaluate(model, loader):
        model.eval()
        return [model(x).item() for x in loader]
    """
    assert lines(code, "TL301") == []


def test_tl301_decorator_goes_below_other_decorators() -> None:
    code = """
    import functools

    from torch import nn

    class Runner:
        @functools.lru_cache()
        def predict(self, model, x):
            model.eval()
            return model(x)
    """
    out = fixed(code, "TL301")
    assert "    @functools.lru_cache()\n    @torch.no_grad()\n    def predict" in out
    assert "\nimport torch\n" in out  # added: the file only had `from torch import nn`


def test_tl301_fix_uses_the_file_spelling_of_torch() -> None:
    code = """
    import torch as th

    def evaluate(model, loader):
        model.eval()
        return [model(x).item() for x in loader]
    """
    assert "@th.no_grad()\ndef evaluate" in fixed(code, "TL301")


def test_tl301_wraps_module_level_statements_with_continuation_lines() -> None:
    code = """
    import torch

    model = torch.load("m.pt")
    model.eval()
    for name in names:
        out = model(
            load(name),
        )
    print(out)
    """
    out = fixed(code, "TL301")
    assert "with torch.no_grad():\n    for name in names:\n        out = model(\n            load(name),\n        )\nprint(out)" in out
    # one forward pass in a script (a demo on one input) runs once: nothing to report
    once = code.replace("for name in names:\n        out = model(\n            load(name),\n        )", "out = model(load(names[0]))")
    assert lines(once, "TL301") == []


def test_tl301_reports_eval_call_in_training_function() -> None:
    code = """
    import torch

    def fit(model, opt, train_loader, val_loader):
        for epoch in range(3):
            model.train()
            for x, y in train_loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            model.eval()
            for x, y in val_loader:
                model(x)
    """
    assert lines(code, "TL301") == [11]


def test_tl301_hf_generate_is_silent() -> None:
    code = """
    import torch

    def generate_text(model, ids):
        model.eval()
        return model.generate(ids)
    """
    assert lines(code, "TL301") == []


# -- TL302 / TL303 / TL304 ----------------------------------------------------------------------------------------


def test_tl302_silent_in_tests_and_for_false() -> None:
    code = """
    import torch
    torch.autograd.set_detect_anomaly(True)
    """
    assert lines(code, "TL302", "tests/test_x.py") == []
    assert lines(code, "TL302", "notebooks/08_pytorch_profiling.py") == []  # a file written to profile
    assert lines(code, "TL302", "debug_nan.py") == []
    assert lines(code, "TL302", "checkpointing.py") == [3]
    assert lines(code, "TL302") == [3]
    assert lines("import torch\ntorch.autograd.set_detect_anomaly(False)\n", "TL302") == []


def test_tl303_constant_flow_and_unknown_values() -> None:
    code = """
    import torch
    flag = False

    def step(opt, cfg):
        opt.zero_grad(set_to_none=flag)
        opt.zero_grad(set_to_none=cfg.flag)
        opt.zero_grad(**cfg.kwargs)
    """
    assert lines(code, "TL303") == [6]


def test_tl304_resolves_imports_and_ignores_other_checkpoints() -> None:
    code = """
    import deepspeed
    from torch.utils import checkpoint as ckpt
    from torch.utils.checkpoint import checkpoint as cp

    def forward(self, x):
        x = ckpt.checkpoint(self.a, x)
        x = cp(self.b, x)
        x = deepspeed.checkpointing.checkpoint(self.c, x)
        return x
    """
    assert lines(code, "TL304") == [7, 8]
    out = fixed(code, "TL304")
    assert "ckpt.checkpoint(self.a, x, use_reentrant=False)" in out
    assert "cp(self.b, x, use_reentrant=False)" in out


# -- TL305 / TL306 / TL307 ----------------------------------------------------------------------------------------


def test_tl305_silent_when_parameters_are_optimised() -> None:
    code = """
    import torch
    target_net = Net()
    optimizer = torch.optim.Adam(list(target_net.parameters()))

    def step(x):
        return target_net(x).detach()
    """
    assert lines(code, "TL305") == []


def test_tl306_silent_without_callers_and_with_caller_eval() -> None:
    code = """
    import torch

    def test(model, loader):
        with torch.no_grad():
            return [model(x) for x in loader]
    """
    assert lines(code, "TL306") == []
    with_caller = code + """
    def main(model, loader):
        model.train()
        test(model, loader)
    """
    assert lines(with_caller, "TL306") == [4]
    with_eval = code + """
    def main(model, loader):
        model.eval()
        test(model, loader)
    """
    assert lines(with_eval, "TL306") == []


def test_tl307_off_by_default_and_returns_checked() -> None:
    code = """
    import torch

    def evaluate(model, loader):
        model.eval()
        total = 0.0
        with torch.no_grad():
            for x in loader:
                total += model(x).sum().item()
        return total
    """
    assert [f.code for f in lint_source(textwrap.dedent(code), "t.py").findings if f.code == "TL307"] == []
    assert lines(code, "TL307") == [7]
    returns_tensor = code.replace("return total", "return model(x)")
    assert lines(returns_tensor, "TL307") == []
    # a no_grad block with no forward pass in it (the forward runs after the block) is not inference
    inputs_only = code.replace(
        "            for x in loader:\n                total += model(x).sum().item()",
        "            x = torch.autograd.Variable(loader)\n        total += model(x).sum().item()",
    )
    assert lines(inputs_only, "TL307") == []
    helper = code.replace("total += model(x).sum().item()", "total += float(score(model, x))")
    assert lines(helper, "TL307") == [7]


def test_tl301_generator_attribute_of_a_non_network_is_not_a_forward_pass() -> None:
    code = """
    import torch

    def generate_code(graph, args):
        writer = InputWriter()
        for p, a in zip(graph, args):
            writer.generator(p, a)
        return writer.lines()

    def sample_outputs(pipeline, zs):
        return [pipeline.generator(z) for z in zs]

    def sample_gan(gan, zs):
        return [gan.netG(z) for z in zs]

    def sample_from(model, zs):
        return [model.decoder(z) for z in zs]

    class Sampler:
        def sample(self, zs):
            return [self.generator(z) for z in zs]
    """
    assert lines(code, "TL301") == [13, 16, 20]


def test_tl301_strength_two_names_keep_unambiguous_attributes() -> None:
    code = """
    import torch

    def evaluate(trainer, loader):
        return [trainer.model(x).argmax(1) for x, _ in loader]

    def evaluate_tokens(tokenizer, batches):
        return [tokenizer.decoder(b) for b in batches]
    """
    assert lines(code, "TL301") == [4]


def test_tl301_generate_functions_that_build_source_are_silent() -> None:
    code = """
    import torch

    def generate_repro_string(gm, generator):
        out = []
        for node in gm.graph.nodes:
            out.append(generator(node))
        return "\\n".join(out)

    def generate_images(generator, zs):
        return [generator(z) for z in zs]
    """
    assert lines(code, "TL301") == [10]


def test_tl301_eval_inside_another_call_does_not_count() -> None:
    code = """
    import torch

    def ts_compile(fx_g, inps):
        f = torch.jit.script(fx_g)
        f = torch.jit.freeze(f.eval())
        f(*inps)
        return f

    def warm_up(model, x):
        scripted = torch.jit.script(model.eval())
        model(x)
        return scripted
    """
    assert lines(code, "TL301") == []


def test_tl301_eval_statements_and_chains_assigned_back_count() -> None:
    code = """
    import torch

    def run_a(model, x):
        model.eval()
        return model(x).sum().item()

    def run_b(model, x, device):
        model = model.eval().to(device)
        return model(x).sum().item()

    def run_c(model, x, device):
        model.cuda().eval()
        return model(x).sum().item()

    def run_d(self, x):
        self.model = self.model.train(False)
        return self.model(x).sum().item()
    """
    assert lines(code, "TL301") == [4, 8, 12, 16]


def test_tl301_eval_inside_a_call_in_a_training_function_is_not_an_eval_segment() -> None:
    code = """
    import torch

    def train(model, opt, x, y, x_val):
        model(x).sum().backward()
        opt.step()
        frozen = torch.jit.freeze(torch.jit.script(model.eval()))
        out = model(x_val)
        return out

    model = Net()
    exported = torch.jit.trace(model.eval(), example)
    print(model(example))
    """
    assert lines(code, "TL301") == []


def test_tl301_results_handed_to_code_out_of_sight_may_be_trained_on() -> None:
    code = """
    import torch

    def evaluate_batches(net, loader, metric):
        for x, y in loader:
            out = net(x.cuda())
            metric.update(out, y)
    """
    # a metric records values: nothing backpropagates
    assert lines(code, "TL301") == [4]
    # a method of the object itself, or a helper of another file, may run the backward pass
    assert lines(code.replace("metric.update(out, y)", "self.trainer.step(out, y)"), "TL301") == []
    assert lines(code.replace("metric.update(out, y)", "train_on(out, y)"), "TL301") == []


def test_tl301_frequency_through_callers_and_callbacks() -> None:
    code = """
    import torch

    class Agent:
        def __init__(self, actor):
            self.actor_local = actor
            self.optimizer = torch.optim.Adam(self.actor_local.parameters())

        def actor_pick_action(self, state):
            action = self.actor_local(state.cuda())
            return action.detach().cpu().numpy()

        def pick_action(self, state):
            return self.actor_pick_action(state)

        def step(self, env):
            while not self.done:
                self.state = env.step(self.pick_action(self.state))
    """
    # called every environment step, two calls up
    assert lines(code, "TL301") == [9]
    once = """
    import torch

    def predict(net, image):
        print(net(image.cuda()).argmax(1).item())

    if __name__ == "__main__":
        predict(net, image)
    """
    assert lines(once, "TL301") == []
    # handed to a framework as a callback: it may run any number of times
    callback = once.replace("    if __name__", "    register(predict)\n\n    if __name__")
    assert lines(callback, "TL301") == [4]


def test_tl301_module_level_inference_loop_without_eval() -> None:
    code = """
    import torch
    from torchvision.utils import save_image

    net = torch.load("sr.pt").cuda()
    for i, low in enumerate(images):
        high = net(low.cuda())
        save_image(high, f"out_{i}.png")
    """
    assert lines(code, "TL301") == [7]
    out = fixed(code, "TL301")
    assert "with torch.no_grad():\n    for i, low in enumerate(images):\n        high = net(low.cuda())" in out
    # a handful of pictures drawn from a literal range costs nothing worth a change
    assert lines(code.replace("enumerate(images)", "enumerate(images[:3])").replace(
        "for i, low in enumerate(images[:3]):", "for i in range(3):\n    low = images[i]"), "TL301") == []


def test_tl301_cpu_notebook_reports_a_test_loop_but_not_a_toy_forward() -> None:
    training = """
    import torch
    import torch.nn as nn

    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    for epoch in range(2):
        for inputs, labels in trainloader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(net(inputs), labels)
            loss.backward()
            optimizer.step()
        test_out = net(test_x)  # one forward on points held in memory
        print((test_out.argmax(1) == test_y).float().mean().item())
    """
    assert lines(training, "TL301") == []
    test_loop = training + """
    correct = 0
    for images, labels in testloader:
        outputs = net(images)
        correct += (outputs.argmax(1) == labels).sum().item()
    """
    assert lines(test_loop, "TL301") == [18]
