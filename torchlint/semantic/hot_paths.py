"""Does a piece of code run once per step, per sample or per batch, rather than once per run?

A cost that is paid once (building a model, drawing the first noise of a sampling run, a smoke test in a
`__main__` block, a dummy input to log the graph) is noise; the same cost paid on every step is not. Code
is on a **hot path** when one of these holds:

1. a hot loop runs it on every trip (`loops.per_step`: not under a logging interval), or it is in a
   one-step training function (`loops.step_function`);
2. it runs on every trip of a loop whose own body runs a model's forward pass (the denoising steps of a
   sampler, an evaluation over a list of batches), not under a logging interval;
3. it is in `forward()` or `__call__()` of a class, or in a per-batch hook of a training framework
   (`training_step`, `before_batch`, `on_train_batch_end`): that runs once per batch (or per sample, for
   a transform);
4. it is in a function that works on the batch it is given: the size or the device of what it builds
   comes from a tensor (`x.shape`, `x.size(0)`, `x.device`, or a name assigned from one), as in a
   helper that builds a mask for each batch. A constructor (`__init__`) is not one: it runs once per object;
   nor is a function without parameters (it builds its own tensors);
5. it is in a function of this file that is called from a hot path (1-4, any depth).

Module-level code outside a hot loop (a script's set-up, a notebook cell, a `__main__` block) is not on a
hot path.

Ask once the walk is over (in `leave_Module`): criterion 5 reads calls anywhere in the file.

Two narrower questions for rules about per-step costs: `forward_loop(context, node)` is the loop of
criterion 2 itself; `called_every_step(context, node)` is the function holding `node` when a step loop or a
`forward()` calls it, in this file or in another file of the project (its call sites there).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.context import UNKNOWN
from torchlint.lint.walk import descendants, scope_nodes
from torchlint.semantic import loops
from torchlint.semantic.functions import called_function
from torchlint.semantic.memo import CycleSafeMemo, question_stack
from torchlint.semantic.modules import is_module_like_receiver
from torchlint.semantic.objects import objects

if TYPE_CHECKING:
    from torchlint.lint.context import Context

# Methods run once per batch: a module's forward, a transform's __call__, the per-batch hooks of training
# frameworks (`loops.PER_BATCH_HOOKS`).
_PER_CALL_METHODS = re.compile(rf"^(?:forward|__call__)$|{loops.PER_BATCH_HOOKS.pattern}")

# Receivers whose `.device` is configuration, not the device of a batch.
_CONFIG_ROOTS = frozenset({"self", "args", "cfg", "config", "opt", "opts", "hparams", "params", "FLAGS"})


class _HotPaths:
    def __init__(self, context: "Context") -> None:
        self.context = context
        stack = question_stack(context)
        self.functions: CycleSafeMemo[cst.FunctionDef, bool] = CycleSafeMemo(False, stack)
        self.elsewhere: CycleSafeMemo[cst.FunctionDef, bool] = CycleSafeMemo(False, stack)
        self._callers: Optional[dict[cst.FunctionDef, list[cst.Call]]] = None

    def callers(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls of this file that run `function` (one walk over the file, on first use)."""
        if self._callers is None:
            self._callers = {}
            for node in _all_calls(self.context.module):
                target = called_function(self.context, node)
                if target is not None:
                    self._callers.setdefault(target, []).append(node)
        return self._callers.get(function, [])


def _all_calls(module: cst.Module) -> list[cst.Call]:
    return [n for n in descendants(module) if isinstance(n, cst.Call)]


def _state(context: "Context") -> _HotPaths:
    return context.shared(_HotPaths)


def on_hot_path(context: "Context", node: cst.CSTNode, data: tuple[cst.BaseExpression, ...] = ()) -> bool:
    """Whether `node` runs once per step, sample or batch (see the module docstring). `data` are the
    expressions that size or place what `node` builds (criterion 4)."""
    if loops.per_step(context, node) is not None or loops.step_function(context, node) is not None:
        return True
    if _in_forward_loop(context, node):
        return True
    function = context.enclosing_function(node)
    if function is None:
        return False
    if data and _given_data(function) and any(_from_batch(context, e, function) for e in data):
        return True
    return _function_is_hot(context, function)


def called_every_step(context: "Context", node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The function holding `node` when a step loop or a `forward()` calls it on every trip, in this file
    (`scores = self._predict_batch(X)`) or in another project file: a top-level function
    (`clip_grad_value_(net.parameters())` in the training loop of `train.py`), or a method of a module class
    called on a model there (`model.parse_batch(batch)`). Not when a logging interval inside it guards `node`."""
    function = context.enclosing_function(node)
    if function is None or loops.gated(context, node, function) or _under_sentinel(context, node, function):  # type: ignore[arg-type]
        return None
    state = _state(context)
    found = state.elsewhere.ask(
        function,
        lambda f: any(_runs_every_step(context, call) for call in state.callers(f) if context.enclosing_function(call) is not f)
        or _called_per_step_elsewhere(context, f),
    )
    return function if found else None


def callers_of(context: "Context", function: cst.FunctionDef) -> list[cst.Call]:
    """The calls of this file that run `function`."""
    return _state(context).callers(function)


def _under_sentinel(context: "Context", node: cst.CSTNode, function: cst.FunctionDef) -> bool:
    """`node` is in the body of an `if` that compares a value with a literal (`if z < 0: z = ...item()`, a
    constant set on the first call; `if mode == "eval":`): a path the helper may take rarely."""
    child = node
    for ancestor in context.ancestors(node):
        if ancestor is function:
            return False
        if isinstance(ancestor, cst.If) and child is ancestor.body:
            test = ancestor.test
            if isinstance(test, cst.Comparison) and any(
                context.literal(side) is not UNKNOWN for side in (test.left, *(c.comparator for c in test.comparisons))
            ):
                return True
        child = ancestor
    return False


def _runs_every_step(context: "Context", call: cst.Call) -> bool:
    """The call runs on every step: in a step loop or a `forward()`, or in a function that does (any depth),
    where no logging interval guards it."""
    return loops.every_step(context, call) is not None or called_every_step(context, call) is not None


def _called_per_step_elsewhere(context: "Context", function: cst.FunctionDef) -> bool:
    from torchlint.semantic import project  # project summaries build semantic models of other files

    path = context.source.path
    name = function.name.value
    if function in context.module.body:
        sites = project.call_sites(path, name)
    else:
        cls = context.parent(context.parent(function) or function)
        if not (
            isinstance(cls, cst.ClassDef)
            and cls in context.module.body
            and not name.startswith("__")
            and objects(context).is_module_class(cls)
        ):
            return False
        sites = [
            site
            for site in project.method_call_sites(path, name)
            if is_module_like_receiver(site.summary.context, site.call.func.value)  # type: ignore[attr-defined]
        ]
    return any(loops.every_step(site.summary.context, site.call) is not None for site in sites)


def _in_forward_loop(context: "Context", node: cst.CSTNode) -> bool:
    return forward_loop(context, node) is not None


def forward_loop(context: "Context", node: cst.CSTNode) -> Optional[loops.Loop]:
    """Criterion 2: the nearest loop whose body runs `node` and a forward pass on each trip, unless `node` is
    under a logging interval there."""
    child = node
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
            calls = loops.hot_calls_in(context, ancestor)
            # A forward under a logging interval (`if epoch % 20 == 0: evaluate(...)`) does not make every trip a step.
            if any(loops.is_forward_call(context, c) and not loops.gated(context, c, ancestor) for c in calls):
                return None if loops.gated(context, node, ancestor) else ancestor
        child = ancestor
    return None


def _function_is_hot(context: "Context", function: cst.FunctionDef) -> bool:
    state = _state(context)
    return state.functions.ask(
        function,
        lambda f: _is_per_call_method(context, f)
        or any(on_hot_path(context, call) for call in state.callers(f) if context.enclosing_function(call) is not f),
    )


def _is_per_call_method(context: "Context", function: cst.FunctionDef) -> bool:
    if not _PER_CALL_METHODS.match(function.name.value):
        return False
    return isinstance(context.parent(context.parent(function) or function), cst.ClassDef)


def _given_data(function: cst.FunctionDef) -> bool:
    """A function that may be handed a batch: not a constructor, and it takes a parameter other than
    `self`/`cls` (a test or demo function without parameters builds its own tensors once)."""
    if function.name.value == "__init__":
        return False
    params = function.params
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    return any(n not in ("self", "cls") for n in names) or isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None


def _from_batch(context: "Context", expr: cst.BaseExpression, function: cst.FunctionDef, _depth: int = 0) -> bool:
    """`expr` reads the shape or the device of a tensor of the function (`x.shape[0]`, `x.size(1)`,
    `x.device`, `bs` after `bs = x.shape[0]`, `b` after `b, c, t = x.size()`)."""
    if _depth > 4:
        return False
    for node in (expr, *scope_nodes(expr)):
        if (
            isinstance(node, cst.Attribute)
            and node.attr.value in ("shape", "device")
            and _batch_root(node.value)
            and context.qualname(node) != "torch.device"  # `torch.device("cuda")` names a device, reads no tensor
        ):
            return True
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "size"
            and _batch_root(node.func.value)
        ):
            return True
        if isinstance(node, cst.Name):
            for binding in context.lookup(node) or []:
                value = _bound_value(binding.node) if binding.kind in ("assign", "other") else None
                if value is not None and context.enclosing_function(binding.node) is function:
                    if _from_batch(context, value, function, _depth + 1):
                        return True
    return False


def _batch_root(expr: cst.BaseExpression) -> bool:
    """A local value (`x`, `scores`, `batch[0]`), not configuration (`self.device`, `args.device`)."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value not in _CONFIG_ROOTS


def _bound_value(node: cst.CSTNode) -> Optional[cst.BaseExpression]:
    if isinstance(node, (cst.Assign, cst.AnnAssign)):
        return node.value
    return None
