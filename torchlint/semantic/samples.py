"""Per-sample loops: Python loops (and comprehensions) over the samples of a batch that run a module, a
loss or tensor math once per sample and collect the results, where one batched call would do.

A batch is a tensor the code shows to be one: a `forward()` input, a loader's batch, a parameter of a
batch-processing function, a value with a batch-sized first dimension. Loops over layers, time steps with a
carried state, decoding steps and work of varying size per sample are not per-sample loops.

The parts: `sample_scopes` (how names are bound), `batches` (what is a batch), `sample_callees` (what runs a
model), `sample_headers` (loops over samples), `sample_body` (per-sample work collected), `list_loops`
(element-wise math over a list of tensors); this module puts them together, for loops and comprehensions.
"""

from __future__ import annotations

from typing import Optional, Union

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants
from torchlint.semantic import list_loops, masked_reductions
from torchlint.semantic.batches import Batches
from torchlint.semantic.loader_calls import is_builtin
from torchlint.semantic.sample_body import SampleBody
from torchlint.semantic.sample_callees import VARIABLE_LENGTH, Callees
from torchlint.semantic.sample_headers import LoopHeaders, SampleLoop
from torchlint.semantic.sample_scopes import Scope, Scopes
from torchlint.semantic.sample_syntax import (
    flatten_names,
    indexes_sample,
    names_in,
    statements_of,
)
from torchlint.semantic.single_samples import SingleSamples

# Keyword arguments that set the size of a result: given a per-sample value, the results differ in size.
_SIZE_KEYWORDS = frozenset("size output_size scale_factor shape new_size dsize".split())

# What collects per-sample results into one value: stacked, concatenated, summed, or one tensor (or array)
# built from a list of per-sample scores.
_COMBINERS = frozenset(
    "torch.stack torch.cat torch.concat torch.concatenate torch.vstack torch.tensor torch.as_tensor "
    "torch.Tensor torch.FloatTensor numpy.mean numpy.array numpy.stack".split()
)

_SHAPE_METHODS = frozenset("view reshape expand repeat new_zeros new_ones new_empty new_full".split())


def _shaped_per_sample(call: cst.Call, names: set[str]) -> bool:
    """`x.reshape(t, h_block, w)` with a dimension computed in the loop from names alone (not from the
    tensor's own size, as in `out.view(out.size(0), -1)`)."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value in _SHAPE_METHODS):
        return False

    def plain(expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.BinaryOperation):
            return plain(expr.left) and plain(expr.right)
        return isinstance(expr, (cst.Name, cst.Integer))

    dims = [a.value for a in call.args if a.keyword is None and not a.star]
    if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
        dims = [e.value for e in dims[0].elements]
    return any(plain(d) and names_in(d) & names for d in dims)


def _reads_neighbours(loop: SampleLoop, nodes: list[cst.CSTNode]) -> bool:
    """`ret[i] += ret[i - 1] * m`, `x[i + 1] - x[i]`: a row read beside the loop's own, a scan or a window along
    a dimension, not independent samples."""
    if loop.index is None:
        return False
    for node in nodes:
        if isinstance(node, cst.Subscript) and isinstance(node.slice[0].slice, cst.Index):
            first = node.slice[0].slice.value
            if isinstance(first, cst.BinaryOperation) and isinstance(first.operator, (cst.Add, cst.Subtract)):
                sides = (first.left, first.right)
                if any(isinstance(side, cst.Name) and side.value == loop.index for side in sides) and any(
                    isinstance(side, cst.Integer) for side in sides
                ):
                    return True
    return False


class PerSampleLoops:
    """Decides, per loop of one file, whether it runs per sample of a batch (shared by the file's rules)."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.scopes = Scopes(context)
        self.callees = Callees(context, self.scopes)
        self.batches = Batches(context, self.scopes, self.callees)
        self.headers = LoopHeaders(context, self.scopes, self.batches)

    def candidate(self, node: cst.CSTNode, target: cst.BaseExpression, iterable: cst.BaseExpression) -> Optional[SampleLoop]:
        """The loop's sample names and index when its header runs over the samples of a batch."""
        return self.headers.candidate(node, target, iterable)

    def computes_per_sample(self, node: cst.CSTNode) -> bool:
        """A loop or comprehension that runs per sample of a batch and collects the results."""
        if isinstance(node, cst.For):
            loop = self.candidate(node, node.target, node.iter)
            return loop is not None and self.body_is_per_sample(loop, node.body)
        return isinstance(node, (cst.ListComp, cst.GeneratorExp)) and self.comprehension_is_per_sample(node)

    def device_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor that may live on the accelerator: by its value, a parameter every caller passes one, or (in a
        program that uses one) what a module computes on a batch, whatever it is called (`pred = m(x).argmax(1)`)."""
        from torchlint.semantic.model import semantic_model  # the model holds this object: import when asked

        model = semantic_model(self.context)
        if model.is_tensor(expr):
            return True
        if model.values.kind(expr) == "cpu":
            return False  # `scores = m(x).cpu()`: a model's output, copied to the host
        if isinstance(expr, cst.Name) and self.batches.device_param(self.scopes.of(expr), expr.value):
            return True  # `def step(x, lengths)` called as `step(x.to(device), lengths.to(device))`
        return model.on_accelerator_at(expr) and self.batches.model_output(self.scopes.of(expr), expr)

    # ------------------------------------------------------------------------------------------
    # the loop body
    def body_is_per_sample(self, loop: SampleLoop, body: cst.CSTNode) -> bool:
        scope = self.scopes.of(loop.node)
        statements = list(statements_of(body))
        nodes = list(descendants(body))
        if any(isinstance(n, (cst.Break, cst.Return, cst.Yield, cst.Await, cst.Raise)) for n in nodes):
            return False
        # Per-sample work of varying size, or sequential updates: not a batch computation in disguise.
        # A backward per sample only accumulates gradients (one backward of the summed loss does the same),
        # unless the loop steps, clears or reads the gradients of each sample.
        backward = False
        for node in nodes:
            if isinstance(node, cst.Call):
                name = last_name(node.func)
                if name in VARIABLE_LENGTH or name in ("step", "zero_grad", "generate", "decode") or (name or "").endswith("beam_search"):
                    return False
                if name == "where" and len(node.args) == 1:
                    return False
                backward = backward or name == "backward"
        if backward and not self._accumulates_gradients(nodes):
            return False
        if self._trains_own_weights(scope, nodes):
            return False
        tainted = set(loop.samples)
        sample_roots = self._sample_roots(loop, scope, nodes)
        if self._varying_size(loop, nodes) or _reads_neighbours(loop, nodes):
            return False
        if loop.index is not None and not sample_roots and not loop.samples and not loop.items:
            return False
        if loop.index is not None and not loop.evidence and not sample_roots and not loop.samples:
            return False
        helper = SampleBody(self.context, self.callees, scope, loop, tainted, sample_roots)
        helper.size_guards = masked_reductions.collects_one_value(nodes)
        if not helper.scan(statements):
            return False
        if loop.weak and not self._shows_samples(loop, scope, nodes, helper, sample_roots):
            return False
        if loop.rows and not any(isinstance(n, cst.Call) and helper.runs_model_on_sample(n) for n in nodes):
            return False
        return helper.collected

    def _accumulates_gradients(self, nodes: list[cst.CSTNode]) -> bool:
        """`loss.backward()` on a per-sample loss and nothing that reads or resets `.grad` in the loop."""
        if any(isinstance(n, cst.Attribute) and n.attr.value == "grad" for n in nodes):
            return False
        return all(
            isinstance(n.func, cst.Attribute) and not n.args
            for n in nodes
            if isinstance(n, cst.Call) and last_name(n.func) == "backward"
        )

    def _trains_own_weights(self, scope: Scope, nodes: list[cst.CSTNode]) -> bool:
        """`g = torch.autograd.grad(loss, params)`, `fast = [w - lr * d for ...]`, then `net(x, fast)`: each
        element trains weights of its own (the tasks of meta-learning), an optimisation per element."""
        derived: set[str] = set()
        for node in nodes:
            if isinstance(node, cst.Assign) and (
                names_in(node.value) & derived
                or any(
                    isinstance(n, cst.Call) and self.context.qualname(n) == "torch.autograd.grad"
                    for n in [node.value, *descendants(node.value)]
                )
            ):
                for target in node.targets:
                    derived.update(flatten_names(target.target))
        return bool(derived) and any(
            isinstance(n, cst.Call)
            and any(isinstance(a.value, cst.Name) and a.value.value in derived for a in n.args[1:])
            and (self.callees.is_module_call(scope, n) or (self.context.qualname(n) or "").endswith(".functional_call"))
            for n in nodes
        )

    def _varying_size(self, loop: SampleLoop, nodes: list[cst.CSTNode]) -> bool:
        """A slice bounded by a per-sample value (`x[i, :lengths[i]]`), a boolean mask (`x[i][x[i] > 0]`) or
        a result size given per sample (`size=sizes[i]`): per-sample pieces of different sizes."""
        names = set(loop.samples)
        if loop.index is not None:
            names.add(loop.index)
        # values computed per iteration (`st = labels[i].argmax().item()`) bound a slice differently per sample
        for node in nodes:
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    names.update(flatten_names(target.target))
        one_per_sample = masked_reductions.collects_one_value(nodes)  # a loss term per image, say
        for node in nodes:
            if isinstance(node, cst.Call) and any(
                arg.keyword is not None and arg.keyword.value in _SIZE_KEYWORDS and names_in(arg.value) & names
                for arg in node.args
            ):
                return True  # `interpolate(x[i][None], size=target_sizes[i])`: each sample to its own size
            if isinstance(node, cst.Call) and _shaped_per_sample(node, names):
                return True  # `t, h, w = grid; feat.reshape(t, h // 2, ...)`: each sample its own shape
            if not isinstance(node, cst.Subscript):
                continue
            for position, element in enumerate(node.slice):
                part = element.slice
                if isinstance(part, cst.Slice):
                    if position == 0 and indexes_sample(node, loop.index):
                        continue
                    for bound in (part.lower, part.upper, part.step):
                        if bound is not None and not isinstance(bound, (cst.Integer, cst.UnaryOperation)) and names_in(bound):
                            if names_in(bound) & names or any(
                                isinstance(n, cst.Subscript) for n in [bound, *descendants(bound)]
                            ):
                                return True
                elif isinstance(part, cst.Index) and isinstance(part.value, (cst.Comparison, cst.BinaryOperation, cst.UnaryOperation)):
                    operator = getattr(part.value, "operator", None)
                    if isinstance(part.value, cst.Comparison) or isinstance(operator, (cst.BitAnd, cst.BitOr, cst.BitInvert)):
                        if not masked_reductions.reduced(self.context, node, nodes) and not one_per_sample:
                            return True
        return False

    def _sample_roots(self, loop: SampleLoop, scope: Scope, nodes: list[cst.CSTNode]) -> set[str]:
        """Names `z` indexed as `z[i]` (i the loop index) in the body that are batches."""
        if loop.index is None:
            return set()
        roots: set[str] = set()
        weak: set[str] = set()
        bound_name = loop.bound.value if isinstance(loop.bound, cst.Name) else None
        for node in nodes:
            if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and indexes_sample(node, loop.index, loop.inner):
                name = node.value.value
                if name == bound_name or self.batches.is_batch(scope, node.value):
                    roots.add(name)
                elif loop.evidence:
                    weak.add(name)
        if roots or loop.evidence:
            # The loop runs over a batch: the other values indexed by sample are per-sample too.
            roots |= weak
        return roots


    def _shows_samples(
        self, loop: SampleLoop, scope: Scope, nodes: list[cst.CSTNode], helper: SampleBody, roots: set[str]
    ) -> bool:
        """For a loop whose header does not show a batch: the body treats each element as one sample, or
        it indexes a batch or a module's output alongside labels drawn from a loader (`criterion(out[i], y[i])`
        over `range(len(y))`)."""
        if SingleSamples(self.context, self.callees, scope, loop.index, loop.samples, roots).shown(nodes, helper.mentions_sample):
            return True
        if loop.index is None:
            return False
        indexed = {
            node.value.value
            for node in nodes
            if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and indexes_sample(node, loop.index)
        }
        labels = {name for name in indexed if self.batches.loader_component(scope, cst.Name(name))}
        if labels and loop.samples and loop.bound is not None and self.batches.output_on_batch(scope, loop.bound):
            return True  # `for k, o in enumerate(model(x)): criterion(o, y[k])`: its rows paired with labels
        return bool(labels) and any(self.batches.is_batch(scope, cst.Name(name)) for name in indexed - labels)

    # ------------------------------------------------------------------------------------------
    # element-wise math over a per-step list of tensors (policy-gradient losses)
    def elementwise_list_loop(self, node: cst.For) -> bool:
        return list_loops.elementwise_list_loop(self.context, node)

    def elementwise_list_comprehension(self, node: Union[cst.ListComp, cst.GeneratorExp]) -> bool:
        return list_loops.elementwise_list_comprehension(self.context, node)

    # ------------------------------------------------------------------------------------------
    # comprehensions
    def comprehension_is_per_sample(self, node: Union[cst.ListComp, cst.GeneratorExp]) -> bool:
        comp_for = node.for_in
        if comp_for.inner_for_in is not None or comp_for.ifs:
            return False
        if not self._feeds_batch_result(node):
            return False
        iterable = comp_for.iter
        if not isinstance(iterable, (cst.Call, cst.Name, cst.Attribute)):
            return False
        loop = self.candidate(node, comp_for.target, iterable)
        if loop is None:
            return False
        scope = self.scopes.of(node)
        nodes = [node.elt, *descendants(node.elt)]
        for inner in nodes:
            if isinstance(inner, cst.Call) and last_name(inner.func) in VARIABLE_LENGTH:
                return False
        roots = self._sample_roots(loop, scope, nodes)
        if loop.index is not None and not roots:
            return False
        if self._varying_size(loop, nodes) or _reads_neighbours(loop, nodes):
            return False
        helper = SampleBody(self.context, self.callees, scope, loop, set(loop.samples), roots)
        if loop.weak and not self._shows_samples(loop, scope, nodes, helper, roots):
            return False
        if loop.rows and not any(isinstance(n, cst.Call) and helper.runs_model_on_sample(n) for n in nodes):
            return False  # rows of an array: only a model run per row is work to batch
        return helper.work(node.elt) and not helper.vetoed

    def _feeds_batch_result(self, node: cst.CSTNode) -> bool:
        """The comprehension is the sequence argument of torch.stack/cat or sum(), or a list bound to a name
        that is later passed to torch.stack/cat."""
        parent = self.context.parent(node)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            if not (isinstance(call, cst.Call) and call.args and call.args[0] is parent):
                return False
            if len(call.args) == 1 and any(is_builtin(self.context, call.func, b) for b in ("list", "tuple")):
                return self._feeds_batch_result(call)  # `torch.cat(tuple(f(x[i]) for i in ...))`: the same list
            return self._combines(call)
        if isinstance(node, cst.GeneratorExp) and isinstance(parent, cst.Call):
            return self._combines(parent)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            name = parent.targets[0].target.value
            scope_node = self.scopes.of(node).node
            for other in descendants(scope_node):
                if isinstance(other, cst.Call) and other.args and self._combines(other):
                    first = other.args[0].value
                    if isinstance(first, cst.Name) and first.value == name:
                        return True
        return False

    def _combines(self, call: cst.Call) -> bool:
        if isinstance(call.func, cst.Name) and call.func.value == "sum":
            return True
        qualname = self.context.qualname(call) or ""
        return qualname in _COMBINERS
