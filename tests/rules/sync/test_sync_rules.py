"""Host-device sync rules (TL201-TL207) and the per-step rules TL501, TL602: decision edges."""

from __future__ import annotations

import textwrap

from lint_testing import found

from torchlint.lint.api import lint_source

SYNC = ["TL201", "TL202", "TL203", "TL204", "TL205", "TL206", "TL207"]


def _lines(source: str, select: list[str] = SYNC) -> list[tuple[int, str]]:
    return found(source, select, path="<string>.py")


LOOP = """
import torch
import numpy as np
import torch.nn as nn
criterion = nn.CrossEntropyLoss()
def train(model, train_loader, optimizer, device):
    for i, (x, y) in enumerate(train_loader):
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
        {line}
"""


def _in_loop(line: str, select: list[str] = SYNC) -> list[str]:
    return [code for _, code in _lines(LOOP.replace("{line}", line), select)]


def test_item_on_loss_and_on_unknown_value_is_reported() -> None:
    assert _in_loop("v = loss.item()") == ["TL201"]
    assert _in_loop("v = {k: t.item() for k, t in logs.items()}") == ["TL201"]


def test_item_on_host_values_is_not() -> None:
    assert _in_loop("v = float(len(x)); w = np.float32(v).item()") == []
    assert _in_loop("v = loss.item(); w = v") == ["TL201"]
    assert _in_loop("i2 = i + 1; z = float(i2)") == []


def test_raw_batch_is_on_the_host() -> None:
    source = """
    def evaluate(model, loader):
        for images, labels in loader:
            n = labels.sum().item()
            k = int(labels.max())
            out = model(images.cuda())
    """
    assert _lines(source) == []


def test_rebinding_follows_statement_order() -> None:
    source = """
    def train(model, loader, optimizer):
        for x, y in loader:
            a = int(y.sum())
            y = y.cuda()
            b = int(y.sum())
            loss = model(x).mean()
            loss.backward()
            optimizer.step()
    """
    assert _lines(source) == [(6, "TL202")]


def test_cpu_in_training_and_evaluation_loops() -> None:
    assert _in_loop("p = out.argmax(1).cpu()") == ["TL201"]
    source = """
    import torch
    def evaluate(model, val_loader):
        with torch.no_grad():
            for x, y in val_loader:
                preds.append(model(x.cuda()).cpu())
    """
    result = lint_source(textwrap.dedent(source), select=SYNC)
    assert [(f.line, f.code) for f in result.findings] == [(6, "TL201")]
    assert "evaluation loop" in result.findings[0].message and "copy to the host once" in result.findings[0].message


def test_cpu_then_item_is_one_finding() -> None:
    assert _in_loop("v = loss.detach().cpu().item()") == ["TL201"]


def test_conversions_of_tensors_only() -> None:
    assert _in_loop("v = float(loss)") == ["TL202"]
    assert _in_loop("v = int(out.argmax())") == ["TL202"]
    assert _in_loop("v = float(args.lr)") == []
    assert _in_loop("v = int(x.shape[0])") == []


def test_rebound_builtin_is_not_a_conversion() -> None:
    source = LOOP.replace("{line}", "v = float(loss)").replace("def train(", "def train(float, ")
    assert _lines(source) == []


def test_formatting() -> None:
    assert _in_loop('print(f"{loss:.3f}")') == ["TL203"]
    assert _in_loop('print(f"{loss.item():.3f}")') == ["TL201"]
    assert _in_loop('print("%d" % i)') == []
    assert _in_loop("print(x.shape)") == []


def test_conditions() -> None:
    assert _in_loop("assert not torch.isnan(loss).any()") == ["TL204"]
    assert _in_loop("ok = 1 if loss > 2 else 0") == ["TL204"]
    assert _in_loop("if loss is None: pass") == []
    assert _in_loop("if i % 10 == 0 and torch.isnan(loss): pass") == []
    assert _in_loop("if torch.isnan(loss) and i % 10 == 0: pass") == ["TL204"]


def test_logging_interval_silences_every_rule() -> None:
    for line in ("v = loss.item()", "v = float(loss)", 'print(f"{loss}")', "torch.cuda.synchronize()"):
        assert _in_loop(f"if i % 100 == 0: {line}") == [], line


def test_synchronize_resolves_through_imports() -> None:
    assert _in_loop("torch.cuda.synchronize()") == ["TL205"]
    source = LOOP.replace("{line}", "synchronize()").replace("import torch\n", "import torch\nfrom torch.cuda import synchronize\n")
    assert _lines(source) == [(14, "TL205")]
    assert _in_loop("stream.synchronize()") == []


def test_data_dependent_shapes_are_off_by_default_but_selectable() -> None:
    assert _in_loop("sel = out[y > 0]") == ["TL206"]
    assert _in_loop("sel = out[y > 0]", select=["TL2"]) == []


def test_helper_one_call_deep() -> None:
    source = """
    def log_value(t):
        print(t.item())
    def square(t):
        return t * t
    def train(model, loader, optimizer):
        for x, y in loader:
            loss = model(x.cuda()).mean()
            loss.backward()
            optimizer.step()
            log_value(loss)
            square(loss)
    """
    assert _lines(source) == [(11, "TL207")]


def test_helper_defined_after_the_loop_and_shadowed_helper() -> None:
    source = """
    def train(model, loader, optimizer):
        for x, y in loader:
            loss = model(x.cuda()).mean()
            loss.backward()
            optimizer.step()
            log_value(loss)
    def log_value(t):
        print(t.item())
    """
    assert _lines(source) == [(7, "TL207")]
    shadowed = source.replace("def train(model,", "def train(log_value, model,")
    assert _lines(shadowed) == []


def test_move_of_a_constant_built_before_the_loop() -> None:
    source = """
    import torch
    import torch.nn as nn
    def train(model, loader, optimizer, device):
        w = torch.tensor([1.0, 2.0])
        on_gpu = torch.ones(2, device=device)
        head = nn.Linear(4, 2)
        for x, y in loader:
            a = w.to(device)
            b = on_gpu.to(device)
            head.cuda()
            loss = model(x).mean()
            loss.backward()
            optimizer.step()
    """
    assert _lines(source, ["TL602"]) == [(9, "TL602"), (11, "TL602")]


def test_cpu_only_script_is_silent() -> None:
    """Every `.to(device)` commented out: the model trains on the CPU, where reading a value costs nothing."""
    source = """
    import torch
    def train(model, train_loader, optimizer, criterion):
        # device = torch.device("cuda")
        for x, y in train_loader:
            x = x  # .to(device)
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            print(f"{loss:.3f}")
            if torch.isnan(loss):
                break
    """
    assert _lines(source) == []
    assert _lines(source.replace("x = x  # .to(device)", "x = x.to(device)")) == [(10, "TL201"), (11, "TL203"), (12, "TL204")]


def test_one_finding_per_statement_at_the_first_sync() -> None:
    source = LOOP.replace("{line}", 'print("%.3f %.3f" % (loss.item(), out.max().item()), out.sum().item())')
    findings = lint_source(textwrap.dedent(source), select=["TL201"]).findings
    assert [(f.line, f.column) for f in findings] == [(13, 30)]
    assert findings[0].message.startswith("`.item()` waits for the GPU")
    assert _in_loop("a = loss.item(); b = out.max().item()") == ["TL201"]  # one line, one statement
    two_lines = LOOP.replace("{line}", "a = loss.item()\n        b = out.max().item()")
    assert _lines(two_lines, ["TL201"]) == [(13, "TL201"), (14, "TL201")]


def test_nan_guard_is_not_reported() -> None:
    guard = "v = loss.item()\n        if not math.isfinite(v):\n            print(v)\n            sys.exit(1)"
    source = "import math, sys\n" + LOOP.replace("{line}", guard)
    assert _lines(source, ["TL201"]) == []
    source = "import math\n" + LOOP.replace("{line}", "assert math.isfinite(loss.item())")
    assert _lines(source, ["TL201"]) == []
    for body in ("raise ValueError(v)", "continue", "break", "return"):
        guarded = "import math\n" + LOOP.replace("{line}", f"v = loss.item()\n        if math.isnan(v) or math.isinf(v):\n            {body}")
        assert _lines(guarded, ["TL201"]) == [], body
    # a check that only logs does not make the sync deliberate
    logs = "import math\n" + LOOP.replace("{line}", "v = loss.item()\n        if not math.isfinite(v):\n            print(v)")
    assert _lines(logs, ["TL201"]) == [(14, "TL201")]
    # a check on another value does not cover this one
    other = "import math\n" + LOOP.replace("{line}", "v = loss.item()\n        if not math.isfinite(lr):\n            raise ValueError(lr)")
    assert _lines(other, ["TL201"]) == [(14, "TL201")]


def test_cpu_copy_of_a_loss_through_data() -> None:
    source = """
    def train(model, train_loader, optimizer, criterion1, device):
        total = 0
        for x, y in train_loader:
            out = model(x.to(device))
            loss = criterion1(out, y.to(device)) / 4
            total += loss.data.cpu().numpy()
            v = loss.cpu()
            p = self.data.cpu()
            loss_fn.cpu()
            loss.backward()
            optimizer.step()
    """
    assert _lines(source, ["TL201"]) == [(7, "TL201"), (8, "TL201")]


def test_listing_gpus_is_not_running_on_one() -> None:
    source = """
    import torch
    print([torch.cuda.device(i) for i in range(torch.cuda.device_count())], torch.cuda.is_available())
    def train(net, trainloader, optimizer, criterion):
        for inputs, labels in trainloader:
            loss = criterion(net(inputs), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
    """
    assert _lines(source) == []
    assert _lines(source.replace("net(inputs)", "net(inputs.cuda())")) == [(9, "TL201")]


MODEL_ONLY = """
import torch
import torch.nn as nn
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
net = Net()
net.to(device)
criterion = nn.CrossEntropyLoss()
for epoch in range(2):
    for i, data in enumerate(trainloader, 0):
        inputs, labels = data
        {line}
        loss = criterion(net(inputs), labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
"""


def test_model_on_the_device_but_batches_never_moved_runs_on_the_cpu() -> None:
    assert _lines(MODEL_ONLY.replace("{line}", "pass")) == []
    # any sign that data reaches the device: reported again
    assert _lines(MODEL_ONLY.replace("{line}", "inputs = inputs.to(device)")) == [(15, "TL201")]
    assert _lines(MODEL_ONLY.replace("{line}", "noise = torch.randn(4, device=device)")) == [(15, "TL201")]
    assert _lines(MODEL_ONLY.replace("{line}", "inputs, labels = to_device(data)")) == [(15, "TL201")]
    assert _lines(MODEL_ONLY.replace("{line}", "inputs = prepare(inputs, device)")) == [(15, "TL201")]
    assert _lines(MODEL_ONLY.replace("net.to(device)", "net = nn.DataParallel(net).cuda()").replace("{line}", "pass")) == [
        (15, "TL201")
    ]


def test_unmoved_batch_elements_stay_on_the_host() -> None:
    source = """
    import torch
    def evaluate(model, data_loader, device):
        with torch.no_grad():
            for images, targets in data_loader:
                images = [image.to(device) for image in images]
                outputs = model(images)
                for target, output in zip(targets, outputs):
                    a = target["image_id"].item()
                    b = output["scores"].max().item()
    """
    assert _lines(source) == [(10, "TL201")]
    moved = source.replace(
        "outputs = model(images)", "outputs = model(images)\n                targets = [t.to(device) for t in targets]"
    )
    assert _lines(moved) == [(10, "TL201"), (11, "TL201")]


def test_eval_cpu_reduced_at_once_and_collected_are_both_reported() -> None:
    source = """
    import torch
    def test(model, test_loader, device):
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                pred = model(data).argmax(dim=1)
                {line}
    """
    def run(line: str) -> list[tuple[int, str]]:
        return _lines(source.replace("{line}", line))

    assert run("correct += pred.eq(target).cpu().sum().item()") == [(8, "TL201")]
    assert run("correct += (pred == target).cpu().sum()") == [(8, "TL201")]
    assert run("preds.append(pred.cpu())") == [(8, "TL201")]  # gathered per batch: copy once after the loop
    assert run("preds.extend(pred.cpu().numpy())") == [(8, "TL201")]


def test_item_in_a_one_step_training_function() -> None:
    source = """
    import torch
    class Agent:
        def replay(self{params}):
            loss = self.loss_fn(self.model(self.states.to(self.device)), self.targets)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            print(loss.item())
            return loss.item()
    """
    assert _lines(source.replace("{params}", "")) == [(9, "TL201"), (10, "TL201")]  # its caller runs it per step
    assert _lines(source.replace("{params}", ", epoch")) == []  # once per epoch
    no_step = source.replace("self.optimizer.step()", "pass").replace("{params}", "")
    assert _lines(no_step) == []


def test_silent_in_a_test_suite() -> None:
    source = textwrap.dedent(LOOP.format(line="print(loss.item())"))
    assert _lines(source) == [(13, "TL201")]
    result = lint_source(source, "tests/test_training.py", select=SYNC)
    assert result.error is None and result.findings == []


def test_helper_read_behind_a_sentinel_is_not_reported_in_the_helper() -> None:
    source = """
    import torch

    class ContrastMemory(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.z = -1.0

        def scores(self, embed):
            out = torch.exp(embed @ embed.T)
            if self.z < 0:  # the normalisation constant is set on the first call only
                self.z = out.mean().item()
            total = out.sum().item()
            return out / self.z, total

        def forward(self, embed):
            return self.scores(embed.cuda())
    """
    # the unconditional read in the helper that forward() runs is reported, once, at the call forward()
    # makes (TL207); the first-call one is not reported in the helper
    assert _lines(source) == [(17, "TL207")]


def test_the_predicate_of_export_control_flow_is_not_a_host_read() -> None:
    # `torch.cond` takes its predicate as a symbolic value under torch.export; a plain `if` reads it every step
    assert _in_loop("k = torch.cond(out.isnan().all().item(), keep, update, (out,))") == []
    assert _in_loop("flag = out.isnan().all().item()") == ["TL201"]
