"""The header of a loop (or comprehension): does it run over the samples of a batch? `range(x.size(0))`,
`range(len(x))`, `range(batch_size)`, `for s in x`, `enumerate(x)`, `zip(x, y)`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument, positional
from torchlint.lint.context import Context
from torchlint.lint.names import flatten_targets
from torchlint.lint.walk import descendants
from torchlint.semantic.batches import Batches
from torchlint.semantic.sample_scopes import Scope, Scopes
from torchlint.semantic.tensor_evidence import host_array, shown_tensor
from torchlint.semantic.values import value_kinds

# A count of time steps or positions (`n_step = len(enc_outputs)`, `seq_len = x.size(0)`): a loop over it
# walks a sequence, not the samples of a batch.
_POSITIONS = re.compile(
    r"(^|_)(n?steps?|seq_?len(gth)?|timesteps?|time|len|length|max_?len|n?tokens?|n?words?|positions?|n?frames?)(_|$)"
    r"|^[TLS]$",
    re.IGNORECASE,
)

# What a loop's element is called when it is a piece of a sequence or of a model, not a sample.
_PIECE_NAMES = re.compile(
    r"(^|_)(frames?|steps?|tokens?|words?|positions?|timesteps?|chunks?|levels?|scales?|layers?|heads?|blocks?)(_|$)",
    re.IGNORECASE,
)

_LIST_ANNOTATION = re.compile(r"^(typing\.)?(list|List|Sequence|tuple|Tuple)\b")
_LIST_BUILDERS = frozenset("list tuple random.sample random.choices sorted".split())


@dataclass
class SampleLoop:
    """One candidate loop: the index variable (range loops) and the names bound to one sample."""

    node: cst.CSTNode
    index: Optional[str]
    samples: set[str]
    bound: Optional[cst.BaseExpression]  # what the range runs over
    evidence: bool  # the range bound or the iterated value is a batch
    items: dict[str, frozenset[int]] = field(default_factory=dict)  # `c` in `for c in zip(x, y)`: c[k] samples
    # rows of an array or matrix not known to be a tensor: only a model run per row counts as work
    rows: bool = False
    inner: bool = False  # the range is a size past the first dimension (samples of a sequence-first batch)
    # the header does not show a batch (a list, a dataset, a parameter of unknown kind): only a body that
    # treats each element as one sample (runs a model on it made a batch of one, ...) makes it a sample loop
    weak: bool = False


class LoopHeaders:
    """Answers, for one file, which loop headers run over the samples of a batch."""

    def __init__(self, context: Context, scopes: Scopes, batches: Batches) -> None:
        self.context = context
        self.scopes = scopes
        self.batches = batches

    def candidate(self, node: cst.CSTNode, target: cst.BaseExpression, iterable: cst.BaseExpression) -> Optional[SampleLoop]:
        scope = self.scopes.of(node)
        if any(isinstance(n, cst.Name) and _PIECE_NAMES.search(n.value) for n in flatten_targets(target)):
            return None  # `for i, (frame, scale) in enumerate(...)`: frames, chunks, layers are not samples
        if _keyed(node, flatten_targets(target)):
            return None  # `out["boxes"]`: each element is a record (a detection per image), not a tensor row
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name):
            func = iterable.func.value
            if func == "range" and isinstance(target, cst.Name):
                return self._range_loop(node, scope, target.value, iterable)
            if func == "enumerate" and isinstance(target, cst.Tuple) and len(target.elements) == 2:
                args = positional(iterable)
                if len(iterable.args) != 1 or len(args) != 1:
                    return None
                index, item = target.elements[0].value, target.elements[1].value
                if not isinstance(index, cst.Name):
                    return None
                inner = args[0].value
                if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "zip":
                    return self._zip_loop(node, scope, index.value, item, inner)  # enumerate(zip(x, y))
                rows = weak = False
                if host_array(self.context, inner) or (
                    not self.batches.is_batch(scope, inner, sequence=True) and not shown_tensor(self.context, scope, inner)
                ):
                    if host_array(self.context, inner) or self.batches.is_matrix(scope, inner):
                        rows = True
                    elif self._collection(inner):
                        weak = True
                    else:
                        return None
                # `for i, x in enumerate(xs)`, `for i, (image, label) in enumerate(test_set)`
                samples = {n.value for n in flatten_targets(item) if isinstance(n, cst.Name)}
                if not samples or (not isinstance(item, cst.Name) and not weak):
                    return None
                return SampleLoop(node, index.value, samples, inner, not weak, rows=rows, weak=weak)
            if func == "zip":
                return self._zip_loop(node, scope, None, target, iterable)
            return None
        if isinstance(iterable, (cst.Name, cst.Attribute)) and isinstance(target, cst.Name):
            if host_array(self.context, iterable):
                return SampleLoop(node, None, {target.value}, None, True, rows=True)
            if self.batches.is_batch(scope, iterable, sequence=True) or shown_tensor(self.context, scope, iterable):
                return SampleLoop(node, None, {target.value}, None, True)
            if self.batches.is_matrix(scope, iterable):
                return SampleLoop(node, None, {target.value}, None, True, rows=True)
            if self._collection(iterable):
                return SampleLoop(node, None, {target.value}, None, False, weak=True)
        if isinstance(target, (cst.Tuple, cst.List)) and self._collection(iterable):
            # `for image, label in test_set`: the parts of one element of a dataset
            names = {e.value.value for e in target.elements if isinstance(e.value, cst.Name)}
            if names and len(names) == len(target.elements):
                return SampleLoop(node, None, names, None, False, weak=True)
        return None

    def _collection(self, iterable: cst.BaseExpression) -> bool:
        """A name or attribute that may hold samples: not a loader (its elements are batches), and not a
        Python list gathered by hand (`data: list`, `samples = [...]`, `random.sample(test_data, k=9)`): a
        handful of samples picked for a plot, or images of different sizes."""
        if isinstance(iterable, cst.Call):
            return self._minibatch(iterable)
        if not isinstance(iterable, (cst.Name, cst.Attribute)) or self.batches.is_loader(iterable):
            return False
        if isinstance(iterable, cst.Name):
            scope = self.scopes.of(iterable)
            param = scope.params.get(iterable.value)
            if param is not None and param.annotation is not None:
                if _LIST_ANNOTATION.search(self.context.code(param.annotation.annotation)):
                    return False
            reaching = self._reaching_tensor(iterable)
            values = [reaching] if reaching is not None else self.scopes.assigned_anywhere(scope, iterable.value)
            for value in values:
                if isinstance(value, cst.Call) and self._minibatch(value):
                    continue
                if isinstance(value, (cst.List, cst.ListComp, cst.Tuple)) or (
                    isinstance(value, cst.Call) and (self.context.dotted(value.func) or "") in _LIST_BUILDERS
                ):
                    return False
        return True

    def _reaching_tensor(self, name: cst.Name) -> Optional[cst.BaseExpression]:
        """The tensor that the assignment the loop reads binds to `name` (`returns = torch.tensor(returns)` after
        `returns = []` was filled): a list gathered by hand and then made a tensor is a tensor where it is iterated."""
        kinds = value_kinds(self.context)
        chosen = kinds.reaching_binding(name, self.context.lookup(name) or [])
        value = chosen.value if chosen is not None and chosen.kind == "assign" else None
        return value if value is not None and kinds.kind(value) in ("tensor", "cpu") else None

    def _minibatch(self, call: cst.Call) -> bool:
        """`random.sample(self.memory, self.batch_size)`: transitions (or samples) drawn as a batch, whose
        count the code names as the batch size; not `random.sample(test_data, k=9)` picked for a plot."""
        if (self.context.qualname(call) or self.context.dotted(call.func) or "") not in ("random.sample", "random.choices"):
            return False
        count = argument(call, "k", 1)
        return count is not None and self.batches.batch_size_name(self.scopes.of(call), count.value)

    def _zip_loop(
        self, node: cst.CSTNode, scope: Scope, index: Optional[str], target: cst.BaseExpression, call: cst.Call
    ) -> Optional[SampleLoop]:
        """`for a, b in zip(x, y)` / `for c in zip(x, y)`: the names (or the positions of `c`) that hold a
        sample of a batch."""
        args = positional(call)
        if len(args) != len(call.args) or len(args) < 2:
            return None
        if any(host_array(self.context, arg.value) for arg in args):
            return None  # rows of a NumPy array: host work
        batch = [
            self.batches.is_batch(scope, arg.value, sequence=True) or shown_tensor(self.context, scope, arg.value)
            for arg in args
        ]
        if not any(batch):
            # `zip(sr, hr)`: a model's output on a batch zipped with labels drawn from the loader
            labels = [self.batches.loader_component(scope, arg.value) for arg in args]
            outputs = [self.batches.output_on_batch(scope, arg.value) for arg in args]
            if any(labels) and any(outputs) and all(l or o for l, o in zip(labels, outputs)):
                if not _keyed(node, flatten_targets(target)):
                    batch = [True] * len(args)  # not `out["boxes"]`: per-image records of varying size
        if not any(batch):
            if not all(self._collection(arg.value) for arg in args) or not isinstance(target, (cst.Tuple, cst.List)):
                return None
            if len(target.elements) != len(args) or not all(isinstance(e.value, cst.Name) for e in target.elements):
                return None
            samples = {element.value.value for element in target.elements}  # type: ignore[union-attr]
            return SampleLoop(node, index, samples, None, False, weak=True)
        # labels drawn from the same loader as a batch they are zipped with hold its samples too
        batch = [is_batch or self.batches.loader_component(scope, arg.value) for arg, is_batch in zip(args, batch)]
        if isinstance(target, (cst.Tuple, cst.List)):
            if len(target.elements) != len(args):
                return None
            samples = {
                element.value.value
                for element, is_batch in zip(target.elements, batch)
                if is_batch and isinstance(element.value, cst.Name)
            }
            return SampleLoop(node, index, samples, None, True) if samples else None
        if isinstance(target, cst.Name):
            if all(batch):
                return SampleLoop(node, index, {target.value}, None, True)
            positions = frozenset(i for i, is_batch in enumerate(batch) if is_batch)
            return SampleLoop(node, index, set(), None, True, {target.value: positions})
        return None

    def _range_loop(self, node: cst.CSTNode, scope: Scope, index: str, call: cst.Call) -> Optional[SampleLoop]:
        args = call.args
        if any(a.keyword is not None or a.star for a in args) or not 1 <= len(args) <= 3:
            return None
        if len(args) == 3 and self.context.literal(args[2].value) != 1:
            return None  # strided: chunks of a batch (micro-batching), not samples
        bound = args[1].value if len(args) >= 2 else args[0].value
        if isinstance(bound, cst.BinaryOperation):
            return None  # range(n - 1), range(n // 2): pairs, windows
        if isinstance(bound, cst.Name) and _POSITIONS.search(bound.value) and not self.batches.batch_size_name(scope, bound):
            return None
        source = self.batches.size_source(scope, bound)
        if source is not None:
            tensor, how = source
            if _keyed_by_index(node, index, tensor):
                return None  # `output[i]["x"]`: each element is a record (the outputs of one layer), not a row
            if how == "inner" and not self.batches.batch_size_name(scope, bound):
                return None  # past the first dimension only when the code says it holds the batch
            if host_array(self.context, tensor) or self.batches.is_matrix(scope, tensor):
                return SampleLoop(node, index, set(), tensor, True, rows=True)  # `x = x.cpu().numpy()`: host rows
            if self.batches.is_batch(scope, tensor, sequence=(how == "len")):
                return SampleLoop(node, index, set(), tensor, True, inner=(how == "inner"))
            if how != "inner" and shown_tensor(self.context, scope, tensor):
                return SampleLoop(node, index, set(), tensor, True)  # its first dimension, whatever made it
            if how != "inner" and self._collection(tensor):
                return SampleLoop(node, index, set(), tensor, False, weak=True)
            return None
        if self.batches.batch_size_name(scope, bound):
            return SampleLoop(node, index, set(), None, False)
        return None


def _keyed(node: cst.CSTNode, targets: list[cst.BaseExpression]) -> bool:
    """The loop reads a target by key (`out["boxes"]`): each element is a record, not a row of a tensor."""
    names = {t.value for t in targets if isinstance(t, cst.Name)}
    return any(isinstance(held, cst.Name) and held.value in names for held in _read_by_key(node))


def _keyed_by_index(node: cst.CSTNode, index: str, sized: cst.BaseExpression) -> bool:
    """The loop reads an element of the value whose size it runs over by its index and then by key
    (`output[i]["x"]` over `range(len(output))`): a list of records; a tensor takes no string index."""
    if not isinstance(sized, cst.Name):
        return False
    for element in _read_by_key(node):
        position = _single_index(element) if isinstance(element, cst.Subscript) else None
        if isinstance(position, cst.Name) and position.value == index:
            if isinstance(element.value, cst.Name) and element.value.value == sized.value:  # type: ignore[union-attr]
                return True
    return False


def _read_by_key(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """What `node` reads by a string key: `out` in `out["boxes"]`, `output[i]` in `output[i]["x"]`."""
    return [
        n.value
        for n in descendants(node)
        if isinstance(n, cst.Subscript) and isinstance(_single_index(n), (cst.SimpleString, cst.FormattedString))
    ]


def _single_index(subscript: cst.Subscript) -> Optional[cst.BaseExpression]:
    """The index of `x[k]` (one index, no slice); None otherwise."""
    if len(subscript.slice) == 1 and isinstance(subscript.slice[0].slice, cst.Index):
        return subscript.slice[0].slice.value
    return None
