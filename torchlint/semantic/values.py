"""Values: what an expression evaluates to.

`ValueKinds` answers "tensor that may live on the accelerator", "host value" (a raw batch, `.cpu()`,
NumPy), "Python value" or "unknown", following names to the assignment that precedes the use in the same
scope, loader loop targets, tuple unpacking, torch ops, tensor methods, module calls and loss functions.
`looks_like_tensor` is the cheaper, syntax-only test some rules use on a single expression.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

import libcst as cst

from torchlint.lint.calls import keyword, positional
from torchlint.lint.context import Context
from torchlint.lint.names import bound_value, last_name
from torchlint.lint.walk import is_a, scope_nodes, semantic_children
from torchlint.semantic import loops
from torchlint.semantic.functions import called_function, is_generator, returns_of
from torchlint.semantic.memo import CycleSafeMemo, question_stack
from torchlint.semantic.placement import is_cpu_literal, is_device_argument

# Value kinds.
T = "tensor"  # a tensor that may live on the accelerator

CPU = "cpu"  # a tensor or array known to be on the host (a raw batch, `.cpu()`, numpy)

PY = "python"  # a Python number, string or container of those

UNK = "unknown"

_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)

# Tensor methods that return something other than a tensor.
_PY_METHODS = frozenset(
    {
        "item", "tolist", "size", "dim", "ndimension", "numel", "nelement", "element_size", "stride",
        "is_contiguous", "get_device", "data_ptr", "is_floating_point", "is_complex", "keys", "values", "items",
        "__len__", "storage_offset", "is_pinned", "is_shared", "register_hook", "backward", "append", "extend",
    }
)

# Methods only a torch.Tensor has (numpy arrays and Python objects do not): proof of a tensor.
_TENSOR_ONLY_METHODS = frozenset(
    {
        "detach", "detach_", "cuda", "float", "double", "half", "bfloat16", "long", "int", "bool", "byte",
        "eq", "ne", "gt", "lt", "ge", "le", "type_as", "view", "view_as", "contiguous", "softmax", "log_softmax",
        "sigmoid", "masked_fill", "unsqueeze", "permute", "expand", "expand_as", "new_zeros", "new_ones",
        "new_tensor", "new_full", "new_empty", "mul", "add", "sub", "div", "mul_", "add_", "sub_", "div_",
        "clamp", "clamp_", "isnan", "isinf", "isfinite", "logical_and", "logical_or", "logical_not", "topk",
        "norm", "abs", "exp", "log", "sqrt", "pow", "type", "data", "requires_grad_", "zero_", "fill_",
    }
)

# Attributes of a tensor that are not tensors.
_PY_ATTRIBUTES = frozenset(
    {"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "grad_fn", "layout", "names", "is_leaf", "is_sparse"}
)

# Builtins and module functions that return Python values.
_PY_BUILTINS = frozenset(
    {"len", "float", "int", "bool", "round", "str", "repr", "range", "enumerate", "isinstance", "hasattr", "getattr", "format", "list", "dict", "tuple", "set", "sorted", "id", "type", "divmod", "hash"}
)

_PY_MODULES = ("numpy.", "math.", "statistics.", "random.", "time.", "os.", "sys.", "datetime.")

_TORCH_NOT_TENSOR = re.compile(
    r"^torch\.(?:cuda|distributed|backends|utils|optim|nn\.(?!functional)|autograd|jit|onnx|hub|multiprocessing|"
    r"profiler|amp|cpu|mps|testing|fx|compile|compiler|_dynamo|device|Size|dtype|no_grad|enable_grad|inference_mode|"
    r"set_grad_enabled|is_\w+|numel|equal|allclose|save|load|manual_seed|seed|initial_seed|get_\w+|set_\w+|"
    r"use_deterministic_algorithms|autocast|Generator|random|distributions|export|library|ops|sparse\.\w+|"
    r"typename|result_type|can_cast|promote_types|finfo|iinfo|Tensor)\b"
)

_FACTORIES = frozenset(
    {
        "tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "rand",
        "randn", "randint", "randperm", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
        "randn_like", "randint_like", "from_numpy", "FloatTensor", "LongTensor", "IntTensor", "BoolTensor",
        "ByteTensor", "DoubleTensor", "HalfTensor", "Tensor", "scalar_tensor", "normal", "bernoulli", "multinomial",
    }
)

_LIKE = re.compile(r"_like$")

# Callees that compute a loss: their result is a tensor.
_LOSS_NAME = re.compile(
    r"^(?:criterion|criterion_\w+|\w+_criterion|crit|criteria|loss_fn|loss_func|lossfn|loss_function|\w+_loss_fn|"
    r"loss_fct|loss_fcn|compute_loss|calc_loss|calculate_loss|loss_module|loss_computer)$",
    re.IGNORECASE,
)


def _combine(kinds: list[str]) -> str:
    if T in kinds:
        return T
    if UNK in kinds:
        return UNK
    if CPU in kinds:
        return CPU
    return PY


class _Order:
    """Statement order inside one scope: node -> index of the innermost statement that contains it."""

    def __init__(self, scope: cst.CSTNode) -> None:
        self.index: dict[cst.CSTNode, int] = {}
        counter = 0
        stack: list[tuple[cst.CSTNode, int]] = [(child, -1) for child in reversed(list(semantic_children(scope)))]
        while stack:
            node, current = stack.pop()
            if is_a(node, _STATEMENTS):
                counter += 1
                current = counter
            self.index[node] = current
            if is_a(node, _SCOPES) and node is not scope:
                continue
            children = list(semantic_children(node))
            for child in reversed(children):
                stack.append((child, current))


class ValueKinds:
    """What an expression evaluates to: a (possibly device) tensor, a host value, or unknown.

    Names are followed to the assignment that most recently precedes the use in the same scope
    (statement order, no branches), loop targets of a data-loader loop are host batches, and a
    tuple unpacked from a tensor-valued call gives tensors.
    """

    def __init__(self, context: "Context") -> None:
        self.context = context
        self._orders: dict[cst.CSTNode, _Order] = {}
        self._kinds: CycleSafeMemo[cst.CSTNode, str] = CycleSafeMemo(UNK, question_stack(context))
        self._backward_calls: dict[cst.CSTNode, dict[str, list[int]]] = {}

    # -- order ---------------------------------------------------------------------------------
    def _order(self, scope: cst.CSTNode) -> _Order:
        found = self._orders.get(scope)
        if found is None:
            found = self._orders[scope] = _Order(scope)
        return found

    def _scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        found = self.context.enclosing(node, cst.FunctionDef, cst.Lambda)
        return found if found is not None else self.context.module

    # -- kinds ---------------------------------------------------------------------------------
    def kind(self, expr: cst.CSTNode) -> str:
        return self._kinds.ask(expr, self._kind)

    def is_tensor(self, expr: cst.CSTNode) -> bool:
        return self.kind(expr) == T

    def _kind(self, expr: cst.CSTNode) -> str:
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return PY
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False", "None"):
                return PY
            return self._name(expr)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _PY_ATTRIBUTES:
                return PY
            base = self.kind(expr.value)
            if base in (T, CPU):
                return base
            return UNK
        if isinstance(expr, cst.Subscript):
            base = self.kind(expr.value)
            return base if base in (T, CPU) else UNK
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.left, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
                return PY  # "%s" % x
            return _combine([self.kind(expr.left), self.kind(expr.right)])
        if isinstance(expr, cst.UnaryOperation):
            if isinstance(expr.operator, cst.Not):
                inner = self.kind(expr.expression)
                return PY if inner == PY else (T if inner == T else UNK)
            return self.kind(expr.expression)
        if isinstance(expr, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
                return PY
            return _combine([self.kind(expr.left), *(self.kind(c.comparator) for c in expr.comparisons)])
        if isinstance(expr, cst.BooleanOperation):
            return _combine([self.kind(expr.left), self.kind(expr.right)])
        if isinstance(expr, cst.IfExp):
            return _combine([self.kind(expr.body), self.kind(expr.orelse)])
        return UNK

    def _call(self, call: cst.Call) -> str:
        context = self.context
        func = call.func
        name = last_name(func)
        if name is None:
            return UNK
        qual = context.qualname(func)
        if qual is not None:
            if qual.startswith(_PY_MODULES) or qual.startswith("builtins."):
                return PY
            if qual.startswith("torch."):
                return self._torch_call(call, qual)
            return self._returned_elsewhere(func)
        if isinstance(func, cst.Attribute):
            method = name
            if method in _PY_METHODS:
                return PY
            if method == "numpy":
                return CPU
            if method == "cpu":
                return CPU
            if method == "cuda":
                return T
            if method in ("to", "pin_memory") :
                if method == "pin_memory":
                    return CPU
                args = positional(call)
                device = keyword(call, "device")
                target = device.value if device is not None else (args[0].value if args else None)
                if target is not None and is_cpu_literal(context, target):
                    return CPU
                if target is not None and is_device_argument(context, target):
                    return T
                base = self.kind(func.value)
                return base if base in (T, CPU) else UNK
            if loops.is_forward_call(context, call) or _LOSS_NAME.match(method):
                return T
            base = self.kind(func.value)
            if base in (T, CPU):
                return base
            if method in _TENSOR_ONLY_METHODS:
                return T if base == UNK else UNK
            if base == PY:
                return PY  # a numpy array's `.mean()` stays on the host
            return self._returned(call)  # self.compute_loss(...)
        # a plain name
        if name in _PY_BUILTINS:
            return PY
        if name == "self" and self._in_module_class(call):
            return T  # `out = self(x)` in a module's `training_step`: its own forward
        if _LOSS_NAME.match(name) or loops.is_forward_call(context, call):
            return T
        return self._returned(call)

    def _in_module_class(self, node: cst.CSTNode) -> bool:
        from torchlint.semantic.objects import objects

        cls = self.context.enclosing(node, cst.ClassDef)
        return cls is not None and objects(self.context).is_module_class(cls)

    def _returned(self, call: cst.Call) -> str:
        """What the definitions `call` may run return, when they agree: a function or `self.` method of this
        file, or the method of a project object (`loss = trainer.train_step(x, y)`, a class of this file or of
        another)."""
        from torchlint.semantic.model import semantic_model
        from torchlint.semantic.object_methods import methods_called

        function = called_function(self.context, call)
        if function is not None:
            definitions = [(self, function)]
        else:
            definitions = [(semantic_model(there).values, method) for there, method in methods_called(self.context, call)]
        found = set()
        for values, definition in definitions:
            if is_generator(definition):
                return UNK
            found.add(_combine([values.kind(r.value) for r in returns_of(definition) if r.value is not None] or [PY]))
        return found.pop() if len(found) == 1 else UNK

    def _returned_elsewhere(self, func: cst.BaseExpression) -> str:
        """What a function of another project file returns (`loss = train_step(...)`): a device or host tensor."""
        from torchlint.semantic import project

        found = project.imported(self.context, func)
        summary = found[0].function_summary(found[1]) if found is not None else None
        return summary.value if summary is not None and summary.value in (T, CPU) else UNK

    def _torch_call(self, call: cst.Call, qual: str) -> str:
        if qual == "torch.Tensor":
            return CPU  # the legacy constructor builds on the host
        if qual.endswith(".clip_grad_norm_") and qual.startswith("torch.nn.utils."):
            return T  # the total norm, a tensor on the parameters' device
        if _TORCH_NOT_TENSOR.match(qual):
            return UNK if not qual.startswith("torch.is_") and not qual.startswith(("torch.equal", "torch.allclose", "torch.numel")) else PY
        short = qual.rsplit(".", 1)[-1]
        if short in _FACTORIES and not _LIKE.search(short) or qual.startswith("torch.cuda.") and short in _FACTORIES:
            device = keyword(call, "device")
            if device is not None and not is_cpu_literal(self.context, device.value):
                return T
            if ".cuda." in qual:
                return T
            return CPU
        kinds = [self.kind(arg.value) for arg in call.args if arg.keyword is None or arg.keyword.value in ("input", "other")]
        if not kinds:
            return CPU
        if T in kinds or UNK in kinds:
            return T
        return CPU if CPU in kinds else CPU

    def _name(self, name: cst.Name) -> str:
        bindings = self.context.lookup(name)
        if not bindings:
            return UNK
        chosen = self._reaching(name, bindings)
        if chosen is not None:
            found = self._binding(chosen, name.value)
            if found == UNK and self._backward_proves(name, chosen, bindings):
                return T  # `loss = ...; loss.backward()`: only a tensor has a backward pass
            return found
        kinds = {self._binding(b, name.value) for b in bindings}
        return kinds.pop() if len(kinds) == 1 else UNK

    def reaching_binding(self, name: cst.Name, bindings: list) -> Optional[object]:
        """The binding of `name` its use reads (see `_reaching`), None when statement order cannot tell."""
        return self._reaching(name, bindings)

    def _reaching(self, name: cst.Name, bindings: list) -> Optional[object]:
        """The binding that most recently precedes the use in statement order, skipping one made in the other
        branch of an `if` the use is in (`if a: s = [..] else: s = s.cpu()` reads the `s` bound before)."""
        order = self._order(self._scope_of(name))
        use_at = order.index.get(name)
        if use_at is None:
            return None
        chosen = None
        best = -1
        for binding in bindings:
            at = order.index.get(binding.node)
            if at is not None and at < use_at and at >= best and not self._other_branch(binding.node, name):
                best = at
                chosen = binding
        return chosen

    def _other_branch(self, bound: cst.CSTNode, use: cst.CSTNode) -> bool:
        """`bound` sits in the body of an `if` whose `else` holds `use`."""
        context = self.context
        child = use
        for ancestor in context.ancestors(use):
            if isinstance(ancestor, _SCOPES):
                return False
            if isinstance(ancestor, cst.If) and child is ancestor.orelse:
                body = ancestor.body
                return any(a is body for a in context.ancestors(bound))
            child = ancestor
        return False

    def _backward_proves(self, name: cst.Name, chosen: object, bindings: list) -> bool:
        """`loss = ...; loss.backward()`: the binding reaches a `.backward()` call (no other binding of the
        name in between, by statement order), and only a tensor has a backward pass."""
        if ".backward(" not in self.context.source.text:
            return False
        scope = self._scope_of(name)
        order = self._order(scope)
        bound_at = order.index.get(getattr(chosen, "node"))
        if bound_at is None:
            return False
        later = [at for b in bindings if (at := order.index.get(getattr(b, "node"))) is not None and at > bound_at]
        until = min(later) if later else None
        return any(bound_at < at and (until is None or at <= until) for at in self._backwards(scope).get(name.value, ()))

    def _backwards(self, scope: cst.CSTNode) -> dict[str, list[int]]:
        """Where, by statement order, `name.backward()` is called in `scope` (found once per scope)."""
        found = self._backward_calls.get(scope)
        if found is None:
            found = self._backward_calls[scope] = {}
            order = self._order(scope)
            for node in scope_nodes(scope):
                func = getattr(node, "func", None)
                if (
                    isinstance(node, cst.Call)
                    and isinstance(func, cst.Attribute)
                    and func.attr.value == "backward"
                    and isinstance(func.value, cst.Name)
                ):
                    at = order.index.get(node)
                    if at is not None:
                        found.setdefault(func.value.value, []).append(at)
        return found

    def _binding(self, binding: object, name: str) -> str:
        kind = getattr(binding, "kind")
        node = getattr(binding, "node")
        value = getattr(binding, "value")
        if kind == "assign" and value is not None:
            return self.kind(value)
        if kind == "loop" and isinstance(node, cst.For):
            return self._loop_target(node, name)
        if kind == "other":
            if isinstance(node, cst.AugAssign):
                return _combine([self.kind(node.value), PY]) if self.kind(node.value) != T else T
            if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                target = node.targets[0].target if isinstance(node, cst.Assign) else node.target
                return self._unpacked(target, node.value, name)
            if isinstance(node, cst.NamedExpr):
                return self.kind(node.value)
        return UNK

    def _unpacked(self, target: cst.BaseExpression, value: cst.BaseExpression, name: str) -> str:
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
            element = bound_value(target, value, name)
            return self.kind(element) if element is not None else UNK
        whole = self.kind(value)
        return whole if whole in (T, CPU) else UNK  # `_, pred = output.cpu().topk(1)`: parts of a host value stay there

    def _element(self, iterable: cst.BaseExpression) -> str:
        """What iterating `iterable` yields: host elements of a host batch, device tensors of a list of them
        (`zip(names, [d_loss, g_loss])`), else unknown."""
        if isinstance(iterable, cst.Name) and isinstance(
            self.context.assigned_value(iterable), (cst.List, cst.Tuple, cst.ListComp)
        ):
            iterable = self.context.assigned_value(iterable)  # type: ignore[assignment]
        if isinstance(iterable, (cst.List, cst.Tuple)):
            # `zip(names, (loss, reg))`: a device tensor among values of unknown kind, none known to be the host's
            kinds = [self.kind(e.value) for e in iterable.elements if not isinstance(e, cst.StarredElement)]
            return T if T in kinds and all(k in (T, UNK) for k in kinds) else UNK
        if isinstance(iterable, cst.ListComp):  # losses = [out[:, i].mean() for i in range(k)]
            return T if self.kind(iterable.elt) == T else UNK
        # iterating a model's output may give dicts or lists (detection models): only a host batch is told
        return CPU if self.kind(iterable) == CPU else UNK

    def _loop_target(self, loop: cst.For, name: str) -> str:
        it = loop.iter
        if isinstance(it, cst.Call) and last_name(it.func) in ("range", "trange"):
            return PY
        if loops.is_loader_expr(self.context, it):
            return PY if name in loops.loop_counters(loop) else CPU  # `i` of `for i, batch in enumerate(loader)`
        # `for target, output in zip(targets, outputs)`: an element of a host batch is on the host
        if isinstance(it, cst.Call) and last_name(it.func) == "zip" and isinstance(loop.target, (cst.Tuple, cst.List)):
            args = it.args
            elements = loop.target.elements
            if len(args) == len(elements) and all(a.keyword is None and a.star == "" for a in args):
                for element, arg in zip(elements, args):
                    if isinstance(element.value, cst.Name) and element.value.value == name:
                        return self._element(arg.value)
            return UNK
        if isinstance(loop.target, cst.Name) and isinstance(it, (cst.List, cst.Tuple, cst.ListComp)):
            return self._element(it)  # for loss in [d_loss, g_loss]
        if isinstance(it, cst.Name) and self.kind(it) == CPU:
            return CPU  # `for x1, y1, x2, y2, score in dets` over `dets = dets.cpu().numpy()`: host rows
        return UNK


def value_kinds(context: "Context") -> ValueKinds:
    """The file's shared `ValueKinds` (one per file)."""
    return context.shared(ValueKinds)


# torch functions that certainly return a tensor (last name segment, under `torch.`).
TENSOR_FUNCTIONS = frozenset(
    """
    tensor as_tensor from_numpy zeros ones empty full rand randn randint randperm arange linspace logspace eye
    zeros_like ones_like empty_like full_like rand_like randn_like randint_like stack cat concat concatenate hstack
    vstack dstack sum mean std var prod exp exp2 expm1 log log1p log2 log10 sqrt rsqrt abs sigmoid tanh relu softmax
    log_softmax matmul mm bmm mv einsum clamp clip masked_fill gather index_select flatten reshape squeeze unsqueeze
    transpose permute norm dist cdist cumsum cumprod logsumexp maximum minimum mul add sub div true_divide pow square
    sin cos floor ceil round sign argmax argmin amax amin outer dot diag tril triu bernoulli multinomial normal lerp
    erf neg reciprocal tensordot kron roll flip repeat_interleave tile bincount histc trace cross sort_values
    """.split()
)

# Tensor methods whose result is certainly a tensor when the receiver is one.
TENSOR_METHODS = frozenset(
    """
    sum mean std var prod exp log log1p sqrt rsqrt abs sigmoid tanh relu softmax log_softmax float double half
    bfloat16 long int bool byte to cuda cpu clone detach contiguous view view_as reshape reshape_as squeeze unsqueeze
    flatten permute transpose t expand expand_as repeat matmul mm bmm mul add sub div pow clamp clamp_min clamp_max
    masked_fill gather argmax argmin amax amin norm cumsum type_as new_zeros new_ones new_full new_empty new_tensor
    round floor ceil sign square neg reciprocal logsumexp index_select narrow roll flip exp_ log_ mul_ add_ div_ sub_
    clamp_ pin_memory
    """.split()
)

# torch.nn classes whose instances return one tensor when called.
TENSOR_MODULE_SUFFIXES = ("Loss", "Linear", "Conv1d", "Conv2d", "Conv3d", "Embedding", "Softmax", "LogSoftmax", "ReLU")

_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.MatrixMultiply, cst.Power, cst.FloorDivide)


def looks_like_tensor(
    context: Context,
    node: Optional[cst.BaseExpression],
    depth: int = 0,
    known: Optional[Callable[[cst.Name], bool]] = None,
) -> bool:
    """True when `node` is certainly a torch tensor (a torch call, a tensor method on one, a name bound once to one).

    `known(name)` may vouch for a name by other evidence (e.g. `name.backward()` is called)."""
    if node is None or depth > 8:
        return False
    if known is not None and isinstance(node, cst.Name) and known(node):
        return True
    if isinstance(node, cst.Call):
        func = node.func
        qualname = context.qualname(func)
        if qualname is not None:
            if qualname.startswith("torch.nn.functional."):
                return qualname.rsplit(".", 1)[1][:1].islower()
            if qualname.startswith("torch.") and qualname.count(".") == 1:
                return qualname.rsplit(".", 1)[1] in TENSOR_FUNCTIONS
            return False
        if isinstance(func, cst.Attribute) and (
            func.attr.value in TENSOR_METHODS or (func.attr.value in ("max", "min") and not node.args)
        ):
            return looks_like_tensor(context, func.value, depth + 1, known)
        if isinstance(func, cst.Name):
            return _is_tensor_module(context, func)
        return False
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
        return looks_like_tensor(context, node.left, depth + 1, known) or looks_like_tensor(context, node.right, depth + 1, known)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return looks_like_tensor(context, node.expression, depth + 1, known)
    if isinstance(node, cst.Subscript):
        return looks_like_tensor(context, node.value, depth + 1, known)
    if isinstance(node, cst.Attribute) and node.attr.value in ("data", "grad", "T", "mT"):
        return looks_like_tensor(context, node.value, depth + 1, known)
    if isinstance(node, cst.Name):
        return looks_like_tensor(context, context.assigned_value(node), depth + 1, known)
    return False


def _is_tensor_module(context: Context, name: cst.Name) -> bool:
    """`criterion(out, y)` where `criterion = nn.CrossEntropyLoss()`: a module known to return one tensor."""
    value = context.assigned_value(name)
    if not isinstance(value, cst.Call):
        return False
    qualname = context.qualname(value.func) or ""
    return qualname.startswith("torch.nn.") and qualname.endswith(TENSOR_MODULE_SUFFIXES)
