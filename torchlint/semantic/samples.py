"""Per-sample loops: Python loops (and comprehensions) over the samples of a batch that run a module, a
loss or tensor math once per sample and collect the results, where one batched call would do.

A batch is a tensor the code shows to be one: a `forward()` input, a loader's batch, a parameter of a
batch-processing function, a value with a batch-sized first dimension. Loops over layers, time steps with a
carried state, decoding steps and work of varying size per sample are not per-sample loops.
"""


from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional, Union

import libcst as cst

from torchlint.lint.calls import argument, positional
from torchlint.lint.context import Context
from torchlint.lint.names import flatten_targets, last_name
from torchlint.lint.walk import descendants, scope_nodes, semantic_children
from torchlint.semantic.functions import method_named
from torchlint.semantic.loops import is_loader_expr
from torchlint.semantic.objects import MODULE, objects
from torchlint.semantic.values import value_kinds

# What an iterable or a callee is called, when the spelling is the only evidence.
_MODEL = re.compile(
    r"(^|_)(model|models|net|network|encoder|decoder|classifier|backbone|criterion|loss_fn|loss_func|lossfn|"
    r"loss_function|teacher|student|generator|discriminator|critic|actor|policy|mlp|fc|head|embed|embedding|"
    r"projector|projection|predictor|regressor|transformer|bert|vae|unet|cnn|rnn|lstm|gru|conv)\d*$",
    re.IGNORECASE,
)

# Methods of a model that run it.
_MODEL_METHODS = frozenset("forward predict predict_proba encode embed infer inference".split())

_CONTAINERS = (cst.List, cst.ListComp, cst.Tuple, cst.GeneratorExp)

_BATCH_SIZE = re.compile(r"^((\w+_)?(batch_size|bs|bsz|n_batch|nbatch|batchsize)|num_samples|n_samples|B)$")

# Functions whose tensor parameters are batches (besides `forward`).
_BATCH_FUNCTION = re.compile(r"^(forward|__call__)$|loss|criterion|(^|_)(train|training|eval|evaluate|validate|validation|test)(_|$)|(^|_)step$|predict|infer", re.IGNORECASE)

_BATCH_PARAM = re.compile(
    r"^(x|xs|inputs?|images|imgs|outputs?|logits|preds?|predictions?|targets?|labels?|y|ys|y_pred|y_true|y_hat|"
    r"yhat|batch|data|embeddings|scores|probs|src|tgt|input_ids|tokens|features|feats|z|h|"
    r"\w+_batch|batch_(?!size|idx|index|num|id)\w+)$"
)

# A docstring that says the function takes batches ("Dice coeff for batches", "x: a batch of images").
_BATCH_DOC = re.compile(r"\bbatch(es)?\b", re.IGNORECASE)

# forward() parameters that are states, not batches.
_STATE_PARAM = re.compile(r"^(hidden|hx|h0|c0|cx|state|states|memory|mem|cache|past.*|rois|boxes|proposals|anchors|edge_index|.*_list|.*s_list)$")

_NON_TENSOR_ANNOTATIONS = re.compile(r"\b(List|list|Tuple|tuple|Dict|dict|Sequence|Iterable|int|float|bool|str|Mapping)\b")

# Methods that keep a tensor a batch of the same samples (batch dimension first).
_KEEP_METHODS = frozenset(
    "to cuda cpu float double half bfloat16 long int bool contiguous detach clone sigmoid relu exp log abs "
    "softmax log_softmax type_as requires_grad_ squeeze".split()
)

# Tensor methods that compute (work on one sample), as opposed to reading metadata or converting to Python.
_MATH_METHODS = frozenset(
    """
    sum mean std var prod exp log log1p sqrt rsqrt abs sigmoid tanh relu softmax log_softmax matmul mm bmm mv dot
    pow clamp clip norm argmax argmin amax amin max min cumsum logsumexp mul add sub div eq ne gt lt ge le
    masked_fill gather topk sort einsum outer square neg reciprocal lerp where
    """.split()
)

# Tensor methods that multiply: their presence shows a helper computes with tensors.
_PRODUCTS = frozenset("dot mm bmm matmul mv einsum".split())

_NOT_WORK = frozenset(
    "item tolist numpy size dim numel shape dtype device type is_cuda nelement data_ptr element_size".split()
)

_CONVERSIONS = frozenset("item tolist numpy size dim numel".split())

_BUILTIN_NOT_WORK = frozenset(
    "print len str repr int float bool isinstance type format open list tuple dict set enumerate zip range "
    "sorted reversed any all id hash round abs min max sum map filter iter next getattr setattr hasattr".split()
)

# torch functions that are not per-sample computation (creation, I/O, conversion, shape-only).
_TORCH_NOT_WORK = frozenset(
    """
    tensor as_tensor from_numpy save load zeros ones empty full arange linspace rand randn randint randperm
    zeros_like ones_like empty_like full_like is_tensor numel manual_seed no_grad enable_grad set_grad_enabled
    inference_mode device stack cat concat concatenate hstack vstack Size get_default_dtype
    """.split()
)

# Per-sample results of varying size: the loop cannot be replaced by one batched call.
_VARIABLE_LENGTH = frozenset(
    "nonzero argwhere unique unique_consecutive masked_select nms batched_nms non_max_suppression "
    "split_with_sizes tolist".split()
)


@dataclass
class _Scope:
    """Name facts for one function (or the module): how each name is bound."""

    node: cst.CSTNode
    params: dict[str, cst.Param] = field(default_factory=dict)
    assigns: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)  # name = value
    unpacks: dict[str, list[tuple[cst.BaseExpression, int]]] = field(default_factory=dict)  # a, b = value
    loops: dict[str, list[tuple[cst.BaseExpression, bool]]] = field(default_factory=dict)  # for target in iterable
    tensor_used: set[str] = field(default_factory=set)  # names used as a tensor (x.size(), x.shape, x.view(...))
    batch_function: bool = False
    is_forward: bool = False
    methods: frozenset[str] = frozenset()  # methods of the enclosing class (self.<name>(...) is not a module)


@dataclass
class _Loop:
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



class PerSampleLoops:
    """Decides, per loop of one file, whether it runs per sample of a batch (shared by the file's rules)."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._scopes: dict[cst.CSTNode, _Scope] = {}
        self._batch_memo: dict[tuple[int, str], bool] = {}
        self._class_methods: dict[cst.CSTNode, frozenset[str]] = {}
        self._helpers: Optional[dict[str, bool]] = None  # module-level functions: do they compute with torch?
        self._calls: Optional[dict[str, list[cst.Call]]] = None  # calls by the name of the function they run
        self._caller: dict[cst.Call, cst.FunctionDef] = {}  # the function each call is made in

    # ------------------------------------------------------------------------------------------
    # the loop header: is this a loop over the samples of a batch?
    def candidate(self, node: cst.CSTNode, target: cst.BaseExpression, iterable: cst.BaseExpression) -> Optional[_Loop]:
        scope = self._scope_of(node)
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
                rows = False
                if not self._is_batch(scope, inner, sequence=True):
                    if not self._is_matrix(scope, inner):
                        return None
                    rows = True
                samples = {item.value} if isinstance(item, cst.Name) else set()
                if not samples:
                    return None
                return _Loop(node, index.value, samples, None, True, rows=rows)
            if func == "zip":
                return self._zip_loop(node, scope, None, target, iterable)
            return None
        if isinstance(iterable, (cst.Name, cst.Attribute)) and isinstance(target, cst.Name):
            if self._is_batch(scope, iterable, sequence=True):
                return _Loop(node, None, {target.value}, None, True)
        return None

    def _zip_loop(
        self, node: cst.CSTNode, scope: _Scope, index: Optional[str], target: cst.BaseExpression, call: cst.Call
    ) -> Optional[_Loop]:
        """`for a, b in zip(x, y)` / `for c in zip(x, y)`: the names (or the positions of `c`) that hold a
        sample of a batch."""
        args = positional(call)
        if len(args) != len(call.args) or len(args) < 2:
            return None
        batch = [self._is_batch(scope, arg.value, sequence=True) for arg in args]
        if not any(batch):
            return None
        if isinstance(target, (cst.Tuple, cst.List)):
            if len(target.elements) != len(args):
                return None
            samples = {
                element.value.value
                for element, is_batch in zip(target.elements, batch)
                if is_batch and isinstance(element.value, cst.Name)
            }
            return _Loop(node, index, samples, None, True) if samples else None
        if isinstance(target, cst.Name):
            if all(batch):
                return _Loop(node, index, {target.value}, None, True)
            positions = frozenset(i for i, is_batch in enumerate(batch) if is_batch)
            return _Loop(node, index, set(), None, True, {target.value: positions})
        return None

    def _range_loop(self, node: cst.CSTNode, scope: _Scope, index: str, call: cst.Call) -> Optional[_Loop]:
        args = call.args
        if any(a.keyword is not None or a.star for a in args) or not 1 <= len(args) <= 3:
            return None
        if len(args) == 3 and self.context.literal(args[2].value) != 1:
            return None  # strided: chunks of a batch (micro-batching), not samples
        bound = args[1].value if len(args) >= 2 else args[0].value
        if isinstance(bound, cst.BinaryOperation):
            return None  # range(n - 1), range(n // 2): pairs, windows
        source = self._size_source(scope, bound)
        if source is not None:
            tensor, how = source
            if how == "inner" and not self._batch_size_name(scope, bound):
                return None  # past the first dimension only when the code says it holds the batch
            if self._is_batch(scope, tensor, sequence=(how == "len")):
                return _Loop(node, index, set(), tensor, True, inner=(how == "inner"))
            if self._is_matrix(scope, tensor):
                return _Loop(node, index, set(), tensor, True, rows=True)
            return None
        if self._batch_size_name(scope, bound):
            return _Loop(node, index, set(), None, False)
        return None

    def _size_source(self, scope: _Scope, bound: cst.BaseExpression, depth: int = 0) -> Optional[tuple[cst.BaseExpression, str]]:
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
                return self._size_source(scope, values[0], depth + 1)
            value, position = unpacks[0]
            if position != 0:
                return None
            if isinstance(value, cst.Attribute) and value.attr.value == "shape":
                return value.value, "size"
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size" and not value.args:
                return value.func.value, "size"
        return None

    def _batch_size_name(self, scope: _Scope, bound: cst.BaseExpression) -> bool:
        if isinstance(bound, cst.Name):
            return bool(_BATCH_SIZE.match(bound.value))
        if isinstance(bound, cst.Attribute):
            return bool(_BATCH_SIZE.match(bound.attr.value)) and bound.attr.value != "B"
        return False

    # ------------------------------------------------------------------------------------------
    # is a value a batch?
    def _is_batch(self, scope: _Scope, expr: cst.BaseExpression, *, sequence: bool = False, depth: int = 0) -> bool:
        """True when `expr` is a batch whose first dimension indexes samples.

        `sequence`: the value is used with len() or iterated, where a list of tensors (feature levels,
        variable-size images) would also fit; a forward() parameter then needs tensor evidence."""
        if depth > 6:
            return False
        if isinstance(expr, cst.Name):
            return self._is_batch_name(scope, expr.value, sequence, depth)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _KEEP_METHODS:
                return self._is_batch(scope, func.value, sequence=sequence, depth=depth + 1)
            if self._is_module_call(scope, expr):
                if not sequence:
                    return True  # a module's output: batch dimension first
                first = positional(expr)
                return bool(first) and self._is_batch(scope, first[0].value, depth=depth + 1)
            qualname = self.context.qualname(expr) or ""
            # a torch op's output (not a factory: those build fresh tensors of any shape)
            return qualname.startswith("torch.") and value_kinds(self.context).is_tensor(expr)
        if isinstance(expr, cst.Subscript):
            # batch[0], batch["image"] where `batch` is a whole DataLoader element
            if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                key = expr.slice[0].slice.value
                if isinstance(key, (cst.Integer, cst.SimpleString)) and isinstance(expr.value, cst.Name):
                    return self._loader_element(scope, expr.value.value)
        return False

    def _is_matrix(self, scope: _Scope, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """An array whose rows are samples, whatever library holds it: `a[:, :-1]` (a two-dimensional
        slice) or a sparse matrix (`m.tocsr()`)."""
        if depth > 3:
            return False
        if isinstance(expr, cst.Name):
            values = self._assigned_anywhere(scope, expr.value)
            return len(values) == 1 and self._is_matrix(scope, values[0], depth + 1)
        if isinstance(expr, cst.Subscript):
            return len(expr.slice) >= 2 and _whole_slice(expr.slice[0].slice)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            return expr.func.attr.value in ("tocsr", "toarray", "todense") and not expr.args
        return False

    def _is_batch_name(self, scope: _Scope, name: str, sequence: bool, depth: int) -> bool:
        key = (id(scope.node), name + ("/seq" if sequence else ""))
        if key in self._batch_memo:
            return self._batch_memo[key]
        self._batch_memo[key] = False  # recursion guard
        found = self._batch_name_uncached(scope, name, sequence, depth)
        self._batch_memo[key] = found
        return found

    def _batch_name_uncached(self, scope: _Scope, name: str, sequence: bool, depth: int) -> bool:
        if any(isinstance(v, _CONTAINERS) for v in scope.assigns.get(name, [])):
            return False  # rebound to a Python list or tuple (chunks, per-level outputs): not one batch tensor
        param = scope.params.get(name)
        if sequence and name not in scope.tensor_used and not self._loader_element(scope, name):
            # len(x) / iterating x: a list or tuple (feature levels, heads, per-image targets) fits too,
            # unless x is used as a tensor somewhere (x.shape, x.size(), x.to(...), x: Tensor) or callers
            # pass it one.
            return param is not None and name not in ("self", "cls") and self._callers_pass_tensor(scope, param)
        if param is not None and self._batch_param(scope, name, param, sequence):
            return True
        for iterable, whole in scope.loops.get(name, []):
            if self._is_loader(scope, iterable):
                return True
        for value in scope.assigns.get(name, []):
            if self._is_batch(scope, value, sequence=sequence, depth=depth + 1):
                return True
        for value, _position in scope.unpacks.get(name, []):
            if isinstance(value, cst.Name) and self._loader_element(scope, value.value):
                return True
        if name not in scope.params and name not in scope.assigns and name not in scope.loops and name not in scope.unpacks:
            outer = self._outer_scope(scope)
            if outer is not None:
                return self._is_batch_name(outer, name, sequence, depth + 1)
        return False

    def _batch_param(self, scope: _Scope, name: str, param: cst.Param, sequence: bool) -> bool:
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
            if sequence and name not in scope.tensor_used:
                return False
            return True
        if scope.batch_function and _BATCH_PARAM.match(name):
            return not sequence or name in scope.tensor_used
        return self._callers_pass_tensor(scope, param)

    def _callers_pass_tensor(self, scope: _Scope, param: cst.Param) -> bool:
        """Every call of the function in this file passes a tensor for `param` (and there is one)."""
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
        found = False
        for call in self._calls_of(function.name.value):
            if isinstance(call.func, cst.Attribute) != method:
                continue
            passed = argument(call, param.name.value, position)
            if passed is None or not self._tensor_value(call, passed.value):
                return False
            found = True
        return found

    def _tensor_value(self, at: cst.CSTNode, value: cst.BaseExpression) -> bool:
        """A tensor (on any device), directly or through the one assignment of a name in the caller."""
        kinds = value_kinds(self.context)
        if kinds.kind(value) in ("tensor", "cpu"):
            return True
        if isinstance(value, cst.Name):
            caller = self._caller.get(at)
            scope = self._scopes.get(caller) if caller is not None else None
            if caller is not None and scope is None:
                scope = self._scopes[caller] = self._build_scope(caller)
            assigned = (scope or self._scope_of(self.context.module)).assigns.get(value.value, [])
            return len(assigned) == 1 and kinds.kind(assigned[0]) in ("tensor", "cpu")
        return False

    def _calls_of(self, name: str) -> list[cst.Call]:
        """Calls in this file of a function or method called `name` (`f(...)`, `self.f(...)`)."""
        if self._calls is None:
            self._calls = {}
            for node in descendants(self.context.module):
                if isinstance(node, cst.Call):
                    func = node.func
                    if isinstance(func, cst.Name) or (
                        isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
                    ):
                        self._calls.setdefault(last_name(func) or "", []).append(node)
                elif isinstance(node, cst.FunctionDef):
                    for inner in descendants(node.body):  # outer functions first: the innermost one wins
                        if isinstance(inner, cst.Call):
                            self._caller[inner] = node
        return self._calls.get(name, [])

    def _loader_element(self, scope: _Scope, name: str) -> bool:
        """`batch` in `for batch in loader` (a whole element: a tensor, a tuple or a dict of batch tensors)."""
        for iterable, whole in scope.loops.get(name, []):
            if whole and self._is_loader(scope, iterable):
                return True
        if name not in scope.loops and name not in scope.assigns and name not in scope.params:
            outer = self._outer_scope(scope)
            if outer is not None:
                return self._loader_element(outer, name)
        return False

    def _is_loader(self, scope: _Scope, iterable: cst.BaseExpression) -> bool:
        return is_loader_expr(self.context, iterable)

    def _assigned_anywhere(self, scope: _Scope, name: str) -> list[cst.BaseExpression]:
        current: Optional[_Scope] = scope
        while current is not None:
            if name in current.assigns or name in current.params or name in current.loops:
                return current.assigns.get(name, [])
            current = self._outer_scope(current)
        return []

    # ------------------------------------------------------------------------------------------
    # callees
    def _is_module_call(self, scope: _Scope, call: cst.Call) -> bool:
        """`self.head(x)`, `model(x)`, `criterion(out, y)`, an `nn.Linear` instance: a module or loss call."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            attr = func.attr.value
            return attr not in scope.methods and not attr.startswith("_") and bool(
                _MODEL.search(attr) or self._self_module(scope, attr)
            )
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            receiver = func.value
            if isinstance(receiver, cst.Call) and isinstance(receiver.func, (cst.Name, cst.Attribute)):
                # `DiceCoeff().forward(a, b)`: a module or an autograd Function built and run on the spot
                written = self.context.dotted(receiver.func) or ""
                return written.rsplit(".", 1)[-1][:1].isupper()
            return isinstance(receiver, (cst.Name, cst.Attribute)) and self._is_module_call(
                scope, cst.Call(func=receiver)
            )
        if isinstance(func, cst.Name):
            if _MODEL.search(func.value):
                return True
            for value in self._assigned_anywhere(scope, func.value):
                if isinstance(value, cst.Call) and self._nn_module_class(value):
                    return True
            return False
        if isinstance(func, cst.Attribute) and isinstance(func.value, (cst.Name, cst.Attribute)):
            if self.context.qualname(func) is not None:
                return False
            if func.attr.value in _MODEL_METHODS and isinstance(func.value, cst.Name) and _MODEL.search(func.value.value):
                return True  # `model.predict(x)`, `net.forward(x)`
            return bool(_MODEL.search(func.attr.value)) and func.attr.value.lower() not in ("head", "conv")
        return False

    def _tensor_helper(self, call: cst.Call) -> bool:
        """`dice_coeff(a, b)` for a function of this module that computes with torch (`torch.dot`, `F.*`) and
        has no per-sample work of varying size."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            # `self.score(h, enc[i])`: a method of the class that computes with torch
            cls = self.context.enclosing(call, cst.ClassDef)
            method = method_named(cls, func.attr.value) if cls is not None else None
            return method is not None and self._computes_with_torch(method)
        if not isinstance(func, cst.Name):
            return False
        helpers = self._helpers
        if helpers is None:
            helpers = self._helpers = {}
            for statement in self.context.module.body:
                if isinstance(statement, cst.FunctionDef):
                    helpers[statement.name.value] = self._computes_with_torch(statement)
        return helpers.get(func.value, False)

    def _computes_with_torch(self, function: cst.FunctionDef) -> bool:
        computes = False
        for node in descendants(function.body):
            if not isinstance(node, cst.Call):
                continue
            if last_name(node.func) in _VARIABLE_LENGTH:
                return False
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in _PRODUCTS:
                computes = True  # `h.dot(e)`, `q.matmul(k)`
            elif self._self_module_call(function, node):
                computes = True  # `self.attn(e)`
            qualname = self.context.qualname(node) or ""
            if qualname.startswith("torch.nn.functional.") or (
                qualname.startswith("torch.") and qualname.count(".") == 1
                and qualname.rsplit(".", 1)[1] not in _TORCH_NOT_WORK
            ):
                computes = True
        return computes

    def _self_module_call(self, function: cst.FunctionDef, call: cst.Call) -> bool:
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return False
        cls = self.context.enclosing(function, cst.ClassDef)
        return cls is not None and any(
            isinstance(value, cst.Call) and self._nn_module_class(value)
            for value in self._class_self_assigns(cls).get(func.attr.value, [])
        )

    def _nn_module_class(self, call: cst.Call) -> bool:
        """A module built here (a container of modules is not one that computes)."""
        qualname = self.context.qualname(call) or ""
        return objects(self.context).kind(call) == MODULE and not qualname.endswith(("ModuleList", "ModuleDict"))
    def _self_module(self, scope: _Scope, attr: str) -> bool:
        """`self.attr = nn.Something(...)` somewhere in the enclosing class."""
        cls = self.context.enclosing(scope.node, cst.ClassDef)
        if cls is None:
            return False
        for assigned in self._class_self_assigns(cls).get(attr, []):
            if isinstance(assigned, cst.Call) and self._nn_module_class(assigned):
                return True
        return False

    def _class_self_assigns(self, cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression]]:
        return objects(self.context).self_assignments(cls)
    # ------------------------------------------------------------------------------------------
    # the loop body
    def body_is_per_sample(self, loop: _Loop, body: cst.CSTNode) -> bool:
        scope = self._scope_of(loop.node)
        statements = list(_statements(body))
        nodes = list(descendants(body))
        if any(isinstance(n, (cst.Break, cst.Return, cst.Yield, cst.Await, cst.Raise)) for n in nodes):
            return False
        # Per-sample work of varying size, or sequential updates: not a batch computation in disguise.
        for node in nodes:
            if isinstance(node, cst.Call):
                name = last_name(node.func)
                if name in _VARIABLE_LENGTH or name in ("step", "zero_grad", "backward", "generate", "beam_search", "decode"):
                    return False
                if name == "where" and len(node.args) == 1:
                    return False
        tainted = set(loop.samples)
        sample_roots = self._sample_roots(loop, scope, nodes)
        if self._varying_size(loop, nodes):
            return False
        if loop.index is not None and not sample_roots and not loop.samples and not loop.items:
            return False
        if loop.index is not None and not loop.evidence and not sample_roots:
            return False
        helper = _Body(self, scope, loop, tainted, sample_roots)
        if not helper.scan(statements):
            return False
        if loop.rows and not any(isinstance(n, cst.Call) and helper.runs_model_on_sample(n) for n in nodes):
            return False
        return helper.collected

    def _varying_size(self, loop: _Loop, nodes: list[cst.CSTNode]) -> bool:
        """A slice bounded by a per-sample value (`x[i, :lengths[i]]`) or a boolean mask (`x[i][x[i] > 0]`):
        per-sample pieces of different sizes."""
        names = set(loop.samples)
        if loop.index is not None:
            names.add(loop.index)
        # values computed per iteration (`st = labels[i].argmax().item()`) bound a slice differently per sample
        for node in nodes:
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    names.update(_flatten_names(target.target))
        for node in nodes:
            if not isinstance(node, cst.Subscript):
                continue
            for position, element in enumerate(node.slice):
                part = element.slice
                if isinstance(part, cst.Slice):
                    if position == 0 and _indexes_sample(node, loop.index):
                        continue
                    for bound in (part.lower, part.upper, part.step):
                        if bound is not None and not isinstance(bound, (cst.Integer, cst.UnaryOperation)) and _names_in(bound):
                            if _names_in(bound) & names or any(
                                isinstance(n, cst.Subscript) for n in [bound, *descendants(bound)]
                            ):
                                return True
                elif isinstance(part, cst.Index) and isinstance(part.value, (cst.Comparison, cst.BinaryOperation, cst.UnaryOperation)):
                    operator = getattr(part.value, "operator", None)
                    if isinstance(part.value, cst.Comparison) or isinstance(operator, (cst.BitAnd, cst.BitOr, cst.BitInvert)):
                        return True
        return False

    def _sample_roots(self, loop: _Loop, scope: _Scope, nodes: list[cst.CSTNode]) -> set[str]:
        """Names `z` indexed as `z[i]` (i the loop index) in the body that are batches."""
        if loop.index is None:
            return set()
        roots: set[str] = set()
        weak: set[str] = set()
        bound_name = loop.bound.value if isinstance(loop.bound, cst.Name) else None
        for node in nodes:
            if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and _indexes_sample(node, loop.index, loop.inner):
                name = node.value.value
                if name == bound_name or self._is_batch(scope, node.value):
                    roots.add(name)
                elif loop.evidence:
                    weak.add(name)
        if roots or loop.evidence:
            # The loop runs over a batch: the other values indexed by sample are per-sample too.
            roots |= weak
        return roots

    # ------------------------------------------------------------------------------------------
    # element-wise math over a per-step list of tensors (policy-gradient losses)
    def elementwise_list_loop(self, node: cst.For) -> bool:
        """`for lp, r in zip(log_probs, returns): losses.append(-lp * r)` and then `torch.cat(losses)`: the
        same arithmetic on every element of a list, where one expression on the stacked list would do. The
        results going to `torch.cat`/`torch.stack` proves they are tensors."""
        elements = _list_loop_elements(node.target, node.iter)
        if elements is None:
            return False
        statements = list(_statements(node.body))
        if not statements:
            return False
        *steps, last = statements
        local = set(elements)
        for step in steps:
            if not (isinstance(step, cst.Assign) and len(step.targets) == 1 and isinstance(step.targets[0].target, cst.Name)):
                return False
            if not _arithmetic_of(step.value, local):
                return False
            local.add(step.targets[0].target.value)
        if not (isinstance(last, cst.Expr) and isinstance(last.value, cst.Call)):
            return False
        call = last.value
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "append" and len(call.args) == 1):
            return False
        collector = call.func.value
        if not isinstance(collector, cst.Name) or not _arithmetic_of(call.args[0].value, local, strict=True):
            return False
        return self._stacked_after(node, collector.value)

    def elementwise_list_comprehension(self, node: Union[cst.ListComp, cst.GeneratorExp]) -> bool:
        """`torch.cat([-lp * r for lp, r in zip(log_probs, returns)])`."""
        for_in = node.for_in
        if for_in.inner_for_in is not None or for_in.ifs:
            return False
        elements = _list_loop_elements(for_in.target, for_in.iter)
        if elements is None or not _arithmetic_of(node.elt, set(elements), strict=True):
            return False
        parent = self.context.parent(node)
        call = self.context.parent(parent) if isinstance(parent, cst.Arg) else None
        return isinstance(call, cst.Call) and call.args[0] is parent and self._stacks(call)

    def _stacked_after(self, loop: cst.For, name: str) -> bool:
        """`name` is passed to torch.cat/torch.stack after `loop`, in the same function."""
        scope = self._scope_of(loop).node
        after = False
        for node in descendants(scope):  # document order
            if node is loop:
                after = True
            elif after and isinstance(node, cst.Call) and node.args and self._stacks(node):
                first = node.args[0].value
                if isinstance(first, cst.Name) and first.value == name:
                    return True
        return False

    def _stacks(self, call: cst.Call) -> bool:
        return (self.context.qualname(call) or "") in ("torch.stack", "torch.cat", "torch.concat", "torch.concatenate")

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
        scope = self._scope_of(node)
        nodes = [node.elt, *descendants(node.elt)]
        for inner in nodes:
            if isinstance(inner, cst.Call) and last_name(inner.func) in _VARIABLE_LENGTH:
                return False
        roots = self._sample_roots(loop, scope, nodes)
        if loop.index is not None and not roots:
            return False
        if self._varying_size(loop, nodes):
            return False
        helper = _Body(self, scope, loop, set(loop.samples), roots)
        if helper.work(node.elt) and not helper.vetoed:
            return True
        return False

    def _feeds_batch_result(self, node: cst.CSTNode) -> bool:
        """The comprehension is the sequence argument of torch.stack/cat or sum(), or a list bound to a name
        that is later passed to torch.stack/cat."""
        parent = self.context.parent(node)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            return isinstance(call, cst.Call) and call.args and call.args[0] is parent and self._combines(call)
        if isinstance(node, cst.GeneratorExp) and isinstance(parent, cst.Call):
            return self._combines(parent)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            name = parent.targets[0].target.value
            scope_node = self._scope_of(node).node
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
        return qualname in ("torch.stack", "torch.cat", "torch.concat", "torch.concatenate", "torch.vstack")

    # ------------------------------------------------------------------------------------------
    # scopes
    def _scope_of(self, node: cst.CSTNode) -> _Scope:
        function = self.context.enclosing(node, cst.FunctionDef)
        key: cst.CSTNode = function if function is not None else self.context.module
        found = self._scopes.get(key)
        if found is None:
            found = self._scopes[key] = self._build_scope(key)
        return found

    def _outer_scope(self, scope: _Scope) -> Optional[_Scope]:
        if isinstance(scope.node, cst.Module):
            return None
        return self._scope_of(scope.node)

    def _build_scope(self, node: cst.CSTNode) -> _Scope:
        scope = _Scope(node)
        if isinstance(node, cst.FunctionDef):
            params = node.params
            for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
                scope.params[param.name.value] = param
            name = node.name.value
            cls = self.context.enclosing(node, cst.ClassDef)
            scope.is_forward = name == "forward" or (name == "__call__" and cls is not None)
            docstring = node.get_docstring() or ""
            scope.batch_function = bool(_BATCH_FUNCTION.search(name) or _BATCH_DOC.search(docstring))
            if cls is not None:
                scope.methods = self._methods_of(cls)
                scope.batch_function = scope.batch_function or self._is_module_class(cls)
            body: cst.CSTNode = node.body
        else:
            body = node
        for child in scope_nodes(body):
            if isinstance(child, cst.Assign):
                for target in child.targets:
                    self._bind_target(scope, target.target, child.value)
            elif isinstance(child, cst.AnnAssign) and child.value is not None:
                self._bind_target(scope, child.target, child.value)
            elif isinstance(child, (cst.For, cst.CompFor)):
                self._bind_loop(scope, child.target, child.iter)
            elif isinstance(child, cst.Attribute) and isinstance(child.value, cst.Name):
                if child.attr.value in ("size", "shape", "view", "reshape", "dim", "ndim", "unsqueeze", "permute", "transpose", "device", "dtype", "flatten", "to", "cuda", "float", "is_cuda"):
                    scope.tensor_used.add(child.value.value)
        if isinstance(node, cst.FunctionDef):
            for param in [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]:
                annotation = param.annotation
                if annotation is not None and re.fullmatch(r"(torch\.)?Tensor", self.context.code(annotation.annotation).strip()):
                    scope.tensor_used.add(param.name.value)
        return scope

    def _bind_target(self, scope: _Scope, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            scope.assigns.setdefault(target.value, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for position, element in enumerate(target.elements):
                if isinstance(element.value, cst.Name):
                    scope.unpacks.setdefault(element.value.value, []).append((value, position))

    def _bind_loop(self, scope: _Scope, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        enumerated = isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate"
        if enumerated and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
            target = target.elements[1].value
        if isinstance(target, cst.Name):
            scope.loops.setdefault(target.value, []).append((iterable, True))
            return
        for element in flatten_targets(target):
            if isinstance(element, cst.Name):
                scope.loops.setdefault(element.value, []).append((iterable, False))

    def _is_module_class(self, cls: cst.ClassDef) -> bool:
        """`class Net(nn.Module)`, or a subclass of a base named like a network (`...Net`)."""
        if objects(self.context).is_module_class(cls):
            return True
        return any((self.context.dotted(base.value) or "").endswith("Net") for base in cls.bases)
    def _methods_of(self, cls: cst.ClassDef) -> frozenset[str]:
        found = self._class_methods.get(cls)
        if found is None:
            names = set()
            if isinstance(cls.body, cst.IndentedBlock):
                for statement in cls.body.body:
                    if isinstance(statement, cst.FunctionDef):
                        names.add(statement.name.value)
            found = self._class_methods[cls] = frozenset(names)
        return found



class _Body:
    """Follows one loop body: which names hold a sample (or a result computed from one), whether the body
    computes on a sample, and whether that result is collected (appended, stored per row, accumulated)."""

    def __init__(self, loops: PerSampleLoops, scope: _Scope, loop: _Loop, tainted: set[str], roots: set[str]) -> None:
        self.loops = loops
        self.scope = scope
        self.loop = loop
        self.tainted = tainted  # names holding one sample, or a value computed from one
        self.worked: set[str] = set()  # names holding the result of work on a sample
        self.module_worked: set[str] = set()  # ... of a module, loss or torch.nn.functional call
        self.roots = roots
        self.collected = False
        self.vetoed = False
        self.assigned_so_far: set[str] = set()

    # -- expressions -----------------------------------------------------------------------------
    def is_sample(self, expr: cst.BaseExpression) -> bool:
        """`x[i]`, `x[i:i+1]`, `x[i, ...]` for a batch x, or a name holding a sample."""
        if isinstance(expr, cst.Name):
            return expr.value in self.tainted
        if isinstance(expr, cst.Subscript):
            if isinstance(expr.value, cst.Name) and expr.value.value in self.roots and _indexes_sample(expr, self.loop.index, self.loop.inner):
                return True
            if isinstance(expr.value, cst.Name) and expr.value.value in self.loop.items and len(expr.slice) == 1:
                # `c[0]` for `c` in `zip(batch, per_image_list)`: only the batch's positions are samples
                part = expr.slice[0].slice
                return (
                    isinstance(part, cst.Index)
                    and isinstance(part.value, cst.Integer)
                    and int(part.value.value) in self.loop.items[expr.value.value]
                )
            return self.is_sample(expr.value)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in _CONVERSIONS:
                return False
            return self.is_sample(expr.func.value)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value not in _NOT_WORK and self.is_sample(expr.value)
        return False

    def mentions_sample(self, expr: cst.BaseExpression) -> bool:
        if self.is_sample(expr):
            return True
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _CONVERSIONS:
            return False
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _BUILTIN_NOT_WORK:
            return False
        return any(self.mentions_sample(child) for child in semantic_children(expr) if isinstance(child, cst.BaseExpression) or isinstance(child, (cst.Arg, cst.Element, cst.SubscriptElement, cst.Index)))

    def work(self, expr: cst.CSTNode) -> bool:
        """`expr` computes on a sample (a module/loss/torch call or tensor arithmetic taking one), or reads a
        name that holds such a result."""
        if isinstance(expr, cst.Name):
            return expr.value in self.worked
        if isinstance(expr, cst.Call):
            if self._work_call(expr):
                return True
            name = last_name(expr.func)
            if name in _CONVERSIONS or (isinstance(expr.func, cst.Name) and expr.func.value in _BUILTIN_NOT_WORK and expr.func.value != "sum"):
                # float(criterion(out[i], y[i])) still computed on the sample
                return any(self.work(a.value) for a in expr.args) or (
                    isinstance(expr.func, cst.Attribute) and self.work(expr.func.value)
                )
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ARITH):
            if any(isinstance(side, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)) for side in (expr.left, expr.right)):
                return False
            if self._math_operand(expr.left) or self._math_operand(expr.right):
                return True
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            if self.is_sample(expr.expression):
                return True
        return any(self.work(child) for child in semantic_children(expr) if not isinstance(child, (cst.Lambda,)))

    def runs_model_on_sample(self, call: cst.Call) -> bool:
        return self.loops._is_module_call(self.scope, call) and self._work_call(call)

    def _math_operand(self, expr: cst.BaseExpression) -> bool:
        return self.is_sample(expr) and not _looks_scalar_index(expr)

    def _work_call(self, call: cst.Call) -> bool:
        func = call.func
        args = [a.value for a in call.args]
        # a method computing on the sample: x[i].sum(), (x[i] - m).pow(2)
        if isinstance(func, cst.Attribute) and func.attr.value in _MATH_METHODS and self.is_sample(func.value):
            return True
        if isinstance(func, cst.Subscript):
            return False  # self.layers[i](x): a loop over layers
        takes_sample = any(self.mentions_sample(a) or self.work(a) for a in args)
        if not takes_sample and self.loop.rows and self.loop.index is not None and self.loop.samples:
            # `model.predict(user_id)` for `user_id, row in enumerate(matrix)`: the model runs once per row
            takes_sample = any(isinstance(a, cst.Name) and a.value == self.loop.index for a in args) and (
                self.loops._is_module_call(self.scope, call)
            )
        if not takes_sample:
            return False
        qualname = self.loops.context.qualname(call)
        if qualname is not None:
            if qualname.startswith("torch.nn.functional."):
                return True
            if qualname.startswith("torch.") and qualname.count(".") == 1:
                return qualname.rsplit(".", 1)[1] not in _TORCH_NOT_WORK
            if qualname in ("torch.linalg.norm", "torch.autograd.grad", "torch.func.grad"):
                return True
            return False
        return self.loops._is_module_call(self.scope, call) or self.loops._tensor_helper(call)

    # -- statements ------------------------------------------------------------------------------
    def scan(self, statements: list[cst.CSTNode]) -> bool:
        """Walk the statements in order; False when the body must stay silent (state carried between
        iterations, control flow on a sample's values)."""
        assigned_in_body = _assigned_names(statements)
        for statement in statements:
            if isinstance(statement, cst.If):
                if self.mentions_sample(statement.test) or self.work(statement.test):
                    if self._counting_branch(statement):
                        self.collected = True
                        continue
                    return False
                if not self.scan(list(_statements(statement.body))):
                    return False
                orelse = statement.orelse
                while orelse is not None:
                    if isinstance(orelse, cst.If):
                        if self.mentions_sample(orelse.test):
                            return False
                        if not self.scan(list(_statements(orelse.body))):
                            return False
                        orelse = orelse.orelse
                    else:
                        if not self.scan(list(_statements(orelse.body))):
                            return False
                        orelse = None
                continue
            if isinstance(statement, (cst.For, cst.While)):
                if isinstance(statement, cst.For):
                    self.assigned_so_far.update(_flatten_names(statement.target))
                if not self.scan(list(_statements(statement.body))):
                    return False
                continue
            if isinstance(statement, (cst.With, cst.Try)):
                if not self.scan(list(_statements(statement.body))):
                    return False
                continue
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                return False
            if not self._simple(statement, assigned_in_body):
                return False
        return True

    def _simple(self, small: cst.CSTNode, assigned_in_body: set[str]) -> bool:
        if isinstance(small, cst.Assign):
            value = small.value
            # state carried from the previous iteration into a computation: h = cell(x[t], h)
            for name in _names_in(value):
                if name in assigned_in_body and name not in self.assigned_so_far and not self._accumulator(small, name):
                    if self.work(value) or self.mentions_sample(value):
                        self.vetoed = True
                        return False
            if isinstance(value, (cst.Dict, cst.DictComp)):
                return True  # a record for logging or saving, not a result that is batched later
            worked = self.work(value)
            sample = self.mentions_sample(value)
            module_worked = worked and self._module_work(value)
            for target in small.targets:
                node = target.target
                if isinstance(node, cst.Name):
                    if self._accumulator(small, node.value) and worked:
                        self.collected = True
                    if worked:
                        self.worked.add(node.value)
                    if module_worked:
                        self.module_worked.add(node.value)
                    if sample or worked:
                        self.tainted.add(node.value)
                    self.assigned_so_far.add(node.value)
                elif isinstance(node, (cst.Tuple, cst.List)):
                    for name in _flatten_names(node):
                        if worked:
                            self.worked.add(name)
                        if module_worked:
                            self.module_worked.add(name)
                        if sample or worked:
                            self.tainted.add(name)
                        self.assigned_so_far.add(name)
                elif isinstance(node, cst.Subscript):
                    if self._row_store(node) and self._collectable(value):
                        self.collected = True
            return True
        if isinstance(small, cst.AugAssign):
            if self._collectable(small.value) or self.is_sample(small.value):
                self.collected = True  # total += f(x[i]), total += x[i]: a sum over the batch
            return True
        if isinstance(small, cst.AnnAssign):
            return True
        if isinstance(small, cst.Expr):
            value = small.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("append", "extend", "add_"):
                receiver = value.func.value
                if value.args and not self.is_sample(receiver) and any(self._collectable(a.value) for a in value.args):
                    self.collected = True
            return True
        return True

    def _collectable(self, value: cst.BaseExpression) -> bool:
        """A collected value that is per-sample computation: work on a sample, not a record for logging
        (`rows.append({...})`) and not cheap math turned into a Python number (`float(y[i].mean())`); a
        module or loss call counts even through `.item()`."""
        if isinstance(value, (cst.Dict, cst.DictComp, cst.FormattedString, cst.SimpleString)):
            return False
        if not self.work(value):
            return False
        if self._python_conversion(value):
            return self._module_work(value)
        return True

    def _python_conversion(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Call):
            func = value.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist", "numpy"):
                return True
            if isinstance(func, cst.Name) and func.value in ("float", "int", "bool", "str", "round"):
                return True
        if isinstance(value, cst.BinaryOperation):
            return self._python_conversion(value.left) or self._python_conversion(value.right)
        return False

    def _module_work(self, value: cst.CSTNode) -> bool:
        for node in [value, *descendants(value)]:
            if isinstance(node, cst.Call) and self._work_call(node):
                qualname = self.loops.context.qualname(node) or ""
                if qualname.startswith("torch.nn.functional.") or self.loops._is_module_call(self.scope, node):
                    return True
        if isinstance(value, cst.Name):
            return value.value in self.module_worked
        return any(isinstance(n, cst.Name) and n.value in self.module_worked for n in descendants(value))

    def _accumulator(self, assign: cst.Assign, name: str) -> bool:
        """`acc = acc + value` / `acc = value + acc` / `acc = torch.cat([acc, value])`."""
        value = assign.value
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Multiply)):
            for side in (value.left, value.right):
                if isinstance(side, cst.Name) and side.value == name:
                    return True
        if isinstance(value, cst.Call) and (self.loops.context.qualname(value) or "") in ("torch.cat", "torch.stack"):
            first = value.args[0].value if value.args else None
            if isinstance(first, (cst.List, cst.Tuple)):
                return any(isinstance(e.value, cst.Name) and e.value.value == name for e in first.elements)
        return False

    def _row_store(self, target: cst.Subscript) -> bool:
        """`out[i] = ...`, `out[i, :] = ...` with i the loop index (out not a sample itself)."""
        index = self.loop.index
        return index is not None and _indexes_sample(target, index, self.loop.inner)

    def _math_value(self, value: cst.BaseExpression) -> bool:
        return self.work(value)

    def _counting_branch(self, statement: cst.If) -> bool:
        """`if pred[i] == y[i]: correct += 1` (and nothing else): a count that one comparison on the batch gives."""
        test = statement.test
        if not isinstance(test, cst.Comparison) or statement.orelse is not None:
            return False
        if not all(isinstance(c.operator, (cst.Equal, cst.NotEqual)) for c in test.comparisons):
            return False
        if not (self.is_sample(test.left) and all(self.is_sample(c.comparator) for c in test.comparisons)):
            return False
        body = list(_statements(statement.body))
        return bool(body) and all(
            isinstance(s, cst.AugAssign) and isinstance(s.operator, cst.AddAssign) and isinstance(s.value, (cst.Integer, cst.Float))
            for s in body
        )


_ARITH = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.MatrixMultiply, cst.Power)


def _statements(body: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The statements of a block, with simple statement lines flattened into their small statements."""
    block = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else [body]
    for statement in block:
        if isinstance(statement, cst.SimpleStatementLine):
            yield from statement.body
        else:
            yield statement


def _flatten_names(target: cst.BaseExpression) -> list[str]:
    return [n.value for n in flatten_targets(target) if isinstance(n, cst.Name)]


def _names_in(expr: cst.CSTNode) -> set[str]:
    found = {expr.value} if isinstance(expr, cst.Name) else set()
    for node in descendants(expr):
        if isinstance(node, cst.Name):
            found.add(node.value)
    return found


def _assigned_names(statements: Iterable[cst.CSTNode]) -> set[str]:
    names: set[str] = set()
    for statement in statements:
        for node in [statement, *descendants(statement)]:
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    names.update(_flatten_names(target.target))
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                names.update(_flatten_names(node.target))
    return names


def _indexes_sample(subscript: cst.Subscript, index: Optional[str], inner: bool = False) -> bool:
    """`z[i]`, `z[i, ...]`, `z[i:i + 1]` (first index is the loop index)."""
    if index is None or not subscript.slice:
        return False
    elements = list(subscript.slice)
    # `h[:, i]`, `enc[t, i]`: the sample's position may follow whole slices or other loop indices
    while inner and len(elements) > 1 and (_whole_slice(elements[0].slice) or (
        isinstance(elements[0].slice, cst.Index)
        and isinstance(elements[0].slice.value, cst.Name)
        and elements[0].slice.value.value != index
    )):
        elements.pop(0)
    first = elements[0].slice
    if isinstance(first, cst.Index):
        return isinstance(first.value, cst.Name) and first.value.value == index
    if isinstance(first, cst.Slice):
        lower, upper = first.lower, first.upper
        if isinstance(lower, cst.Name) and lower.value == index and isinstance(upper, cst.BinaryOperation):
            return (
                isinstance(upper.left, cst.Name)
                and upper.left.value == index
                and isinstance(upper.operator, cst.Add)
                and isinstance(upper.right, cst.Integer)
                and upper.right.value == "1"
            )
    return False


def _list_loop_elements(target: cst.BaseExpression, iterable: cst.BaseExpression) -> Optional[list[str]]:
    """The names bound to list elements in `for e in xs` / `for a, b in zip(xs, ys)` (xs a name or attribute)."""
    lists: list[cst.BaseExpression]
    if isinstance(iterable, (cst.Name, cst.Attribute)):
        lists = [iterable]
    elif isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "zip":
        lists = [a.value for a in iterable.args]
        if any(a.keyword is not None or a.star for a in iterable.args):
            return None
    else:
        return None
    if not all(isinstance(e, (cst.Name, cst.Attribute)) for e in lists):
        return None
    names = _flatten_names(target)
    if not names or len(names) != len(flatten_targets(target)):
        return None
    return names


def _arithmetic_of(expr: cst.BaseExpression, elements: set[str], strict: bool = False) -> bool:
    """Element-wise arithmetic (+ - * / and unary minus) over names, attributes and numbers; with `strict`,
    it must also multiply or combine an element (a bare element appended is a copy, not math)."""
    def walk(node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.BinaryOperation):
            return isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)) and walk(node.left) and walk(node.right)
        if isinstance(node, cst.UnaryOperation):
            return isinstance(node.operator, cst.Minus) and walk(node.expression)
        return isinstance(node, (cst.Name, cst.Attribute, cst.Integer, cst.Float))

    if not walk(expr):
        return False
    uses = _names_in(expr) & elements
    if not uses:
        return False
    return not strict or isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation))


def _whole_slice(part: cst.BaseSlice) -> bool:
    return isinstance(part, cst.Slice) and part.lower is None and part.upper is None and part.step is None


def _looks_scalar_index(expr: cst.BaseExpression) -> bool:
    return False
