"""What is a batch: a tensor whose first dimension indexes samples. A `forward()` input, a loader's batch, a
parameter of a batch-processing function, one annotated `Tensor` or passed a tensor by every caller, a
module's or a torch op's output. Also where a loop's range bound comes from (`x.size(0)`, `len(x)`, a
batch-size name)."""

from __future__ import annotations

import os
import re
from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument, positional
from torchlint.lint.context import Context
from torchlint.lint.names import bound_value, last_name
from torchlint.lint.walk import descendants, semantic_children
from torchlint.semantic import project
from torchlint.semantic.loader_arguments import passed_loader
from torchlint.semantic.loops import is_loader_expr
from torchlint.semantic.memo import CycleSafeMemo, question_stack
from torchlint.semantic.module_outputs import layer_output, one_output, several_outputs
from torchlint.semantic.functions import called_function, returns_of
from torchlint.semantic.sample_callees import TORCH_NOT_WORK, Callees, foreign_function, imported_instance
from torchlint.semantic.sample_scopes import Scope, Scopes
from torchlint.semantic.sample_syntax import whole_slice
from torchlint.semantic.values import value_kinds

_CONTAINERS = (cst.List, cst.ListComp, cst.Tuple, cst.GeneratorExp)

_BATCH_SIZE = re.compile(r"^((\w+_)?(batch_size|bs|bsz|n_batch|nbatch|batchsize|BATCH_SIZE|BATCHSIZE)|num_samples|n_samples|B)$")


_BATCH_PARAM = re.compile(
    r"^(x|xs|inputs?|images|imgs|outputs?|logits|preds?|predictions?|targets?|labels?|y|ys|y_pred|y_true|y_hat|"
    r"yhat|batch|data|embeddings|scores|probs|src|tgt|input_ids|tokens|features|feats|z|h|"
    r"\w+_batch|batch_(?!size|idx|index|num|id)\w+)$"
)


# forward() parameters that are states, not batches.
_STATE_PARAM = re.compile(r"^(hidden|hx|h0|c0|cx|state|states|memory|mem|cache|past.*|rois|boxes|proposals|anchors|edge_index|.*_list|.*s_list)$")

_NON_TENSOR_ANNOTATIONS = re.compile(r"\b(List|list|Tuple|tuple|Dict|dict|Sequence|Iterable|int|float|bool|str|Mapping)\b")

# Methods that keep a tensor a batch of the same samples (batch dimension first).
_KEEP_METHODS = frozenset(
    "to cuda cpu float double half bfloat16 long int bool contiguous detach clone sigmoid relu exp log abs "
    "softmax log_softmax type_as requires_grad_ squeeze".split()
)

# Tensor methods whose result is a tensor (of a tensor).
_TENSOR_RESULTS = frozenset("argmax argmin round sign max min topk sort flatten view reshape".split())

# Data turned into a tensor: its rows are the data's rows.
_FROM_DATA = frozenset(
    "torch.tensor torch.as_tensor torch.from_numpy torch.Tensor torch.FloatTensor torch.LongTensor".split()
)
_SAME_ROWS = frozenset("to cuda cpu float double long".split())
# torch functions that cut a tensor into pieces (a tuple of tensors).
_PIECES = frozenset("chunk split tensor_split unbind split_with_sizes hsplit vsplit dsplit meshgrid".split())


def _may_be_called(text: str, name: str) -> bool:
    """Whether the file's text can hold a call of `name` (`f(`, `self.f (`, `(f)(`, a comment or a line
    continuation between), other than its `def`: a cheap test that passes wherever the syntax tree has such
    a call (a name right after `def` is never a call)."""
    for match in re.finditer(r"\b" + re.escape(name) + r"(?:\s|\\|\)|#[^\n]*\n)*\(", text):
        if not text[max(0, match.start() - 64) : match.start()].rstrip(" \t").endswith("def"):
            return True
    return False


class Batches:
    """Answers, for one file, whether a value is a batch and where a range bound's size comes from."""

    def __init__(self, context: Context, scopes: Scopes, callees: Callees) -> None:
        self.context = context
        self.scopes = scopes
        self.callees = callees
        self._batch_memo: CycleSafeMemo[tuple[int, str], bool] = CycleSafeMemo(False, question_stack(context))
        self._calls: Optional[dict[str, list[cst.Call]]] = None  # calls by the name of the function they run
        self._caller: dict[cst.Call, cst.FunctionDef] = {}  # the function each call is made in

    def size_source(self, scope: Scope, bound: cst.BaseExpression, depth: int = 0) -> Optional[tuple[cst.BaseExpression, str]]:
        """`x` for `x.size(0)`, `x.size()[0]`, `x.shape[0]`, `len(x)`, or a name bound once to one of them
        (also `b, c, h, w = x.shape`)."""
        if depth > 3:
            return None
        if isinstance(bound, cst.Call):
            func = bound.func
            if isinstance(func, cst.Name) and func.value == "len" and len(bound.args) == 1 and not bound.args[0].star:
                return bound.args[0].value, "len"
            if isinstance(func, cst.Attribute) and func.attr.value == "size" and len(bound.args) == 1:
                # any dimension: a sequence-first tensor keeps its samples in dimension 1
                arg = argument(bound, "dim", 0)
                dim = self.context.literal(arg.value) if arg is not None else None
                if isinstance(dim, int):
                    return func.value, "size" if dim == 0 else "inner"
            return None
        if isinstance(bound, cst.Subscript) and len(bound.slice) == 1:
            index = bound.slice[0].slice
            dim = self.context.literal(index.value) if isinstance(index, cst.Index) else None
            if not isinstance(dim, int):
                return None
            value = bound.value
            if isinstance(value, cst.Attribute) and value.attr.value == "shape":
                return value.value, "size" if dim == 0 else "inner"
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size" and not value.args:
                return value.func.value, "size"
            return None
        if isinstance(bound, cst.Name):
            values = scope.assigns.get(bound.value, [])
            unpacks = scope.unpacks.get(bound.value, [])
            if len(values) + len(unpacks) != 1 or bound.value in scope.params or bound.value in scope.loops:
                return None
            if values:
                return self.size_source(scope, values[0], depth + 1)
            value, position = unpacks[0]
            tensor = _shape_owner(self.context, value)
            if position != 0 or tensor is None:
                return None
            return tensor, "size"
        return None

    def batch_size_name(self, scope: Scope, bound: cst.BaseExpression) -> bool:
        if isinstance(bound, cst.Name):
            return bool(_BATCH_SIZE.match(bound.value))
        if isinstance(bound, cst.Attribute):
            return bool(_BATCH_SIZE.match(bound.attr.value)) and bound.attr.value != "B"
        return False

    def is_batch(self, scope: Scope, expr: cst.BaseExpression, *, sequence: bool = False, depth: int = 0) -> bool:
        """True when `expr` is a batch whose first dimension indexes samples.

        `sequence`: the value is used with len() or iterated, where a list of tensors (feature levels,
        variable-size images) would also fit; a forward() parameter then needs tensor evidence."""
        if depth > 6:
            return False
        if isinstance(expr, cst.Name):
            return self._is_batch_name(scope, expr.value, sequence, depth)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _KEEP_METHODS and not self.context.qualname(expr):
                return self.is_batch(scope, func.value, sequence=sequence, depth=depth + 1)  # `x.float()`, not `torch.relu(x)`
            if self._helper_returns_batch(expr):
                return True  # `embed(model, x)` for a function returning what a module computes
            if self.callees.is_module_call(scope, expr):
                if self._several_outputs(scope, expr):
                    return False  # the feature maps of several layers, not one batch
                if not sequence:
                    return True  # a module's output: batch dimension first
                first = positional(expr)
                return bool(first) and self.is_batch(scope, first[0].value, depth=depth + 1)
            qualname = self.context.qualname(expr) or ""
            if qualname.rsplit(".", 1)[-1] in _PIECES:
                return False  # `torch.chunk(x, n, dim=1)`: pieces of a tensor, not its samples
            # a torch op's output (not a factory: those build fresh tensors of any shape)
            return qualname.startswith("torch.") and value_kinds(self.context).is_tensor(expr)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.MatrixMultiply):
            return self.is_batch(scope, expr.left, depth=depth + 1)  # `emb @ emb.t()`: a row per sample of `emb`
        if isinstance(expr, cst.Subscript):
            # batch[0], batch["image"] where `batch` is a whole DataLoader element
            if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                key = expr.slice[0].slice.value
                if isinstance(key, (cst.Integer, cst.SimpleString)) and isinstance(expr.value, cst.Name):
                    return self.loader_element(scope, expr.value.value)
        return False

    def is_matrix(self, scope: Scope, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """An array whose rows are samples, whatever library holds it: `a[:, :-1]` (a two-dimensional
        slice), a sparse matrix (`m.tocsr()`), or a data set turned into a tensor
        (`torch.FloatTensor(X_test)`, `torch.from_numpy(features)`; not a tensor written out as a list)."""
        if depth > 3:
            return False
        if isinstance(expr, cst.Name):
            values = self.scopes.assigned_anywhere(scope, expr.value)
            return len(values) == 1 and self.is_matrix(scope, values[0], depth + 1)
        if isinstance(expr, cst.Subscript):
            return len(expr.slice) >= 2 and whole_slice(expr.slice[0].slice)
        if isinstance(expr, cst.Call) and (self.context.qualname(expr) or "") in _FROM_DATA and expr.args:
            data = expr.args[0].value
            return isinstance(data, (cst.Name, cst.Attribute, cst.Subscript)) or (
                isinstance(data, cst.Call) and self.is_matrix(scope, data, depth + 1)
            )
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in _SAME_ROWS:
                return self.is_matrix(scope, expr.func.value, depth + 1)  # `torch.tensor(x).float().to(device)`
            return expr.func.attr.value in ("tocsr", "toarray", "todense") and not expr.args
        return False

    def _is_batch_name(self, scope: Scope, name: str, sequence: bool, depth: int) -> bool:
        key = (id(scope.node), name + ("/seq" if sequence else ""))
        return self._batch_memo.ask(key, lambda _: self._batch_name_uncached(scope, name, sequence, depth))

    def _batch_name_uncached(self, scope: Scope, name: str, sequence: bool, depth: int) -> bool:
        if any(isinstance(v, _CONTAINERS) for v in scope.assigns.get(name, [])):
            return False  # rebound to a Python list or tuple (chunks, per-level outputs): not one batch tensor
        param = scope.params.get(name)
        if sequence and name not in scope.tensor_used and not self.loader_element(scope, name) and not self._torch_result(scope, name) and not self._moved_tensor(scope, name) and not self._fed_to_layer(scope, name):
            # len(x) / iterating x: a list or tuple (feature levels, heads, per-image targets) fits too,
            # unless x is used as a tensor somewhere (x.shape, x.size(), x.to(...), x: Tensor) or callers
            # pass it one.
            return param is not None and name not in ("self", "cls") and self._callers_pass_tensor(scope, param)
        if param is not None and self._batch_param(scope, name, param, sequence):
            return True
        for iterable, whole in scope.loops.get(name, []):
            if self.is_loader(iterable):
                return True
        for value in scope.assigns.get(name, []):
            if self.is_batch(scope, value, sequence=sequence, depth=depth + 1):
                return True
        for value, _position in scope.unpacks.get(name, []):
            if self._unpacks_loader_element(scope, value):
                return True
        if name not in scope.params and name not in scope.assigns and name not in scope.loops and name not in scope.unpacks:
            outer = self.scopes.outer(scope)
            if outer is not None:
                return self._is_batch_name(outer, name, sequence, depth + 1)
        return False

    def _moved_tensor(self, scope: Scope, name: str) -> bool:
        """`y = batch["label"].to(device)`: bound only to a tensor moved to a device (a list has no `.to`)."""
        values = scope.assigns.get(name, [])
        kinds = value_kinds(self.context)
        return bool(values) and all(
            isinstance(v, cst.Call) and last_name(v.func) in ("to", "cuda") and kinds.is_tensor(v) for v in values
        )

    def _fed_to_layer(self, scope: Scope, name: str) -> bool:
        """`self.encoder(x)` for a torch.nn layer that takes one tensor (`nn.Linear`, an `nn.Sequential` of
        them): `x` is a tensor, not a list of them."""
        assigned = lambda n: self.scopes.assigned_anywhere(scope, n)  # noqa: E731
        return any(
            isinstance(node, cst.Call)
            and node.args
            and isinstance(node.args[0].value, cst.Name)
            and node.args[0].value.value == name
            and not node.args[0].star
            and layer_output(self.context, node, assigned)
            for node in descendants(scope.node)
        )

    def _unpacks_loader_element(self, scope: Scope, value: cst.BaseExpression) -> bool:
        """`x, y = batch` or `x, y = to_device(batch, device)` (a helper given a whole loader element hands
        back its parts), for `batch` drawn from a loader."""
        if isinstance(value, cst.Name):
            return self.loader_element(scope, value.value)
        return isinstance(value, cst.Call) and any(
            isinstance(arg.value, cst.Name) and self.loader_element(scope, arg.value.value)
            for arg in value.args
            if arg.keyword is None and not arg.star
        )

    def _loader_part(self, scope: Scope, value: cst.BaseExpression) -> bool:
        """`batch["label"]`, `batch[1].to(device)`: one part of a whole loader element."""
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _KEEP_METHODS:
            value = value.func.value
        if not (isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.value, cst.Name)):
            return False
        key = value.slice[0].slice
        return (
            isinstance(key, cst.Index)
            and isinstance(key.value, (cst.Integer, cst.SimpleString))
            and self.loader_element(scope, value.value.value)
        )

    def _torch_result(self, scope: Scope, name: str) -> bool:
        """`pred = torch.sigmoid(model(x))`: bound only to what a torch op computes from another tensor, a
        tensor with the same first dimension (not a factory, not pieces, not a stack of several values), or
        to the output of a module of this file that returns one tensor."""
        values = scope.assigns.get(name, [])
        kinds = value_kinds(self.context)
        for value in values:
            if isinstance(value, cst.Call) and (
                one_output(self.context, value, lambda n: self.scopes.assigned_anywhere(scope, n))
                or layer_output(self.context, value, lambda n: self.scopes.assigned_anywhere(scope, n))
            ):
                continue  # `feats = self.encoder(x)` for a module of this file (or torch.nn layers) returning one tensor
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.MatrixMultiply):
                continue  # `sim = emb @ emb.t()`: a product of matrices is one tensor (or array), not a list
            if isinstance(value, cst.Call) and self._helper_returns_batch(value):
                continue  # `emb = embed(model, x)` for a function that returns what a module computes
            qualname = (self.context.qualname(value) or "") if isinstance(value, cst.Call) else ""
            short = qualname.rsplit(".", 1)[-1]
            if not qualname.startswith("torch.") or short in _PIECES or short in TORCH_NOT_WORK or not kinds.is_tensor(value):
                return False
        return bool(values)

    def _helper_returns_batch(self, call: cst.Call) -> bool:
        """`call` runs a function of this file, or of another project file, every return of which is one
        batch computed there: a module's output or a torch op's on a batch (`return F.normalize(model(x))`),
        not a tuple, a list, a stack of several values or pieces."""
        function = called_function(self.context, call)
        batches: Batches = self
        if function is None:
            found = foreign_function(self.context, call.func)
            if found is None:
                return False
            function, batches = found[1], found[0].model.per_sample_loops.batches
        if id(function) in _RETURNS_ASKED:
            return False  # a recursion
        _RETURNS_ASKED.add(id(function))
        try:
            scope = batches.scopes.of_function(function)
            values = [r.value for r in returns_of(function)]
            return bool(values) and all(v is not None and batches._returned_batch(scope, v) for v in values)
        finally:
            _RETURNS_ASKED.discard(id(function))

    def _returned_batch(self, scope: Scope, value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qualname = self.context.qualname(value) or ""
        if qualname.startswith("torch.") and qualname.rsplit(".", 1)[-1] in _PIECES | TORCH_NOT_WORK:
            return False
        return self.is_batch(scope, value)

    def _batch_param(self, scope: Scope, name: str, param: cst.Param, sequence: bool) -> bool:
        if name in ("self", "cls") or _STATE_PARAM.match(name):
            return False
        annotation = param.annotation
        if annotation is not None:
            text = self.context.code(annotation.annotation)
            if _NON_TENSOR_ANNOTATIONS.search(text) and "Tensor" not in text.replace("List[Tensor]", "").replace(
                "List[torch.Tensor]", ""
            ):
                return False
            if re.search(r"(List|list|Tuple|tuple|Sequence)\[", text):
                return False
            if re.fullmatch(r"(torch\.)?Tensor", text.strip()):
                return True  # `x: Tensor` in any function
        if scope.is_forward:
            return not sequence or name in scope.tensor_used or self._fed_to_layer(scope, name)
        if scope.batch_function and _BATCH_PARAM.match(name):
            return not sequence or name in scope.tensor_used or self._fed_to_layer(scope, name)
        return self._callers_pass_tensor(scope, param)

    def device_param(self, scope: Scope, name: str) -> bool:
        """`name` is a parameter of the function `scope`, never rebound there, that every call of it in this
        file passes a tensor which may live on the accelerator (`step(x.to(device), lengths.to(device))`)."""
        param = scope.params.get(name)
        if param is None or name in scope.assigns or name in scope.unpacks or name in scope.loops:
            return False
        return self._callers_pass_tensor(scope, param, device=True)

    def _callers_pass_tensor(self, scope: Scope, param: cst.Param, device: bool = False) -> bool:
        """Every call of the function in this file passes a tensor for `param` (and there is one); with
        `device`, one that may live on the accelerator (not a host tensor)."""
        function = scope.node
        if not isinstance(function, cst.FunctionDef) or param.star:
            return False
        params = [p.name.value for p in function.params.params]
        method = self.context.enclosing(function, cst.ClassDef) is not None
        if method:
            params = params[1:]  # self
        if param.name.value not in params:
            return False
        position = params.index(param.name.value)
        if not _may_be_called(self.context.source.text, function.name.value):
            # no call of it in the file: a top-level function, or a method of a top-level class, that the
            # training code of other files calls
            if device:
                return False
            if not method:
                return function in self.context.module.body and _passed_tensor_elsewhere(
                    self.context, function.name.value, param.name.value, position
                )
            cls = self.context.enclosing(function, cst.ClassDef)
            return cls in self.context.module.body and _passed_tensor_to_method(
                self.context, cls.name.value, function.name.value, param.name.value, position  # type: ignore[union-attr]
            )
        found = False
        for call in self._calls_of(function.name.value):
            if isinstance(call.func, cst.Attribute) != method:
                continue
            passed = argument(call, param.name.value, position)
            if passed is None or not self._tensor_value(call, passed.value, device):
                return False
            found = True
        return found

    def _tensor_value(self, at: cst.CSTNode, value: cst.BaseExpression, device: bool = False) -> bool:
        """A tensor (on any device, or with `device` one that may live on the accelerator), directly or through
        the one assignment of a name in the caller."""
        kinds = value_kinds(self.context)
        wanted = ("tensor",) if device else ("tensor", "cpu")
        caller = self._caller.get(at)
        scope = self.scopes.of_function(caller if caller is not None else self.context.module)
        assigned = scope.assigns.get(value.value, []) if isinstance(value, cst.Name) else [value]
        if len(assigned) == 1 and isinstance(assigned[0], cst.Call) and self._several_outputs(scope, assigned[0]):
            return False  # `feats = self.vgg(x)` returning the features of several layers
        if kinds.kind(value) in wanted:
            return True
        return isinstance(value, cst.Name) and len(assigned) == 1 and kinds.kind(assigned[0]) in wanted

    def _several_outputs(self, scope: Scope, call: cst.Call) -> bool:
        """A module of this file whose forward returns several tensors (per-layer features)."""
        return several_outputs(self.context, call, lambda name: self.scopes.assigned_anywhere(scope, name))

    def _calls_of(self, name: str) -> list[cst.Call]:
        """Calls in this file of a function or method called `name` (`f(...)`, `self.f(...)`)."""
        if self._calls is None:
            self._calls = {}
            # One walk, carrying the innermost function whose body holds each node (its caller).
            stack: list[tuple[cst.CSTNode, Optional[cst.FunctionDef]]] = [
                (child, None) for child in reversed(semantic_children(self.context.module))
            ]
            while stack:
                node, caller = stack.pop()
                if type(node) is cst.Call:  # exact type: see `walk.is_a`
                    if caller is not None:
                        self._caller[node] = caller
                    func = node.func
                    if isinstance(func, cst.Name) or (
                        isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
                    ):
                        self._calls.setdefault(last_name(func) or "", []).append(node)
                if type(node) is cst.FunctionDef:
                    body = node.body
                    stack.extend((child, node if child is body else caller) for child in reversed(semantic_children(node)))
                else:
                    stack.extend((child, caller) for child in reversed(semantic_children(node)))
        return self._calls.get(name, [])

    def loader_element(self, scope: Scope, name: str) -> bool:
        """`batch` in `for batch in loader` (a whole element: a tensor, a tuple or a dict of batch tensors)."""
        for iterable, whole in scope.loops.get(name, []):
            if whole and self.is_loader(iterable):
                return True
        if name not in scope.loops and name not in scope.assigns and name not in scope.params:
            outer = self.scopes.outer(scope)
            if outer is not None:
                return self.loader_element(outer, name)
        return False

    def output_on_batch(self, scope: Scope, expr: cst.BaseExpression) -> bool:
        """`sr` in `sr = model(lr)`: always a module's output on a batch (not per-layer features), one row
        per sample of the batch."""
        if not isinstance(expr, cst.Name):
            return False
        values = scope.assigns.get(expr.value, [])
        return bool(values) and all(
            isinstance(v, cst.Call) and self.callees.is_module_call(scope, v) and self.is_batch(scope, v, sequence=True)
            for v in values
        )

    def model_output(self, scope: Scope, expr: cst.BaseExpression) -> bool:
        """`pred` in `pred = m(x).argmax(dim=1)`: bound only to what a module computes on a batch (through
        tensor methods that keep it a tensor), whatever the module is called."""
        values = scope.assigns.get(expr.value, []) if isinstance(expr, cst.Name) else [expr]
        if not values:
            return False
        for value in values:
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
                value.func.attr.value in _KEEP_METHODS or value.func.attr.value in _TENSOR_RESULTS
            ):
                value = value.func.value
            if not (isinstance(value, cst.Call) and self.callees.is_module_call(scope, value)):
                return False
            first = positional(value)
            if not first or not self.is_batch(scope, first[0].value) or self._several_outputs(scope, value):
                return False
        return True

    def loader_component(self, scope: Scope, expr: cst.BaseExpression) -> bool:
        """`y` in `for x, y in loader` or `x, y = batch` (one part of a loader's element: labels, targets),
        which may be a list as well as a tensor."""
        if not isinstance(expr, cst.Name):
            return False
        name = expr.value
        if any(not whole and self.is_loader(iterable) for iterable, whole in scope.loops.get(name, [])):
            return True
        if any(self._unpacks_loader_element(scope, value) for value, _ in scope.unpacks.get(name, [])):
            return True
        values = scope.assigns.get(name, [])
        if values and all(self._loader_part(scope, value) for value in values):
            return True
        if name not in scope.loops and name not in scope.assigns and name not in scope.params and name not in scope.unpacks:
            outer = self.scopes.outer(scope)
            if outer is not None:
                return self.loader_component(outer, expr)
        return False

    def is_loader(self, iterable: cst.BaseExpression) -> bool:
        """A DataLoader by what builds or binds it, or a parameter every caller hands one."""
        if is_loader_expr(self.context, iterable):
            return True
        while isinstance(iterable, cst.Call) and iterable.args and (
            last_name(iterable.func) == "enumerate" or (self.context.qualname(iterable) or "").startswith("tqdm.")
        ):
            iterable = iterable.args[0].value  # `enumerate(source)`, `tqdm(source)`
        return passed_loader(self.context, iterable)


def _shape_owner(context: Context, value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x` for `x.shape`, `x.size()`, or their leading dimensions `x.shape[:2]`, `x.size()[0:3]`: what
    `b, c = ...` unpacks the sizes of, the first one its batch size."""
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Slice):
        part = value.slice[0].slice
        if part.lower is not None and context.literal(part.lower) != 0 or part.step is not None:
            return None
        value = value.value
    if isinstance(value, cst.Attribute) and value.attr.value == "shape":
        return value.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size" and not value.args:
        return value.func.value
    return None


def _passed_tensor_elsewhere(context: Context, function: str, param: str, position: int) -> bool:
    """Every call of the top-level `function` in the project files that import this one passes a tensor
    for `param` (`sample_loss(model(x), y)`), and there is one."""
    path = context.source.path
    return _sites_pass_tensor((path, function, param), lambda: project.call_sites(path, function), param, position)


def _passed_tensor_to_method(context: Context, cls: str, method: str, param: str, position: int) -> bool:
    """Every call `obj.method(...)`, in the project files that import this one, where `obj` is bound once to
    an instance of the class `cls` of this file (`scorer = Scorer()`, then `scorer.score(model(x), y)`),
    passes a tensor for `param`, and there is one."""
    path = context.source.path

    def sites() -> list[project.CallSite]:
        return [
            site
            for site in project.method_call_sites(path, method)
            if _instance_of(site.summary.context, site.call.func.value, path, cls)  # type: ignore[attr-defined]
        ]

    return _sites_pass_tensor((path, f"{cls}.{method}", param), sites, param, position)


def _sites_pass_tensor(key: tuple[str, str, str], find_sites, param: str, position: int) -> bool:  # noqa: ANN001
    """Every call site `find_sites()` lists passes a tensor for `param`, and there is one."""
    if key in _ASKING or len(_ASKING) > 4:
        return False  # callers that call back into this question (import cycles), or a chain too long to follow
    _ASKING.add(key)
    try:
        sites = find_sites()
        for site in sites:
            passed = argument(site.call, param, position)
            if passed is None or not _tensor_in(site.summary.context, passed.value):
                return False
        return bool(sites)
    finally:
        _ASKING.discard(key)


def _instance_of(context: Context, receiver: cst.BaseExpression, path: str, cls: str) -> bool:
    """`receiver` is a name bound once, in `context`'s file, to an instance of the class `cls` of the
    project file `path`."""
    found = imported_instance(context, receiver)
    return found is not None and found[1] == cls and os.path.realpath(found[0].path) == os.path.realpath(path)


# The functions whose returns are being judged, to cut recursions (across files too).
_RETURNS_ASKED: set[int] = set()

# The (file, function, parameter) questions being answered across files, to cut cycles.
_ASKING: set[tuple[str, str, str]] = set()


def semantic_model(context: Context):  # type: ignore[no-untyped-def]
    from torchlint.semantic.model import semantic_model as model  # the model holds this module: import when asked

    return model(context)


def _tensor_in(context: Context, value: cst.BaseExpression) -> bool:
    """A tensor in the calling file: by its own kind, or by the values its name was bound to."""
    kinds = value_kinds(context)
    if not isinstance(value, cst.Name):
        return kinds.kind(value) in ("tensor", "cpu")
    # each binding a plain assignment (`out = model(x)`) or one element of a tuple assigned element by
    # element (`x, y = x.to(device), y.to(device)`), besides the loop over a loader that first bound it: not
    # one part of an unpacked result (`real_outs, fake_outs, _, _ = discriminators(y, y_hat)`, lists)
    values = []
    bindings = context.lookup(value) or ()
    if len(bindings) == 1 and bindings[0].kind == "param" or len(bindings) == 1 and bindings[0].kind == "assign":
        # a parameter its own callers pass a tensor, or what a module computes on a batch, in that file
        samples = semantic_model(context).per_sample_loops
        scope = samples.scopes.of(value)
        if bindings[0].kind == "param" and isinstance(bindings[0].node, cst.Param):
            if samples.batches._callers_pass_tensor(scope, bindings[0].node):
                return True
        elif samples.batches.model_output(scope, value):
            return True
    for binding in bindings:
        node = getattr(binding, "node", None)
        if isinstance(node, cst.For) and is_loader_expr(context, node.iter):
            continue
        if not isinstance(node, cst.Assign) or len(node.targets) != 1:
            return False
        bound = bound_value(node.targets[0].target, node.value, value.value)
        if bound is None:
            return False
        values.append(bound)
    return bool(values) and all(kinds.kind(v) in ("tensor", "cpu") for v in values)
