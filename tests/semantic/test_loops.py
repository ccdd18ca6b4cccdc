"""The shared hot-loop analysis: which loop runs a node once per step."""

from __future__ import annotations

import libcst as cst
from semantic_probe import ask

from torchlint.semantic import loops as hotloop
from torchlint.semantic.model import SemanticModel


def _where(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> str:
    loop = hotloop.hot_loop(model.context, call)
    if loop is None:
        return "cold"
    gated = hotloop.gated(model.context, call, loop)
    training = hotloop.is_training_loop(model.context, loop)
    return f"hot{' training' if training else ''}{' gated' if gated else ''}"


def _probe(source: str) -> list[str]:
    """What the hot-loop analysis says about every `probe()` call."""
    return ask(source, _where)


def test_loader_loop_is_hot_and_epoch_loop_is_not() -> None:
    source = """
for epoch in range(10):
    probe()
    for x, y in train_loader:
        probe()
        loss = model(x)
        loss.backward()
        optimizer.step()
    probe()
"""
    assert _probe(source) == ["cold", "hot training", "cold"]


def test_loader_through_wrappers_and_assignments() -> None:
    source = """
from torch.utils.data import DataLoader as DL
from tqdm import tqdm
dl = DL(ds)
pbar = tqdm(enumerate(dl), total=len(dl))
for i, batch in pbar:
    probe()
for a, b in zip(loaders["src"], loaders["tgt"]):
    probe()
for batch in self.train_dataloader():
    probe()
for item in items:
    probe()
for layer in model.layers:
    probe()
"""
    assert _probe(source) == ["hot", "hot", "hot", "cold", "cold"]


def test_backward_or_optimizer_step_makes_a_loop_hot() -> None:
    source = """
while True:
    x = next(it)
    scaler.scale(model(x)).backward()
    probe()
for i in range(steps):
    opt.step()
    probe()
for i in range(epochs):
    scheduler.step()
    probe()
"""
    assert _probe(source) == ["hot training", "hot training", "cold"]


def test_step_range_needs_a_batch_and_a_forward_pass() -> None:
    source = """
for it in range(max_iters):
    x, y = get_batch("train")
    logits = model(x)
    probe()
for _ in range(num_steps):
    y, state = net(x, state)
    probe()
"""
    assert _probe(source) == ["hot", "cold"]


def test_function_boundary_iterable_and_else_are_not_in_the_body() -> None:
    source = """
for x in probe(loader):
    def helper():
        probe()
    f = lambda: probe()
    probe()
else:
    probe()
"""
    # a call handed the loader yields its batches (`log_every(loader, 10)`): the body is hot; the iterable,
    # nested functions, lambdas and the `else:` clause are not in it
    assert _probe(source) == ["cold", "cold", "cold", "hot", "cold"]
    source = """
for x in loader:
    def helper():
        probe()
    probe()
else:
    probe()
"""
    assert _probe(source) == ["cold", "hot", "cold"]


def test_nested_small_loop_inside_hot_loop_returns_the_hot_one() -> None:
    source = """
for x, y in loader:
    for k, v in metrics.items():
        probe()
"""
    assert _probe(source) == ["hot"]


def test_gates() -> None:
    source = """
for step, (x, y) in enumerate(loader):
    if step % args.log_interval == 0:
        probe()
    if (step + 1) % 4 == 0:
        optimizer.step()
        probe()
    if step == len(loader) - 1:
        probe()
    if should_log:
        probe()
    if args.verbose:
        probe()
    else:
        probe()
    if step % 10:
        continue
    probe()
"""
    assert _probe(source) == [
        "hot training gated",
        "hot training",  # gradient accumulation's block does the step: not a logging gate
        "hot training gated",
        "hot training gated",
        "hot training",
        "hot training",
        "hot training gated",
    ]


def test_loop_that_shows_a_few_predictions_is_not_hot() -> None:
    source = """
import matplotlib.pyplot as plt
def visualize_model(model, num_images=6):
    images_so_far = 0
    for i, (inputs, labels) in enumerate(dataloaders["val"]):
        outputs = model(inputs)
        probe()
        for j in range(inputs.size()[0]):
            probe()
            images_so_far += 1
            if images_so_far == num_images:
                return
def first_batches(model, val_loader):
    for i, (x, y) in enumerate(val_loader):
        probe()
        if i >= 5:
            break
def plots_each(model, val_loader):
    for x, y in val_loader:
        probe()
        plt.imshow(x[0])
"""
    assert _probe(source) == ["cold", "cold", "cold", "cold"]


def test_bounded_loops_that_stay_hot() -> None:
    source = """
def evaluate(model, val_loader, args, num_images=1000):
    for i, (x, y) in enumerate(val_loader):
        probe()
        if i >= args.max_eval_batches:
            break
    for x, y in val_loader:
        probe()
        for j in range(4):
            if j == 2:
                break
    seen = 0
    for x, y in val_loader:
        probe()
        seen += 1
        if seen == num_images:
            return
def train(model, train_loader, optimizer):
    for i, (x, y) in enumerate(train_loader):
        probe()
        model(x).backward()
        optimizer.step()
        if i == 10:
            break
        plt.plot(losses)
"""
    assert _probe(source) == ["hot", "hot", "hot", "hot training"]


def test_loop_that_ends_in_an_unconditional_break_runs_once() -> None:
    source = """
for x, y in val_loader:
    probe()
    break
for x, y in val_loader:
    probe()
    if x is None:
        continue
    break
for x, y in val_loader:
    probe()
    if bad(x):
        break
"""
    assert _probe(source) == ["cold", "hot", "hot"]


def test_device_check_is_not_a_logging_interval() -> None:
    source = """
for x, y in train_loader:
    if device == "cuda":
        probe()
    if device.type == "cuda":
        probe()
    if str(x.device) == "cpu":
        probe()
    if device == "cuda" and step % 100 == 0:
        probe()
    if phase == 3:
        probe()
"""
    assert _probe(source) == ["hot", "hot", "hot", "hot gated", "hot gated"]


def test_one_step_training_function() -> None:
    source = """
def replay(self):
    loss = self.loss_fn(self.model(x), y)
    self.optimizer.zero_grad()
    loss.backward()
    self.optimizer.step()
    probe()
    for p in params:
        probe()

def train_epoch(model, loader, optimizer):
    for x, y in loader:
        model(x).sum().backward()
        optimizer.step()
    probe()

def evaluate(model, x):
    loss = model(x)
    probe()

def only_backward(loss):
    loss.backward()
    probe()
"""

    def step(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> str:
        return "step" if hotloop.step_function(model.context, call) is not None else "no"

    assert ask(source, step) == ["step", "no", "no", "no", "no"]


def test_a_loop_that_draws_a_fresh_batch_and_runs_a_model_is_hot() -> None:
    source = """
for start in range(0, len(images), bs):
    out = net(images[start : start + bs])
    probe()
while True:
    batch = [next(it) for _ in range(bs)]
    out = net(batch)
    probe()
for n in sizes:
    out = generator(torch.randn(n, 128))
    probe()
for t in range(steps):
    x = model(x, t) + torch.randn(shape)
    probe()
for t in range(steps):
    out = model(x[:, t])
    probe()
"""
    assert _probe(source) == ["hot", "hot", "hot", "cold", "cold"]


def test_a_loop_over_batches_or_calling_a_one_step_function_is_hot() -> None:
    source = """
def train(epoch):
    loss = model(features)
    loss.backward()
    optimizer.step()
for epoch in range(200):
    train(epoch)
    probe()
for users in utils.minibatch(all_users, batch_size=100):
    probe()
for dl in val_dataloaders:
    probe()
for phase in ["train", "val"]:
    for x in dataloaders[phase]:
        probe()
"""
    assert _probe(source) == ["hot", "hot", "cold", "hot"]


def test_the_first_trip_of_a_running_average_is_gated() -> None:
    source = """
for x in train_loader:
    loss = model(x)
    loss.backward()
    optimizer.step()
    if ema is None:
        ema = probe()
    else:
        ema = 0.9 * ema + probe()
    if ema is None:
        other = probe()
"""
    assert _probe(source) == ["hot training gated", "hot training", "hot training"]


def test_a_module_forward_runs_every_step_but_not_its_first_call_setup() -> None:
    source = """
import torch
class Net(torch.nn.Module):
    def forward(self, x):
        probe()
        if not self.initialized:
            probe()
            self.initialized = True
        def inner():
            probe()
        return x

    def extra_repr(self):
        probe()
"""
    def every(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> str:
        found = model.every_step(call)
        return "cold" if found is None else type(found).__name__

    assert ask(source, every) == ["FunctionDef", "cold", "cold", "cold"]


def test_element_reads_name_the_collection_they_walk() -> None:
    source = """
for i in range(len(boxes)):
    probe(boxes[i, 0])
for i, b in enumerate(boxes):
    probe(scores[i])
    probe(b)
kept = [probe(s) for s in scores]
probe(boxes[0])
for b in boxes:
    probe(b[0])
"""
    def collection(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> str:
        found = model.element_read(expr)
        return "-" if found is None else cst.Module([]).code_for_node(found)

    # `b` of `for i, b in enumerate(boxes)` is an element of `boxes`, as in `for b in boxes`
    assert ask(source, collection) == ["boxes", "scores", "boxes", "scores", "-", "-"]


def test_a_settings_comparison_is_not_a_logging_interval() -> None:
    source = """
for i, x in enumerate(train_loader):
    loss = model(x)
    loss.backward()
    optimizer.step()
    if args.augment and args.augment_p == 0:
        probe()
    if i == args.log_step:
        probe()
    if len(x) == 0:
        continue
    probe()
"""
    assert _probe(source) == ["hot training", "hot training gated", "hot training"]


def test_a_loop_feeding_host_batches_to_a_model_runs_on_the_host() -> None:
    source = """
import torch
def evaluate(model, loader: torch.utils.data.DataLoader, device):
    for X, y in loader:
        out = model(X)
        probe()
    for X, y in loader:
        out = model(X.to(device))
        probe()
    for X, y in data_iter:
        out = model(X)
        probe()
"""
    def on_host(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> str:
        loop = model.hot_loop(call)
        return "cold" if loop is None else ("host" if hotloop.runs_on_host(model.context, loop) else "device")

    assert ask(source, on_host) == ["host", "device", "device"]


def test_gates_that_are_not_logging_intervals_and_a_flag_that_is_never_true() -> None:
    source = """
verbose = False
for i, (x, y) in enumerate(train_loader):
    step = i // update_freq
    if step >= steps_per_epoch:
        continue
    loss = model(x)
    if loss == 0:
        continue
    probe()
    if verbose:
        probe()
    loss.backward()
    optimizer.step()
"""
    # `step` is a number, not a logging flag; `loss == 0` skips the rare trip; `verbose` is only ever False
    assert _probe(source) == ["hot training", "hot training gated"]


def test_few_trips_over_a_small_literal_count() -> None:
    def few(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> bool:
        loop = next(a for a in model.context.ancestors(call) if isinstance(a, cst.For))
        return hotloop.few_trips(model.context, loop)

    source = """
n = 10
for i in range(1, n + 1):
    probe()
for t in range(num_steps):
    probe()
for i in range(3):
    probe()
"""
    assert ask(source, few) == ["True", "False", "True"]
