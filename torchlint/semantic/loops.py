"""Is this loop hot? Which loop does a node run in once per training (or inference) step?

A cost paid once per step (a host-device sync, an allocator flush, a copy of the model) matters; the
same cost paid once per epoch does not. This module decides, per `for`/`while` loop, whether one trip
through its body is one step.

A loop is **hot** when any of these holds:

1. it iterates a data loader: the iterable, after unwrapping `enumerate`, `zip`, `tqdm`/`track`/
   progress-bar wrappers, `iter`, `islice` and `chain`, and following names through a single
   assignment, is `DataLoader(...)` (resolved through imports), a name bound to one, or a loader-like
   name (`LOADER_NAME`: `train_loader`, `dataloader`, `loader`, `val_dl`, `trainloader`, `train_iter`,
   `dataloaders[phase]`, `self.train_dataloader()`, `build_loader(...)`, ...);
2. its own body (not a nested loop's, not a nested function's) calls `.backward()`, or `.step()` on an
   optimizer or grad scaler (`optimizer.step()`, `opt.step()`, `scaler.step(optimizer)`,
   `self.optimizer.step()`; a scheduler's `.step()` does not count);
3. it iterates a `range(...)` (of steps) and its own body draws a batch (`next(it)`, `get_batch(...)`) and runs a
   forward pass (`model(x)`, `self.net(x)`), unless it contains a nested hot loop. A range loop
   over decoding positions or benchmark repetitions (`for _ in range(num_steps): y = net(x)`) is
   not hot by this criterion: it draws no batch;
4. it hands its own items to a model (`for x, y in data: out = net(x.to(device))`), outside a module's
   own methods;
5. its own body calls a one-step function of the file (`for epoch in range(n): train(epoch)` where
   `train` runs a backward pass and an optimizer step and no loop: full-batch training);
6. each trip draws new data and runs a model on it (any loop, `while True:` included): `next(it)`,
   `images[start:end]` sliced by the loop's own counter, `dataset.pull_item(i)`, or random latents for a
   generator (`torch.randn(n, 512)`), unless the model's input is its own earlier output (`x = model(x, t)`:
   decoding, diffusion sampling).

A call that yields batches (`minibatch(users, batch_size=n)`, `iterate_minibatches(...)`) counts as a
loader, and so does any call handed a loader as its first argument (`metric_logger.log_every(loader, 10)`,
`prefetcher(loader)`), other than `len` and `range`; a name in the plural iterated directly (`for dl in val_dataloaders`) holds several loaders.

A loop that would be hot by these criteria is still **not** hot when it shows a few predictions rather
than running steps: it does no backward pass or optimizer step, and either plots (a `matplotlib` call,
`plt.*`, `imshow(...)`) or stops after a handful of trips (`if images_so_far == num_images: return`,
`if i >= 5: break`, where the bound is an integer of at most 64, a parameter defaulting to one, or a name
such as `num_images`). Its syncs, copies and allocations are paid a few times, not once per step.

An epoch loop that wraps a hot batch loop is therefore *not* hot: the code in its body outside the
inner loop runs once per epoch. A loop nested inside a hot loop (over the parameters, the keys of a
metrics dict, micro-batches) is not hot itself, but the hot loop around it still encloses it, so
`hot_loop()` returns the outer one.

Functions (all results are cached per file and loop; rules reach them through `SemanticModel`):

- `hot_loop(context, node)`: the innermost hot loop whose *body* runs `node` on every trip, without
  crossing a function, lambda or class boundary (a loop's iterable and `else:` clause run once and
  are not in it); None when there is none.
- `is_hot(context, loop)`: whether `loop` (a `cst.For` or `cst.While`) is hot.
- `is_training_loop(context, loop)`: a hot loop whose body (nested blocks included) calls
  `.backward()` or an optimizer/scaler step.
- `is_loader_expr(context, expr)`: whether iterating `expr` iterates a data loader (criterion 1).
- `gated(context, node, loop)`: whether `node` runs only on some trips of `loop`: inside an
  `if` whose test is a logging interval (`step % N == 0`, `(i + 1) % args.log_interval == 0`,
  `i == len(loader) - 1`, `if should_log:` where `should_log = step % N == 0`; not an emptiness check
  such as `len(x) == 0`), on the first trips only (`if ema is None: ema = ...`, `if not self.initialized:`
  that sets it, `if i <= 4:` or `if i in sample_ids:` on the loop's counter), never (`if verbose:` where
  `verbose = False` is its only binding), or after an `if step % N: continue` in the same body (an equality
  such as `if loss == 0: continue` skips the rare trip, not most). Names inside arithmetic
  (`step = i // update_freq`) are numbers, not logging flags.
- `every_step(context, node)`: the step loop that runs `node` (`per_step`), else the `forward()` of a
  module class that holds it: a model's forward runs on every step wherever it is called from. A loop that
  `runs_on_host` (it hands a DataLoader's batches to a model unmoved, nothing scatters them) is not one.
- `element_read(context, expr)`: the collection whose elements `expr` reads one per trip of a loop or
  comprehension (`boxes` for `boxes[i]` under `for i in range(len(boxes))`).
- `is_interval_test(context, test)`: whether an `if` test is true on only some steps (the test
  `gated` uses).
- `is_forward_call(context, call)`: `call` runs a model's forward pass (a module-like callee).
- `hot_calls_in(context, loop)`: the calls made directly by the loop body (a cheap index rules can
  reuse).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterator, Optional, Union

import libcst as cst

from torchlint.lint.context import UNKNOWN, Context
from torchlint.lint.names import dotted, flatten_targets, last_name
from torchlint.lint.walk import is_a, semantic_children
from torchlint.semantic.devices import is_device_name, is_device_string
from torchlint.semantic.functions import called_function, calls_named
from torchlint.semantic.memo import CycleSafeMemo, question_stack
from torchlint.semantic.objects import (
    DATASET,
    LOADER,
    MODEL_NAME,
    MODULE,
    OPTIMIZER,
    SCALER,
    SCHEDULER,
    named,
    objects,
)
from torchlint.semantic.trip_counts import literal_trips


def per_step(context: "Context", node: cst.CSTNode) -> Optional[Loop]:
    """The hot loop that runs `node` on every trip (not under a logging interval), or None."""
    loop = hot_loop(context, node)
    if loop is None or gated(context, node, loop):
        return None
    return loop


Loop = Union[cst.For, cst.While]


def every_step(context: "Context", node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """What runs `node` once per step: the step loop (`per_step`), else the `forward()` of a module class
    that holds it (a model runs its forward on every training or inference step, wherever it is called
    from), unless only the first call runs it (`if not self.initialized: ...`)."""
    loop = per_step(context, node)
    if loop is not None:
        return None if runs_on_host(context, loop) else loop
    forward = _module_forward(context, node) or framework_hook(context, node)
    if forward is None or gated(context, node, forward):  # type: ignore[arg-type]
        return None
    return forward


# Methods a training framework calls once per batch: Lightning's steps and batch hooks, fastai's callback events
# (`framework_hook` counts those given the batch).
PER_BATCH_HOOKS = re.compile(
    r"^(?:(?:training|validation|test|predict)_step"
    r"|(?:before|after)_(?:batch|pred|loss|backward|step)|on_(?:train|validation|test|predict)_batch_(?:start|end))$"
)


def framework_hook(context: "Context", node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The per-batch hook that runs `node` on each call: a method of a class with a base (`training_step` of a
    `LightningModule`, `on_train_batch_end` of a callback) given the batch, whose body runs no step loop of its
    own (a `validation_step(self)` that walks a whole loader is judged in that loop)."""
    function = context.enclosing_function(node)
    if function is None:
        return None
    if _engine_handler(context, function):
        return function
    if not PER_BATCH_HOOKS.match(function.name.value):
        return None
    cls = context.parent(context.parent(function) or function)
    if not isinstance(cls, cst.ClassDef) or all(last_name(b.value) == "object" for b in cls.bases):
        return None
    params = [p for p in function.params.params if p.name.value != "self"]
    if not params and not isinstance(function.params.star_arg, cst.Param):
        return None  # fastai's `after_batch(self)` reads the learner's state, not a batch it is given
    if any(is_a(n, _LOOPS) and is_hot(context, n) for n in _own_nodes(function.body, into_loops=True)):
        return None
    return function


# Events of an ignite engine that fire on every iteration (`Events.ITERATION_COMPLETED`, not called with `every=`).
_ITERATION_EVENTS = frozenset({"ITERATION_STARTED", "ITERATION_COMPLETED", "GET_BATCH_STARTED", "GET_BATCH_COMPLETED"})


def _engine_handler(context: "Context", function: cst.FunctionDef) -> bool:
    """An engine runs `function` on every iteration: its process function (`Engine(update)`), or a handler of
    an iteration event (`@trainer.on(Events.ITERATION_COMPLETED)`, `add_event_handler(Events.ITERATION_COMPLETED,
    log)`)."""
    if not context.shared(_MentionsEngines).value:
        return False
    for decorator in function.decorators:
        call = decorator.decorator
        if isinstance(call, cst.Call) and last_name(call.func) == "on" and call.args and _every_iteration(call.args[0].value):
            return True
    for call in calls_named(context, "add_event_handler"):
        args = call.args
        if len(args) > 1 and _every_iteration(args[0].value) and _names(context, args[1].value, function):
            return True
    return any(call.args and _names(context, call.args[0].value, function) for call in calls_named(context, "Engine"))


class _MentionsEngines:
    """Whether the file's text mentions ignite's engines or events at all (asked for every call: read once)."""

    def __init__(self, context: "Context") -> None:
        text = context.source.text
        self.value = "Events." in text or "Engine(" in text


def _names(context: "Context", expr: cst.BaseExpression, function: cst.FunctionDef) -> bool:
    """`expr` is a name bound only to `function`."""
    if not isinstance(expr, cst.Name) or expr.value != function.name.value:
        return False
    bindings = context.lookup(expr)
    return bool(bindings) and len(bindings) == 1 and bindings[0].node is function


def _every_iteration(event: cst.BaseExpression) -> bool:
    """`Events.ITERATION_COMPLETED` itself; called (`(every=100)`, `(once=1)`) it fires on some iterations only."""
    return isinstance(event, cst.Attribute) and event.attr.value in _ITERATION_EVENTS


# A wrapper that scatters host batches to the devices itself, or a launcher that moves them.
_SCATTERS = re.compile(r"DataParallel|[Aa]ccelerat|Fabric|\.prepare\(")


def runs_on_host(context: "Context", loop: Loop) -> bool:
    """The loop hands the batches of a DataLoader (known by its binding) to a model as they come: nothing in
    it moves them (`.to(...)`, `.cuda()`, `device=`) and no `DataParallel` scatters them. The model then runs
    on the CPU (on a GPU the first forward would fail), so its reads cost nothing: `for X, y in loader:
    acc += accuracy_fn(y, model(X).argmax(1))` in a notebook's first, CPU-only model."""
    return _cache(context).on_host.ask(loop, lambda l: _runs_on_host(context, l))


def _runs_on_host(context: "Context", loop: Loop) -> bool:
    if not isinstance(loop, cst.For) or _SCATTERS.search(context.source.text):
        return False
    source = loop.iter
    while isinstance(source, cst.Call) and _WRAPPERS.get((last_name(source.func) or "").lower()) and source.args:
        source = source.args[0].value
    if objects(context).kind(source) != LOADER:
        return False
    from torchlint.semantic.model import semantic_model  # the model builds on this module
    from torchlint.semantic.values import CPU

    forwards = []
    for node in _own_nodes(loop.body, into_loops=True):
        if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value == "device":
            return False
        if isinstance(node, cst.Call):
            if last_name(node.func) in ("to", "cuda"):
                return False
            if is_forward_call(context, node):
                forwards.append(node)
    kinds = semantic_model(context).values
    return bool(forwards) and all(kinds.kind(a.value) == CPU for call in forwards for a in call.args if a.keyword is None)


@lru_cache(maxsize=16)
def _defines_forward(text: str) -> bool:
    return "def forward" in text  # asked for many nodes of a file: scanned once


def _module_forward(context: "Context", node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    if not _defines_forward(context.source.text):
        return None
    for ancestor in context.ancestors(node):
        kind = type(ancestor)  # exact types: see `walk.is_a`
        if kind is cst.Lambda or kind is cst.ClassDef:
            return None
        if kind is cst.FunctionDef:
            cls = context.enclosing(ancestor, cst.ClassDef, cst.FunctionDef)
            if not isinstance(cls, cst.ClassDef):
                return None
            if ancestor.name.value == "backward" and _is_autograd_function(context, cls):
                return ancestor  # a custom op's backward runs on every training step, like its forward
            if ancestor.name.value == "forward" and objects(context).is_module_class(cls):
                return ancestor
            return None
    return None


def _is_autograd_function(context: "Context", cls: cst.ClassDef) -> bool:
    return any(
        isinstance(base.value, (cst.Name, cst.Attribute)) and context.qualname(base.value) == "torch.autograd.Function"
        for base in cls.bases
    )


# Callables whose first argument (or, for zip/chain, any argument) is what the loop iterates.
_WRAPPERS = {
    "enumerate": "first",
    "iter": "first",
    "tqdm": "first",
    "trange": None,  # tqdm's trange(n) is a range
    "track": "first",  # rich.progress.track
    "progress_bar": "first",
    "progressbar": "first",
    "islice": "first",
    "zip": "any",
    "chain": "any",
    "cycle": "first",
}

_BOUNDARIES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)

# Generators of batches (`for xb in minibatch(x, batch_size=64)`, `iterate_minibatches(...)`, `get_batches(...)`).
_BATCH_GENERATOR = re.compile(
    r"^(?:iterate_|iter_|gen_|generate_|get_|yield_)?(?:mini_?)?batch(?:es|_iter|_iterator|_generator|_gen)$|^(?:mini_?)?batch$"
)

_LOOPS = (cst.For, cst.While)
# The same kinds, for tests of a node's exact type (see `walk.is_a`).
_BOUNDARY_TYPES = frozenset(_BOUNDARIES)
_LOOP_TYPES = frozenset(_LOOPS)

# Calls of a loader that do not yield its batches (`range(len(loader))` counts them).
_NOT_BATCHES = frozenset({"len", "range", "trange", "print", "str", "repr", "type", "isinstance", "hasattr", "getattr", "id"})



class _Cache:
    def __init__(self, context: "Context") -> None:
        # Answers that rest on other questions of the model are kept in memos on its one question stack.
        stack = question_stack(context)
        self.hot: CycleSafeMemo[cst.CSTNode, bool] = CycleSafeMemo(False, stack)
        self.calls: dict[cst.CSTNode, list[cst.Call]] = {}  # syntax only
        self.training: CycleSafeMemo[cst.CSTNode, bool] = CycleSafeMemo(False, stack)
        self.step_functions: CycleSafeMemo[cst.CSTNode, bool] = CycleSafeMemo(False, stack)
        self.skips: CycleSafeMemo[cst.CSTNode, tuple[Optional[int], dict[cst.CSTNode, int]]] = CycleSafeMemo(
            (None, {}), stack
        )
        self.on_host: CycleSafeMemo[cst.CSTNode, bool] = CycleSafeMemo(False, stack)


def _cache(context: "Context") -> _Cache:
    return context.shared(_Cache)


def _own_nodes(root: cst.CSTNode, *, into_loops: bool = False) -> Iterator[cst.CSTNode]:
    """Nodes below `root` that run in its own frame: not in nested functions/classes/lambdas and,
    unless `into_loops`, not in nested loops' bodies (a nested loop's iterable is still included)."""
    stack = list(semantic_children(root))
    stack.reverse()
    while stack:
        node = stack.pop()
        yield node
        if is_a(node, _BOUNDARIES):
            continue
        if not into_loops and is_a(node, _LOOPS):
            if isinstance(node, cst.For):
                stack.append(node.iter)
            continue
        children = list(semantic_children(node))
        children.reverse()
        stack.extend(children)


def hot_calls_in(context: "Context", loop: Loop) -> list[cst.Call]:
    """The calls made by `loop`'s body itself (nested loops' bodies and functions excluded)."""
    cache = _cache(context)
    found = cache.calls.get(loop)
    if found is None:
        body = loop.body
        nodes = _own_nodes(body)
        found = cache.calls[loop] = [n for n in nodes if isinstance(n, cst.Call)]
        if isinstance(loop, cst.While):
            found.extend(n for n in _own_nodes(loop.test) if isinstance(n, cst.Call))
            if isinstance(loop.test, cst.Call):
                found.append(loop.test)
    return found


def step_kind(context: "Context", call: cst.Call) -> Optional[str]:
    """"backward" for a backward pass, "optimizer" for an optimizer's or a grad scaler's step, "scheduler" for
    a learning-rate scheduler's step, None for anything else. The one answer every rule gets: a training step
    is a backward pass or an optimizer step; a scheduler's step is not one."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    attr = func.attr.value
    if attr in ("backward", "manual_backward"):
        return "backward"
    if attr != "step":
        return None
    receiver = func.value
    kind = objects(context).kind(receiver)
    if kind is not None:
        return {OPTIMIZER: "optimizer", SCALER: "optimizer", SCHEDULER: "scheduler"}.get(kind)
    name = last_name(receiver)
    if name is None:
        return None
    lower = name.lower()
    qual = context.qualname(receiver)
    if named(lower, SCHEDULER) or (qual is not None and qual.startswith("torch.optim.lr_scheduler")):
        return "scheduler"
    return "optimizer" if named(lower, OPTIMIZER) else None


def _is_backward_or_step(context: "Context", call: cst.Call) -> bool:
    return step_kind(context, call) in ("backward", "optimizer")


def is_loader_expr(context: "Context", expr: cst.BaseExpression, _depth: int = 0, _indexed: bool = False) -> bool:
    """Whether a `for` over `expr` iterates a data loader (see the module docstring). A name in the plural
    (`for dl in val_dataloaders`) holds several loaders: iterating it runs once per loader, not per batch;
    indexing it (`dataloaders[phase]`) gives one."""
    if _depth > 6:
        return False
    if isinstance(expr, cst.Call):
        qual = context.qualname(expr)
        if qual == "torch.utils.data.DataLoader":
            return True
        name = last_name(expr.func)
        if name is None:
            return False
        lower = name.lower()
        how = _WRAPPERS.get(lower)
        if how is not None:
            args = [a.value for a in expr.args if a.keyword is None and a.star == ""]
            if how == "first":
                args = args[:1]
            return any(is_loader_expr(context, a, _depth + 1) for a in args)
        # self.train_dataloader(), build_loader(cfg), get_dataloader(...), utils.minibatch(users, batch_size=n)
        if _BATCH_GENERATOR.match(lower):
            return True
        if lower.endswith(("dataloader", "loader")) and not lower.startswith(("load", "save")):
            return True
        # metric_logger.log_every(data_loader, 10), prefetch(loader): a generator handed a loader yields its batches
        first = next((a.value for a in expr.args if a.keyword is None and a.star == ""), None)
        return first is not None and lower not in _NOT_BATCHES and is_loader_expr(context, first, _depth + 1)
    if isinstance(expr, cst.Subscript):
        # dataloaders[phase], loaders["train"]
        return is_loader_expr(context, expr.value, _depth + 1, _indexed=True)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        if objects(context).kind(expr) == LOADER:
            return True
        name = last_name(expr)
        if name is not None and named(name, LOADER):
            return _indexed or not name.lower().endswith("s")
        if isinstance(expr, cst.Name):
            value = context.assigned_value(expr)
            if value is not None:
                return is_loader_expr(context, value, _depth + 1)
            # `dloader = tqdm(self.dl)`, then `dloader = self.dl` off the main rank: a loader either way
            bindings = context.lookup(expr) or []
            if len(bindings) > 1 and all(b.kind == "assign" and b.value is not None for b in bindings):
                return all(is_loader_expr(context, b.value, _depth + 1) for b in bindings)  # type: ignore[arg-type]
            return _given_loaders(context, expr)
    return False


def _given_loaders(context: "Context", name: cst.Name) -> bool:
    """A parameter that every call of this file passes a DataLoader (`evaluate(model, val_loader)` calling
    `def evaluate(f, dload)`): iterating it iterates the loader, whatever the parameter is called."""
    bindings = context.lookup(name)
    if not bindings or len(bindings) != 1 or bindings[0].kind != "param":
        return False
    from torchlint.semantic.model import semantic_model  # the model builds on this module

    return bool(semantic_model(context).loaders.loaders_of(name))


def _range_of_steps(context: "Context", loop: cst.For) -> bool:
    it = loop.iter
    if isinstance(it, cst.Name):  # iterator = trange(0, n, batch_size)
        it = context.assigned_value(it) or it
    if not isinstance(it, cst.Call):
        return False
    name = last_name(it.func)
    if name not in ("range", "trange", "tqdm"):
        return False
    if name == "tqdm":
        args = [a.value for a in it.args if a.keyword is None]
        if not args or not isinstance(args[0], cst.Call) or last_name(args[0].func) != "range":
            return False
        it = args[0]
    return True


def _fetches_batch(calls: list[cst.Call]) -> bool:
    """`next(it)`, `get_batch("train")`, `sample_batch(...)`: the body draws a new batch each trip."""
    for call in calls:
        name = last_name(call.func)
        if name is not None and (name == "next" or "batch" in name.lower()):
            return True
    return False


def is_forward_call(context: "Context", call: cst.Call) -> bool:
    """`call` runs a model's forward pass: a module by its binding (`net = Net()`, `self.encoder` built in
    `__init__`, a parameter annotated `nn.Module`), or, when nothing binds it, by its name (`model(x)`,
    `self.net(x)`)."""
    func = call.func
    name = last_name(func)
    if name is None:
        return False
    kind = objects(context).kind(func)
    if kind is not None:
        return kind == MODULE
    if isinstance(func, cst.Name) and called_function(context, call) is not None:
        return False  # `evaluate_model(...)`: a function of this file, not a module
    if isinstance(func, cst.Attribute) and not (
        isinstance(func.value, cst.Name) and func.value.value in ("self", "args", "cfg")
    ):
        # `x.model(...)` where x is not self: still a model if the attribute reads like one
        if not MODEL_NAME.match(name):
            return False
    return bool(MODEL_NAME.match(name)) and context.qualname(func) is None


def is_hot(context: "Context", loop: Loop) -> bool:
    """Whether one trip through `loop`'s body is one training or inference step."""
    return _cache(context).hot.ask(loop, lambda l: _decide(context, l))  # nested loops ask again


def _runs_once(loop: Loop) -> bool:
    """The body ends in an unconditional `break` or `return` and never `continue`s: one trip at most
    (`for images, _ in val_loader: ...; break`, a quick check on one batch)."""
    body = loop.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return False
    last = body.body[-1]
    if not isinstance(last, cst.SimpleStatementLine) or not isinstance(last.body[-1], (cst.Break, cst.Return)):
        return False
    return not any(isinstance(n, cst.Continue) for n in _own_nodes(body))


def _decide(context: "Context", loop: Loop) -> bool:
    if _runs_once(loop):
        return False
    if isinstance(loop, cst.For) and is_loader_expr(context, loop.iter):
        return not _shows_a_few(context, loop)
    calls = hot_calls_in(context, loop)
    if any(_is_backward_or_step(context, c) for c in calls):
        return True
    if (
        isinstance(loop, cst.For)
        and _range_of_steps(context, loop)
        and _fetches_batch(calls)
        and any(is_forward_call(context, c) for c in calls)
    ):
        nested = [n for n in _own_nodes(loop.body) if isinstance(n, _LOOPS)]
        return not any(_contains_hot(context, n) for n in nested) and not _shows_a_few(context, loop)
    if isinstance(loop, cst.For) and _feeds_forward(context, loop, calls):
        nested = [n for n in _own_nodes(loop.body) if isinstance(n, _LOOPS)]
        return not any(_contains_hot(context, n) for n in nested) and not _shows_a_few(context, loop)
    if any(_runs_step_function(context, c) for c in calls):
        return True
    if _forward_on_fresh_batch(context, loop, calls):
        nested = [n for n in _own_nodes(loop.body) if isinstance(n, _LOOPS)]
        return not any(_contains_hot(context, n) for n in nested) and not _shows_a_few(context, loop)
    return False


def _runs_step_function(context: "Context", call: cst.Call) -> bool:
    """`train(epoch)` where `train` is a one-step function of this file (full-batch training) or of another
    project file (`train_step(model, opt, x, y)`): each trip of the loop that calls it is one step."""
    function = called_function(context, call)
    if function is None and isinstance(call.func, cst.Name):  # `train_step(model, opt, x, y)` of another file
        from torchlint.semantic import project

        found = project.imported(context, call.func, (".backward(",))
        summary = found[0].function_summary(found[1]) if found is not None else None
        return summary is not None and summary.one_step
    return function is not None and context.enclosing_function(call) is not function and is_step_function(context, function)


# torch functions that draw a fresh random batch (`z = torch.randn(n, 512, device=device)`).
_RANDOM_BATCH = frozenset({"torch.randn", "torch.rand", "torch.randint", "torch.normal"})


def _forward_on_fresh_batch(context: "Context", loop: Loop, calls: list[cst.Call]) -> bool:
    """Each trip draws new data and runs a model on it: `batch.append(next(it))`, `images[start:end]` sliced
    by the loop's own variable, or random latents for a generator, then `model(x)`. A loop that feeds the
    model its own previous output (decoding, diffusion sampling: `x = model(x, t)`) is not one."""
    forwards = [c for c in calls if is_forward_call(context, c)]
    if not forwards:
        return False
    body = [n for n in _own_nodes(loop.body, into_loops=True)]
    counter = _loop_items(loop) if isinstance(loop, cst.For) else set()
    fresh = _fetches_batch([n for n in body if isinstance(n, cst.Call)]) or any(
        (isinstance(n, cst.Call) and context.qualname(n) in _RANDOM_BATCH)
        or _slice_by(n, counter)
        or _reads_item(n, counter)
        or _indexes_dataset(context, n, counter)
        for n in body
    )
    if not fresh:
        return False
    carried = set()
    for node in body:
        if isinstance(node, (cst.Assign, cst.AugAssign)) and any(
            isinstance(n, cst.Call) and is_forward_call(context, n) for n in _own_nodes(node.value)
        ):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            carried.update(dotted(t) for target in targets for t in flatten_targets(target) if isinstance(t, cst.Name))
    return not any(
        isinstance(n, cst.Name) and n.value in carried for call in forwards for arg in call.args for n in [arg.value, *_own_nodes(arg.value)]
    )


# Methods that read one item of a dataset by its number (`testset.pull_image(i)`, `ds.load_item(i)`).
_ITEM_READER = re.compile(r"^(?:pull|load|read|get)_?(?:item|image|img|sample|example|anno)s?$|^__getitem__$")


def _reads_item(node: cst.CSTNode, counter: set[str]) -> bool:
    """`dataset.pull_item(i)`, `dataset.__getitem__(i)`: the trip reads the dataset's item of its own number."""
    if not counter or not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    if not _ITEM_READER.match(node.func.attr.value):
        return False
    return any(isinstance(a.value, cst.Name) and a.value.value in counter for a in node.args)


# Names of a dataset (`dataset`, `val_dataset`, `test_ds`, `testset`).
DATASET_NAME = re.compile(r"(?:^|_)(?:dataset|ds|data_set)$|^(?:train|val|valid|test|eval)_?set$", re.IGNORECASE)


def _indexes_dataset(context: "Context", node: cst.CSTNode, counter: set[str]) -> bool:
    """`data = dataset[index]`: the trip reads the dataset's item of its own number."""
    if not counter or not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return False
    index = node.slice[0].slice
    if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Name) and index.value.value in counter):
        return False
    name = last_name(node.value)
    if name is None:
        return False
    return objects(context).kind(node.value) == DATASET or bool(DATASET_NAME.search(name))


def _slice_by(node: cst.CSTNode, counter: set[str]) -> bool:
    """`images[start:end]`, `x[i * bs:(i + 1) * bs]`: a slice whose lower bound reads the loop's variable."""
    if not counter or not isinstance(node, cst.Slice) or node.lower is None:
        return False
    lower = node.lower
    return any(isinstance(n, cst.Name) and n.value in counter for n in [lower, *_own_nodes(lower)])


# Methods that hand on the same data (`x.to(device)`, `batch["image"].float()`).
_DATA_METHODS = frozenset({"to", "cuda", "float", "half", "double", "long", "unsqueeze", "permute", "contiguous", "view", "reshape"})


def _feeds_forward(context: "Context", loop: cst.For, calls: list[cst.Call]) -> bool:
    """Each trip hands the loop's own items to a model (`for x, y in data: out = net(x.to(device))`): one
    evaluation or inference step, whatever the iterable is called. Not a loop over steps of a range (see
    criterion 3), and not a loop inside a module's own methods (over layers, levels or heads)."""
    it = loop.iter
    if isinstance(it, cst.Call) and last_name(it.func) in ("range", "trange"):
        return False
    cls = context.enclosing(loop, cst.ClassDef)
    if cls is not None and objects(context).is_module_class(cls):  # type: ignore[arg-type]
        return False
    items = _batch_names(loop)
    if not items:
        return False
    for call in calls:
        if not is_forward_call(context, call):
            continue
        for arg in call.args:
            if _data_root(arg.value) in items:
                return True
    return False


def _loop_items(loop: cst.For) -> set[str]:
    """The names a `for` binds to the iterable's items (the index of `enumerate` excluded)."""
    target = loop.target
    it = loop.iter
    if (
        isinstance(it, cst.Call)
        and last_name(it.func) == "enumerate"
        and isinstance(target, (cst.Tuple, cst.List))
        and len(target.elements) == 2
    ):
        target = target.elements[1].value
    return {dotted(t) for t in flatten_targets(target) if isinstance(t, cst.Name)}  # type: ignore[misc]


def _batch_names(loop: cst.For) -> set[str]:
    """The loop's items and the names its body binds from them (`x, y = batch`, `x = batch.text.cuda()`,
    `inputs = data[0].to(device)`, either branch of `if cuda:`): what the trip hands a model is its batch."""
    names = _loop_items(loop)
    assigns = [n for n in _own_nodes(loop.body) if type(n) is cst.Assign]  # exact type: see `walk.is_a`
    grown = bool(names)
    while grown:
        grown = False
        for assign in assigns:
            if _data_root(assign.value) not in names:
                continue
            for target in assign.targets:
                for t in flatten_targets(target.target):
                    if isinstance(t, cst.Name) and t.value not in names:
                        names.add(t.value)
                        grown = True
    return names


def _data_root(expr: cst.BaseExpression) -> Optional[str]:
    """`x` for `x`, `x.to(device)`, `x["image"]`, `x[0].cuda()`, `batch.text`."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _DATA_METHODS:
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            expr = expr.value
        else:
            break
    return expr.value if isinstance(expr, cst.Name) else None


_SMALL_BOUND = 64

# Names of bounds that count pictures to show (`num_images=6`).
_DISPLAY_BOUND = re.compile(
    r"^(?:num|n|nb|max|n_max)_?(?:images|imgs|pics|figures|figs|plots|rows|cols|show|shown|to_show|vis|display)$",
    re.IGNORECASE,
)


def _shows_a_few(context: "Context", loop: Loop) -> bool:
    """A loader loop that displays a few predictions (`visualize_model`): no backward pass or optimizer
    step, and it plots or stops after a small number of trips."""
    calls = [n for n in _own_nodes(loop.body, into_loops=True) if type(n) is cst.Call]  # exact types: see `walk.is_a`
    if any(_is_backward_or_step(context, c) for c in calls):
        return False
    if any(_plots(context, c) for c in _unconditional_calls(loop)):
        return True
    # (node, inside a nested loop, under an `if` that tests a small count); parents of nodes not yet
    # visited are unknown to the context, so the walk keeps its own.
    function = context.enclosing_function(loop)
    stack: list[tuple[cst.CSTNode, bool, bool]] = [(loop.body, False, False)]
    while stack:
        node, nested, counted = stack.pop()
        kind = type(node)  # exact types: see `walk.is_a`
        if kind is cst.Return or (kind is cst.Break and not nested):
            if counted:
                return True
            continue
        if kind in _BOUNDARY_TYPES:
            continue
        if kind is cst.If:
            stack.append((node.body, nested, counted or _reaches_small_count(context, node.test, function)))  # type: ignore[attr-defined]
            if node.orelse is not None:  # type: ignore[attr-defined]
                stack.append((node.orelse, nested, counted))  # type: ignore[attr-defined]
            continue
        inner = nested or kind in _LOOP_TYPES
        for child in semantic_children(node):
            stack.append((child, inner, counted))
    return False


def _unconditional_calls(loop: Loop) -> Iterator[cst.Call]:
    """The calls of `loop`'s body (nested loops included) that no `if` inside it guards: a plot under
    `if opts.save_results:` is an option of a loop that otherwise runs over the whole set. (Parents of nodes
    not yet visited are unknown to the context, so the walk keeps its own.)"""
    stack: list[cst.CSTNode] = [loop.body]
    while stack:
        node = stack.pop()
        kind = type(node)  # exact types: see `walk.is_a`
        if kind is cst.If or kind in _BOUNDARY_TYPES:
            continue
        if kind is cst.Call:
            yield node  # type: ignore[misc]
        stack.extend(semantic_children(node))


def _plots(context: "Context", call: cst.Call) -> bool:
    """`plt.subplot(...)`, `matplotlib.pyplot.imshow(...)`, `imshow(img)`, `ax.imshow(img)`."""
    func = call.func
    name = last_name(func)
    if name == "imshow":
        return True
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "plt":
        return True
    qual = context.qualname(func)
    return qual is not None and qual.startswith("matplotlib.")


def _reaches_small_count(context: "Context", test: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> bool:
    """`images_so_far == num_images`, `i >= 5`, `10 <= count`: a counter reaching a small bound."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    operator = target.operator
    if isinstance(operator, (cst.Equal, cst.GreaterThanEqual, cst.GreaterThan)):
        counter, bound = test.left, target.comparator
    elif isinstance(operator, (cst.LessThanEqual, cst.LessThan)):
        counter, bound = target.comparator, test.left
    else:
        return False
    if not isinstance(counter, cst.Name):
        return False
    return _is_small_bound(context, bound, function)


def _is_small_bound(context: "Context", bound: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> bool:
    value = context.literal(bound)
    if value is not UNKNOWN:
        return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _SMALL_BOUND
    name = last_name(bound)
    if name is None:
        return False
    if isinstance(bound, cst.Name) and function is not None:
        for param in (*function.params.params, *function.params.kwonly_params):
            if param.name.value == name and param.default is not None:
                default = context.literal(param.default)
                if isinstance(default, int) and not isinstance(default, bool):
                    return 0 < default <= _SMALL_BOUND
    return bool(_DISPLAY_BOUND.match(name))


def few_trips(context: "Context", loop: Loop) -> bool:
    """`for i in range(3):`, `for i in range(1, number_int + 1):` with `number_int = 10`, `for net in (G, D)`:
    a loop over a small count written in the code (a smoke test, a latent walk of a few images), not over a
    run's steps."""
    trips = literal_trips(context, loop)
    return trips is not None and trips <= _SMALL_BOUND


def _contains_hot(context: "Context", loop: Loop) -> bool:
    if is_hot(context, loop):
        return True
    return any(_contains_hot(context, n) for n in _own_nodes(loop.body) if isinstance(n, _LOOPS))


def is_training_loop(context: "Context", loop: Loop) -> bool:
    """A hot loop whose body (nested blocks and loops included, functions excluded) does a backward
    pass or an optimizer step."""
    return _cache(context).training.ask(
        loop,
        lambda l: is_hot(context, l)
        and any(isinstance(n, cst.Call) and _is_backward_or_step(context, n) for n in _own_nodes(l.body, into_loops=True)),
    )


def is_step_function(context: "Context", function: cst.FunctionDef) -> bool:
    """`function` is one training step: its own body, outside any loop, calls `.backward()` and steps an
    optimizer (`loss.backward(); optimizer.step(); return loss.item()`), and no loop in it does either. It
    is called once per step from a loop elsewhere (`agent.replay()`, `train_step(batch)`)."""
    return _cache(context).step_functions.ask(function, lambda f: _is_step_function(context, f))


def _is_step_function(context: "Context", function: cst.FunctionDef) -> bool:
    backward = step = False
    for node in _own_nodes(function.body):
        if isinstance(node, cst.Call) and _is_backward_or_step(context, node):
            attr = node.func.attr.value  # type: ignore[attr-defined]
            if attr == "step":
                step = True
            else:
                backward = True
    found = backward and step
    if found:
        for node in _own_nodes(function.body):
            if isinstance(node, _LOOPS) and any(
                isinstance(n, cst.Call) and _is_backward_or_step(context, n)
                for n in _own_nodes(node.body, into_loops=True)
            ):
                found = False
                break
    return found


def step_function(context: "Context", node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The one-step training function (`is_step_function`) that runs `node` once per call: not inside a
    loop, lambda or class within it. None otherwise."""
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, (cst.Lambda, cst.ClassDef, *_LOOPS)):
            return None
        if isinstance(ancestor, cst.FunctionDef):
            return ancestor if is_step_function(context, ancestor) else None
    return None


def hot_loop(context: "Context", node: cst.CSTNode) -> Optional[Loop]:
    """The innermost hot loop whose body runs `node` on every trip (None when there is none).

    Does not cross a function, lambda or class boundary. A node in a `for` loop's iterable or in a
    loop's `else:` clause is not in that loop's body.
    """
    child = node
    for ancestor in context.ancestors(node):
        if is_a(ancestor, _BOUNDARIES):
            return None
        if is_a(ancestor, _LOOPS):
            in_body = child is ancestor.body or (isinstance(ancestor, cst.While) and child is ancestor.test)
            if in_body and is_hot(context, ancestor):
                return ancestor
        child = ancestor
    return None


# Names in an `if` test that say "only on some steps" (`if should_log:`, `if step_is_log_step():`).
_GATE_NAME = re.compile(
    r"should_|^do_(?:log|print|eval|save)|^is_(?:log|print|eval|save|last)|(?:log|print|eval|save|display)_(?:step|now|time)$"
    r"|interval|every|freq|period|^last_|_last$|is_last",
    re.IGNORECASE,
)


def is_interval_test(context: "Context", test: cst.BaseExpression, _depth: int = 0) -> bool:
    """A test that is true on only some steps: a modulo, `i == N`, or a name assigned one."""
    if _depth > 3:
        return False
    for node, in_arithmetic in _test_nodes(test):
        if in_arithmetic and isinstance(node, (cst.Name, cst.Attribute)):
            continue  # `data_iter_step // update_freq`: a step number, not a flag
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            if not isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                return True
        if (
            isinstance(node, cst.Comparison)
            and not _is_device_check(context, node)
            and not _is_empty_check(context, node)
            and not _is_setting_check(context, node)
        ):
            for target in node.comparisons:
                if isinstance(target.operator, cst.Equal):
                    return True
        if isinstance(node, cst.Name) and _depth < 3:
            value = context.assigned_value(node)
            if value is not None and is_interval_test(context, value, _depth + 1):
                return True
        if isinstance(node, (cst.Name, cst.Attribute)):
            name = last_name(node)
            if name is not None and _GATE_NAME.search(name):
                return True
    return False


def _test_nodes(test: cst.BaseExpression) -> Iterator[tuple[cst.CSTNode, bool]]:
    """The nodes of an `if` test, each with whether it is an operand of arithmetic other than a modulo."""
    stack: list[tuple[cst.CSTNode, bool]] = [(test, False)]
    while stack:
        node, in_arithmetic = stack.pop()
        yield node, in_arithmetic
        if isinstance(node, _BOUNDARIES):
            continue
        inner = in_arithmetic or (isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, cst.Modulo))
        stack.extend((child, inner) for child in semantic_children(node))


_SIZES = frozenset({"len", "size", "numel", "nelement", "shape"})

# Objects that hold the run's settings (`args.augment_p`, `cfg.TRAIN.MODE`): the same on every step.
_SETTINGS = frozenset({"args", "opt", "opts", "cfg", "config", "conf", "hparams", "hp", "flags", "FLAGS", "params", "options"})


def _is_setting_check(context: "Context", comparison: cst.Comparison) -> bool:
    """`args.augment_p == 0`, `cfg.MODE == "train"`: settings and literals only, the same on every step."""
    for side in (comparison.left, *(c.comparator for c in comparison.comparisons)):
        if context.literal(side) is not UNKNOWN:
            continue
        root = side
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        if not (isinstance(root, cst.Name) and root.value in _SETTINGS and root is not side):
            return False
    return True


def _is_empty_check(context: "Context", comparison: cst.Comparison) -> bool:
    """`dets.size(0) == 0`, `len(boxes) == 0`, `x.shape[0] == 0`: whether there is anything to do this trip,
    not a logging interval."""
    if len(comparison.comparisons) != 1 or context.literal(comparison.comparisons[0].comparator) != 0:
        return False
    left = comparison.left
    if isinstance(left, cst.Subscript):
        left = left.value
    if isinstance(left, cst.Call):
        left = left.func
    return last_name(left) in _SIZES


def _is_device_check(context: "Context", comparison: cst.Comparison) -> bool:
    """`device == "cuda"`, `device.type == "cuda"`, `args.device == "cpu"`: the same on every step, not a
    logging interval."""
    for side in (comparison.left, *(c.comparator for c in comparison.comparisons)):
        value = context.literal(side)
        if isinstance(value, str) and is_device_string(value):
            return True
        name = last_name(side)
        if name is not None and (is_device_name(name) or (name == "type" and is_device_name(dotted(side) or ""))):
            return True
    return False


def _first_trip(statement: cst.If) -> bool:
    """`if loss_ema is None: loss_ema = loss.item()`, `if not self.initialized: ...; self.initialized = True`:
    the body sets the very name it tests for None (or for false), so it runs on the first trip only (the
    `else:` runs on the others)."""
    return _first_trip_test(statement, statement.test)


def _first_trip_test(statement: cst.If, test: cst.BaseExpression) -> bool:
    """`_first_trip` for one test, or for either side of an `and` (`if not self.logged and not args.dry_run:`)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _first_trip_test(statement, test.left) or _first_trip_test(statement, test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        tested = test.expression
    elif (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Is)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    ):
        tested = test.left
    else:
        return False
    name = dotted(tested) if isinstance(tested, (cst.Name, cst.Attribute)) else None
    if name is None:
        return False
    for node in _own_nodes(statement.body):
        if isinstance(node, cst.Assign) and any(
            isinstance(t.target, (cst.Name, cst.Attribute)) and dotted(t.target) == name for t in node.targets
        ):
            value = node.value
            return not (isinstance(value, cst.Name) and value.value in ("None", "False"))
    return False


def _first_few(context: "Context", test: cst.BaseExpression, loop: Loop) -> bool:
    """`if j <= 4:` where `j` counts the loop's trips (`for j, batch in enumerate(loader)`): a few trips only
    (a handful of samples to log), whatever the loop's length; `if ids is not None and i in ids:` picks some
    trips by their number."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _first_few(context, test.left, loop) or _first_few(context, test.right, loop)
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(loop, cst.For)):
        return False
    operator = test.comparisons[0].operator
    if isinstance(operator, cst.In) and isinstance(test.left, cst.Name):
        return test.left.value in loop_counters(loop)
    if not isinstance(operator, (cst.LessThan, cst.LessThanEqual)) or not isinstance(test.left, cst.Name):
        return False
    bound = context.literal(test.comparisons[0].comparator)
    if not (isinstance(bound, int) and not isinstance(bound, bool) and 0 <= bound <= _SMALL_BOUND):
        return False
    return test.left.value in loop_counters(loop)


def loop_counters(loop: cst.For) -> set[str]:
    """The names that count a `for` loop's trips: `i` of `for i, x in enumerate(...)` or `for i in range(n)`."""
    it = loop.iter
    target = loop.target
    while isinstance(it, cst.Call) and last_name(it.func) in ("tqdm", "track") and it.args:
        it = it.args[0].value  # tqdm(enumerate(loader))
    if isinstance(it, cst.Call) and last_name(it.func) in ("range", "trange") and isinstance(target, cst.Name):
        return {target.value}
    if (
        isinstance(it, cst.Call)
        and last_name(it.func) == "enumerate"
        and isinstance(target, (cst.Tuple, cst.List))
        and target.elements
        and isinstance(target.elements[0].value, cst.Name)
    ):
        return {target.elements[0].value.value}
    return set()


def _skips_most(context: "Context", statement: cst.CSTNode) -> bool:
    """`if step % N: continue` / `if not should_log: continue`."""
    if not isinstance(statement, cst.If) or statement.orelse is not None:
        return False
    body = statement.body
    if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
        return False
    only = body.body[0]
    if not (isinstance(only, cst.SimpleStatementLine) and len(only.body) == 1 and isinstance(only.body[0], cst.Continue)):
        return False
    test = statement.test
    if isinstance(test, cst.Call) and last_name(test.func) == "bool" and len(test.args) == 1:
        test = test.args[0].value
    if isinstance(test, cst.Comparison) and all(isinstance(c.operator, (cst.Equal, cst.Is)) for c in test.comparisons):
        return False  # `if loss == 0: continue` skips the rare trip, not most of them
    return is_interval_test(context, test)


def _steps(context: "Context", block: cst.CSTNode) -> bool:
    """The block does an optimizer step (gradient accumulation's `if (i + 1) % accum == 0:`), itself or through a
    one-step function (a GAN's `if it % n_critic == 0: train_G()`)."""
    return any(
        isinstance(n, cst.Call) and (_is_backward_or_step(context, n) or _runs_step_function(context, n))
        for n in _own_nodes(block)
    )


def gated(context: "Context", node: cst.CSTNode, loop: Loop) -> bool:
    """Whether `node` runs on only some trips of `loop` (a logging interval, a last-batch check).

    The `if` of gradient accumulation, which does the optimizer step, is not a logging interval:
    code in it runs once per optimizer step, which is a step.
    """
    child = node
    for ancestor in context.ancestors(node):
        if ancestor is loop:
            return False
        if (
            isinstance(ancestor, cst.If)
            and child is ancestor.body
            and is_interval_test(context, ancestor.test)
            and not _steps(context, ancestor.body)
        ):
            return True
        if isinstance(ancestor, cst.If) and child is ancestor.body and (
            _first_trip(ancestor) or _first_few(context, ancestor.test, loop) or _never_true(context, ancestor.test)
        ):
            return True
        if isinstance(ancestor, cst.IfExp) and child is ancestor.body and is_interval_test(context, ancestor.test):
            return True
        if isinstance(ancestor, cst.IndentedBlock) and isinstance(child, cst.BaseStatement):
            first_skip, positions = _skips_in(context, ancestor)
            if first_skip is not None and positions.get(child, -1) > first_skip:
                return True
        child = ancestor
    return False


def _never_true(context: "Context", test: cst.BaseExpression) -> bool:
    """`if verbose:` where the only binding of `verbose` is `verbose = False`: the branch never runs. Nor
    does a debug switch in a real run (`if args.debug:`, `if self.debug:`), nor a `--verbose` switch of the
    file that is off by default."""
    if isinstance(test, (cst.Name, cst.Attribute)) and "debug" in (last_name(test) or "").lower():
        return True
    if isinstance(test, cst.Attribute) and "verbose" in test.attr.value.lower():
        # `if args.verbose:` with `--verbose` a switch that is off unless given: a default run skips it
        from torchlint.semantic.model import semantic_model  # the model builds on this module

        return semantic_model(context).loaders.switch_default(test.attr.value) in (False, 0)
    if not isinstance(test, cst.Name):
        return False
    value = context.literal(test)
    return value is not UNKNOWN and value in (False, None, 0)


def _skips_in(context: "Context", block: cst.IndentedBlock) -> tuple[Optional[int], dict[cst.CSTNode, int]]:
    """(index of the first `if step % N: continue` in `block`, each statement's index), once per block:
    asking per statement would read the block again for each of its statements."""
    return _cache(context).skips.ask(
        block,
        lambda b: (next((i for i, s in enumerate(b.body) if _skips_most(context, s)), None), {s: i for i, s in enumerate(b.body)}),
    )


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def element_read(context: "Context", expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The collection whose elements `expr` reads one per trip of a loop around it: `boxes` for `boxes[i]` in
    `for i in range(len(boxes))`, for `b` in `for b in boxes` or `[b for b in boxes]`. None otherwise. A host
    read of such an element costs one wait per element, in any loop (post-processing included)."""
    root = expr
    indexes: set[str] = set()
    if isinstance(expr, cst.Subscript):
        root = expr.value
        indexes = {
            e.slice.value.value
            for e in expr.slice
            if isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Name)
        }
    element_names = indexes | ({expr.value} if isinstance(expr, cst.Name) else set())
    child: cst.CSTNode = expr
    for ancestor in context.ancestors(expr):
        if is_a(ancestor, _BOUNDARIES):
            return None
        if is_a(ancestor, _LOOPS) and _shows_a_few(context, ancestor):
            return None  # a few pictures to show: a few reads
        if type(ancestor) is cst.If and child is ancestor.body and _rare_for(context, ancestor.test, element_names):
            return None  # `if done and lives == 0: print(...)`: when an episode ends, not for each element
        child = ancestor
        loops_here: list[tuple[cst.BaseAssignTargetExpression, cst.BaseExpression]] = []
        if type(ancestor) is cst.For:
            loops_here.append((ancestor.target, ancestor.iter))
        elif is_a(ancestor, _COMPREHENSIONS):
            clause: Optional[cst.CompFor] = ancestor.for_in
            while clause is not None:
                loops_here.append((clause.target, clause.iter))
                clause = clause.inner_for_in
        for target, iterable in loops_here:
            names = {t.value for t in flatten_targets(target) if isinstance(t, cst.Name)}
            if isinstance(expr, cst.Name) and expr.value in names and isinstance(target, cst.Name):
                return iterable  # for b in boxes: b.item()
            enumerated = _enumerated(target, iterable)
            if isinstance(expr, cst.Name) and enumerated is not None and enumerated[0] == expr.value:
                return enumerated[1]  # for i, b in enumerate(boxes): b.item()
            if indexes & names and _counts(iterable):
                return root  # for i in range(len(boxes)): boxes[i].item()
    return None


def _enumerated(
    target: cst.BaseAssignTargetExpression, iterable: cst.BaseExpression
) -> Optional[tuple[str, cst.BaseExpression]]:
    """`for i, b in enumerate(boxes)`: ("b", boxes)."""
    if not (isinstance(target, cst.Tuple) and len(target.elements) == 2 and isinstance(target.elements[1].value, cst.Name)):
        return None
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate"):
        return None
    if not iterable.args or iterable.args[0].keyword is not None or iterable.args[0].star:
        return None
    return target.elements[1].value.value, iterable.args[0].value


def _rare_for(context: "Context", test: cst.BaseExpression, element_names: set[str]) -> bool:
    """An `if` true on only some trips, decided by something other than the element read (not `labels[i] == 1`)."""
    if any(isinstance(n, cst.Name) and n.value in element_names for n in [test, *_own_nodes(test)]):
        return False
    return is_interval_test(context, test)


def _counts(iterable: cst.BaseExpression) -> bool:
    """`range(...)`, `range(len(x))`, `enumerate(...)`: an iterable whose items number the trips."""
    return isinstance(iterable, cst.Call) and last_name(iterable.func) in ("range", "enumerate", "trange")

