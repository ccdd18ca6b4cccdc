"""Host-device synchronisation: reading a device tensor's value on the host once per training step.

Every rule here reports only inside a hot loop (`torchlint.lint.hotloop`), on code that runs on every
trip (not under a logging interval such as `if step % 100 == 0:`), and only for values this module
can tell are tensors (`ValueKinds`): model outputs, losses, `torch.*` results, tensor methods of those.
A value that is already a Python number (`loss.item()`, `len(batch)`, numpy results) or a batch still
on the CPU is never reported.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, Optional, Union

import libcst as cst

from torchlint.lint import hotloop
from torchlint.lint.calls import keyword, positional
from torchlint.lint.files import uses_accelerator
from torchlint.lint.names import last_name
from torchlint.lint.rule import FixSafety, Rule
from torchlint.lint.walk import descendants, scope_nodes, semantic_children

if TYPE_CHECKING:
    from torchlint.lint.context import Context

FAMILY = "Host-device synchronisation"

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


def _is_cpu_literal(context: "Context", expr: cst.BaseExpression) -> bool:
    value = context.literal(expr)
    if isinstance(value, str):
        return value.startswith("cpu")
    if isinstance(expr, cst.Call) and context.qualname(expr) == "torch.device":
        args = positional(expr)
        return bool(args) and _is_cpu_literal(context, args[0].value)
    return False


def is_device_argument(context: "Context", expr: cst.BaseExpression) -> bool:
    """`device`, `args.device`, `"cuda"`, `torch.device("cuda", 0)`, `x.device`, `rank`: not a dtype."""
    qual = context.qualname(expr)
    if qual is not None:
        if qual.startswith("torch.") and qual != "torch.device":
            return False  # torch.float16 and friends
    value = context.literal(expr)
    if isinstance(value, str):
        return value.startswith(("cuda", "mps", "xpu", "npu", "hpu"))
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    if isinstance(expr, cst.Call):
        return qual == "torch.device" or (last_name(expr.func) or "") in ("device", "get_device", "current_device")
    name = last_name(expr)
    if name is None:
        return False
    lower = name.lower()
    return "device" in lower or lower in ("dev", "gpu", "rank", "local_rank", "gpu_id", "cuda")


class _Order:
    """Statement order inside one scope: node -> index of the innermost statement that contains it."""

    def __init__(self, scope: cst.CSTNode) -> None:
        self.index: dict[cst.CSTNode, int] = {}
        counter = 0
        stack: list[tuple[cst.CSTNode, int]] = [(child, -1) for child in reversed(list(semantic_children(scope)))]
        while stack:
            node, current = stack.pop()
            if isinstance(node, _STATEMENTS):
                counter += 1
                current = counter
            self.index[node] = current
            if isinstance(node, _SCOPES) and node is not scope:
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
        self._memo: dict[cst.CSTNode, str] = {}
        self._active: set[cst.CSTNode] = set()

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
        found = self._memo.get(expr)
        if found is not None:
            return found
        if expr in self._active or len(self._active) > 40:
            return UNK
        self._active.add(expr)
        try:
            found = self._kind(expr)
        finally:
            self._active.discard(expr)
        self._memo[expr] = found
        return found

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
            return UNK
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
                if target is not None and _is_cpu_literal(context, target):
                    return CPU
                if target is not None and is_device_argument(context, target):
                    return T
                base = self.kind(func.value)
                return base if base in (T, CPU) else UNK
            if hotloop.is_forward_call(context, call) or _LOSS_NAME.match(method):
                return T
            base = self.kind(func.value)
            if base in (T, CPU):
                return base
            if method in _TENSOR_ONLY_METHODS:
                return T if base == UNK else UNK
            return PY if base == PY else UNK  # a numpy array's `.mean()` stays on the host
        # a plain name
        if name in _PY_BUILTINS:
            return PY
        if _LOSS_NAME.match(name) or hotloop.is_forward_call(context, call):
            return T
        return UNK

    def _torch_call(self, call: cst.Call, qual: str) -> str:
        if _TORCH_NOT_TENSOR.match(qual):
            return UNK if not qual.startswith("torch.is_") and not qual.startswith(("torch.equal", "torch.allclose", "torch.numel")) else PY
        short = qual.rsplit(".", 1)[-1]
        if short in _FACTORIES and not _LIKE.search(short) or qual.startswith("torch.cuda.") and short in _FACTORIES:
            device = keyword(call, "device")
            if device is not None and not _is_cpu_literal(self.context, device.value):
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
        scope = self._scope_of(name)
        order = self._order(scope)
        use_at = order.index.get(name)
        chosen = None
        if use_at is not None:
            best = -1
            for binding in bindings:
                at = order.index.get(binding.node)
                if at is not None and at < use_at and at >= best:
                    best = at
                    chosen = binding
        if chosen is not None:
            return self._binding(chosen, name.value)
        kinds = {self._binding(b, name.value) for b in bindings}
        return kinds.pop() if len(kinds) == 1 else UNK

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
            if len(target.elements) == len(value.elements):
                for t, v in zip(target.elements, value.elements):
                    if isinstance(t.value, cst.Name) and t.value.value == name:
                        return self.kind(v.value)
                    if isinstance(t.value, (cst.Tuple, cst.List)):
                        found = self._unpacked(t.value, v.value, name)
                        if found != UNK:
                            return found
            return UNK
        whole = self.kind(value)
        return T if whole == T else UNK

    def _loop_target(self, loop: cst.For, name: str) -> str:
        it = loop.iter
        if isinstance(it, cst.Call) and last_name(it.func) in ("range", "trange"):
            return PY
        if hotloop.is_loader_expr(self.context, it):
            target = loop.target
            if (
                isinstance(it, cst.Call)
                and last_name(it.func) == "enumerate"
                and isinstance(target, (cst.Tuple, cst.List))
                and target.elements
                and isinstance(target.elements[0].value, cst.Name)
                and target.elements[0].value.value == name
            ):
                return PY
            return CPU
        # `for target, output in zip(targets, outputs)`: an element of a host batch is on the host
        if isinstance(it, cst.Call) and last_name(it.func) == "zip" and isinstance(loop.target, (cst.Tuple, cst.List)):
            args = it.args
            elements = loop.target.elements
            if len(args) == len(elements) and all(a.keyword is None and a.star == "" for a in args):
                for element, arg in zip(elements, args):
                    if isinstance(element.value, cst.Name) and element.value.value == name:
                        return CPU if self.kind(arg.value) == CPU else UNK
            return UNK
        if isinstance(it, cst.Name) and isinstance(loop.target, cst.Name) and self.kind(it) == CPU:
            return CPU
        return UNK


def value_kinds(context: "Context") -> ValueKinds:
    """The file's shared `ValueKinds` (one per file)."""
    return context.shared(ValueKinds)


def per_step(context: "Context", node: cst.CSTNode) -> Optional[hotloop.Loop]:
    """The hot loop that runs `node` on every trip (not under a logging interval), or None."""
    loop = hotloop.hot_loop(context, node)
    if loop is None or hotloop.gated(context, node, loop):
        return None
    return loop


# Calls that read a clock or a CUDA event: a sync next to them is there to time the step.
_CLOCK_CALLS = frozenset(
    {"time", "perf_counter", "monotonic", "perf_counter_ns", "time_ns", "record", "elapsed_time", "time_sync", "tic", "toc"}
)

_ADVICE = "keep the running value on the device (`running += loss.detach()`) and read it every N steps"


# -- rules ---------------------------------------------------------------------------------------------


def on_accelerator(context: "Context") -> bool:
    """Whether the file shows any sign of an accelerator (shared per file): on a CPU-only run nothing is
    asynchronous, so reading a value on the host costs nothing."""
    return context.shared(_OnAccelerator).value


class _OnAccelerator:
    def __init__(self, context: "Context") -> None:
        self.value = uses_accelerator(context.source.text) and not _moves_only_models(context)


# Receivers of `.to(device)` / `.cuda()` that are modules, not data (last name segment).
_MODULE_RECEIVER = re.compile(
    r"^(?:model|net|network|generator|discriminator|netg|netd|encoder|decoder|classifier|backbone|student|teacher|"
    r"policy|critic|actor|unet|vae|autoencoder|\w+_model|\w+_net|model_\w+|net_\w+|criterion|\w+_criterion|"
    r"loss_fn|loss_func|loss_function)$",
    re.IGNORECASE,
)
_DEVICE_NAMES = re.compile(r"device|^dev$|^gpus?$|^gpu_ids?$|^cuda$|^rank$|^local_rank$", re.IGNORECASE)


def _moves_only_models(context: "Context") -> bool:
    """The file puts its models on the device (`net.to(device)`, `model.cuda()`) but never any data: no
    other `.to(...)`/`.cuda()`, no `device=` keyword, no device handed to any other call, no
    `DataParallel` (which scatters host batches itself). Its batches stay on the host, so the script runs
    on the CPU (on a GPU its first forward pass would fail) and a host read costs nothing."""
    text = context.source.text
    if re.search(r"DataParallel|[Aa]ccelerat|Fabric|local_rank|\.prepare\(|cuda\.\w*Tensor", text):
        return False
    moved_model = False
    for node in descendants(context.module):
        if isinstance(node, cst.Arg):
            if node.keyword is not None and node.keyword.value == "device":
                return False
            continue
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        name = last_name(func)
        if isinstance(func, cst.Attribute) and name in ("to", "cuda"):
            if not _is_module(context, func.value):
                return False
            moved_model = True
            continue
        if context.qualname(func) == "torch.device":
            continue
        if name is not None and "device" in name.lower() and not name.startswith(("get_", "is_")):
            return False  # to_device(batch, device), move_to_device(...)
        for arg in node.args:
            value = arg.value
            last = last_name(value)
            if last is not None and _DEVICE_NAMES.search(last) and context.qualname(value) is None:
                return False  # train(model, loader, device): a helper that may move the batches
    return moved_model


def _is_module(context: "Context", expr: cst.BaseExpression) -> bool:
    """`net`, `self.model`, `Net()`, `nn.Linear(4, 2)`, a name bound to `Net()`: a module, not data."""
    if isinstance(expr, cst.Call):
        name = last_name(expr.func)
        return name is not None and name[:1].isupper() and not name.isupper() and not name.endswith("Tensor")
    name = last_name(expr)
    if name is None:
        return False
    if _MODULE_RECEIVER.match(name):
        return True
    if isinstance(expr, cst.Name):
        value = context.assigned_value(expr)
        if value is not None and value is not expr:
            return isinstance(value, cst.Call) and _is_module(context, value)
    return False


class _SyncRule(Rule):
    family = FAMILY
    fix_safety = FixSafety.NONE

    @property
    def values(self) -> ValueKinds:
        return value_kinds(self.context)

    def report(self, node: cst.CSTNode, message: Optional[str] = None, **kwargs: object) -> None:
        if on_accelerator(self.context):  # a CPU-only script pays nothing for a host read
            super().report(node, message, **kwargs)  # type: ignore[arg-type]


_EXPLANATION_COMMON = (
    "CUDA kernels run asynchronously: the Python loop normally races ahead of the GPU, queueing the next "
    "step's work while the current one computes. Reading a device value on the host ({what}) makes the CPU wait "
    "until every queued kernel has finished and the value has been copied back; only then does Python go on to "
    "queue more work. Done every step, the GPU idles while the host prepares the next step, and the pipeline "
    "never fills again. The cost is the GPU's idle time per step, so it is largest for small models and short "
    "steps, where the queue is what keeps the GPU busy. PyTorch's Performance Tuning Guide (\"Avoid unnecessary "
    "CPU-GPU synchronization\") lists exactly these operations: `print(cuda_tensor)`, `cuda_tensor.item()`, "
    "`cuda_tensor.cpu()`, `cuda_tensor.nonzero()`, and Python control flow on CUDA results such as "
    "`if (cuda_tensor != 0).all()`. On a CPU-only run nothing is asynchronous and none of this costs anything, "
    "so the rule stays silent in a file that puts nothing on an accelerator (no `.cuda()`, `.to(device)`, "
    "`device=`, `torch.device(\"cuda\")`, `Accelerator`, outside comments; listing GPUs or calling "
    "`torch.cuda.is_available()` is not enough), and in one that moves only its model and never a batch (the "
    "script then runs on the CPU)."
)


# Python-number checks a NaN guard uses.
_FINITE_CHECKS = frozenset(
    {"math.isfinite", "math.isnan", "math.isinf", "numpy.isfinite", "numpy.isnan", "numpy.isinf"}
)
# Variables that hold a loss (`loss`, `loss2`, `g_loss`, `loss_D`, `total_loss`, `losses`); not `loss_fn`.
_LOSS_VARIABLE = re.compile(r"^(?:\w+_)?loss(?:es)?(?:\d+|_?[a-z])?$", re.IGNORECASE)


def _in_test(context: "Context", node: cst.CSTNode, test: cst.BaseExpression) -> bool:
    return node is test or any(ancestor is test for ancestor in context.ancestors(node))


def _exits(context: "Context", block: cst.CSTNode) -> bool:
    """The block stops the run or skips the step: `raise`, `sys.exit(...)`, `return`, `break`, `continue`."""
    for node in scope_nodes(block):
        if isinstance(node, (cst.Raise, cst.Return, cst.Break, cst.Continue)):
            return True
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value in ("exit", "quit"):
                return True
            if context.qualname(node) in ("sys.exit", "os._exit", "os.abort"):
                return True
    return False


# Methods that may sit between `.cpu()` and the number it is reduced to.
_REDUCTIONS = frozenset(
    {"sum", "mean", "count_nonzero", "all", "any", "max", "min", "float", "double", "long", "int", "numpy", "squeeze", "detach"}
)


class ItemInHotLoop(_SyncRule):
    code = "TL201"
    name = "item-in-training-loop"
    summary = (
        "`.item()`, `.tolist()` or `.cpu()` of a device tensor on every step of a training or evaluation loop."
    )
    message = (
        "`.item()` waits for the GPU and copies to the host on every step: " + _ADVICE
    )
    explanation = _EXPLANATION_COMMON.format(what="`.item()`, `.tolist()`, `.cpu()`, `.cpu().numpy()`")
    bad = (
        "for images, labels in train_loader:\n"
        "    loss = criterion(model(images.cuda()), labels.cuda())\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    running_loss += loss.item()\n"
    )
    good = (
        "running_loss = torch.zeros((), device=\"cuda\")\n"
        "for step, (images, labels) in enumerate(train_loader):\n"
        "    loss = criterion(model(images.cuda()), labels.cuda())\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    running_loss += loss.detach()\n"
        "    if step % 100 == 0:\n"
        "        print(running_loss.item() / (step + 1))\n"
    )
    false_positives = (
        "A value that lives on the CPU (a model trained on the CPU, a tensor already copied with `.cpu()` earlier) "
        "does not synchronise; the rule cannot always tell where a tensor lives. A NaN guard that stops the run "
        "(`v = loss.item()` then `if not math.isfinite(v): sys.exit(1)`, or `raise`/`break`/`continue`) is not "
        "reported: it needs the value on every step by design. Other syncs that decide control flow may be "
        "intended too. `.cpu()` of predictions gathered in an evaluation loop (appended, stored) is reported only "
        "in training loops: there, copy once after the loop instead; one reduced to a number at once "
        "(`pred.eq(y).cpu().sum().item()`) is reported everywhere. `return loss.item()` at the end of a one-step "
        "training function (`loss.backward(); optimizer.step()`, no loop, no `epoch` parameter) is reported: its "
        "caller runs it every step. A statement that reads several values "
        "(`print(a.item(), b.item())`) is reported once, at its first read: the later ones find the GPU idle. "
        "Silence a deliberate one with `# noqa: TL201`."
    )
    requires = (".item(", ".tolist(", ".cpu(")

    def visit_Module(self, node: cst.Module) -> None:
        self._reported: set[cst.CSTNode] = set()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method not in ("item", "tolist", "cpu") or node.args:
            return
        statement = self.context.enclosing_statement(node)
        if statement in self._reported:
            return  # the first sync of a statement empties the queue: later ones wait for nothing
        loop: Optional[cst.CSTNode] = per_step(self.context, node)
        if loop is None:
            loop = self._returned_by_step_function(node)
            if loop is None:
                return
        kind = self.values.kind(func.value)
        if method == "item":
            if kind in (PY, CPU) or self._feeds_environment(node) or self._guards_non_finite(node):
                return
        elif kind != T and not (method == "cpu" and kind == UNK and self._copies_a_tensor(func.value)):
            return
        if (
            method == "cpu"
            and isinstance(loop, (cst.For, cst.While))
            and not hotloop.is_training_loop(self.context, loop)
            and not self._reduced_at_once(node)
        ):
            return  # predictions gathered in an evaluation loop: copied once each, to be used after it
        self._reported.add(statement)  # type: ignore[arg-type]
        if method == "cpu" and self._is_numpy_of(node):
            self.report(node, "`.cpu().numpy()` waits for the GPU and copies to the host on every step: " + _ADVICE)
            return
        self.report(node, f"`.{method}()` waits for the GPU and copies to the host on every step: " + _ADVICE)

    def _returned_by_step_function(self, node: cst.Call) -> Optional[cst.FunctionDef]:
        """`return loss.item()` at the end of a one-step training function (`loss.backward();
        optimizer.step()`, no loop): the caller runs it once per step (`agent.replay()`). A function that
        takes the epoch (`def train(epoch):`, full-batch training) is called once per epoch and is left alone."""
        context = self.context
        statement = context.enclosing_statement(node)
        if not isinstance(statement, cst.SimpleStatementLine) or context.enclosing(node, cst.Return) is None:
            return None
        function = hotloop.step_function(context, node)
        if function is None or hotloop.gated(context, node, function):  # type: ignore[arg-type]
            return None
        params = (*function.params.params, *function.params.kwonly_params)
        if any("epoch" in p.name.value.lower() for p in params):
            return None
        return function

    def _reduced_at_once(self, node: cst.Call) -> bool:
        """`pred.eq(target).cpu().sum().item()`, `correct += (pred == y).cpu().sum()`: the copy is reduced to
        a number straight away (which could have been done on the device), not kept for after the loop."""
        context = self.context
        current: cst.CSTNode = node
        reduced = False
        while True:
            parent = context.parent(current)
            if not isinstance(parent, cst.Attribute) or parent.value is not current:
                break
            call = context.parent(parent)
            if not isinstance(call, cst.Call) or call.func is not parent:
                break
            method = parent.attr.value
            if method == "item":
                return True
            if method not in _REDUCTIONS:
                return False
            reduced = reduced or method in ("sum", "mean", "count_nonzero", "all", "any", "max", "min")
            current = call
        parent = context.parent(current)
        return reduced and isinstance(parent, cst.AugAssign) and parent.value is current

    def _copies_a_tensor(self, receiver: cst.BaseExpression) -> bool:
        """`.cpu()` of a value of unknown kind that is still a tensor: `out.data.cpu()` (`.data`, like
        `.detach()`, is a tensor's), `loss.cpu()` (only tensors and modules have `.cpu()`, and a name that
        reads like a loss is not a module)."""
        expr = receiver
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            base = expr.value
            return not (isinstance(base, cst.Name) and base.value == "self") and self.values.kind(base) == UNK
        return isinstance(expr, cst.Name) and bool(_LOSS_VARIABLE.match(expr.value)) and self.context.qualname(expr) is None

    def _guards_non_finite(self, node: cst.Call) -> bool:
        """`loss_value = loss.item()` followed by `if not math.isfinite(loss_value): sys.exit(1)`, or
        `assert math.isfinite(loss.item())`: a deliberate guard that stops training on a NaN/inf loss."""
        context = self.context
        parent = context.parent(node)
        if isinstance(parent, cst.Arg):
            check = context.parent(parent)
            if not isinstance(check, cst.Call) or not self._is_finite_check(check):
                return False
            statement = context.enclosing_statement(node)
            if isinstance(statement, cst.If):
                return _in_test(context, check, statement.test) and _exits(context, statement.body)
            assertion = context.enclosing(node, cst.Assert)
            return assertion is not None and _in_test(context, check, assertion.test)
        if not (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            return False
        name = parent.targets[0].target.value
        line = context.parent(parent)
        block = context.parent(line) if line is not None else None
        if not isinstance(line, cst.SimpleStatementLine) or not isinstance(block, (cst.IndentedBlock, cst.Module)):
            return False
        siblings = list(block.body)
        following = siblings[siblings.index(line) + 1 :]
        for statement in following:
            tests: list[tuple[cst.BaseExpression, Optional[cst.CSTNode]]] = []
            if isinstance(statement, cst.If):
                tests.append((statement.test, statement.body))
            elif isinstance(statement, cst.SimpleStatementLine):
                tests.extend((small.test, None) for small in statement.body if isinstance(small, cst.Assert))
            for test, body in tests:
                for check in [test, *descendants(test)]:
                    if (
                        isinstance(check, cst.Call)
                        and self._is_finite_check(check)
                        and any(isinstance(a.value, cst.Name) and a.value.value == name for a in check.args)
                        and (body is None or _exits(context, body))
                    ):
                        return True
        return False

    def _is_finite_check(self, call: cst.Call) -> bool:
        if last_name(call.func) not in ("isfinite", "isnan", "isinf"):
            return False
        return self.context.qualname(call) in _FINITE_CHECKS

    def _feeds_environment(self, node: cst.Call) -> bool:
        """`env.step(action.item())`: a simulator on the host needs the value; the sync is the algorithm's."""
        parent = self.context.parent(node)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            return isinstance(call, cst.Call) and last_name(call.func) == "step"
        return False

    def _is_numpy_of(self, node: cst.Call) -> bool:
        parent = self.context.parent(node)
        return isinstance(parent, cst.Attribute) and parent.attr.value == "numpy"


class ScalarConversionInHotLoop(_SyncRule):
    code = "TL202"
    name = "tensor-to-python-number-in-training-loop"
    summary = "`float(t)`, `int(t)` or `bool(t)` of a device tensor on every step of a training or evaluation loop."
    message = "`float(tensor)` waits for the GPU and copies to the host on every step: " + _ADVICE
    explanation = _EXPLANATION_COMMON.format(what="`float(t)`, `int(t)` and `bool(t)` call `t.item()`")
    bad = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x.cuda()), y.cuda())\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    losses.append(float(loss))\n"
    )
    good = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x.cuda()), y.cuda())\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    losses.append(loss.detach())\n"
        "losses = torch.stack(losses).tolist()  # one copy after the loop\n"
    )
    false_positives = (
        "A tensor that lives on the CPU does not synchronise; the rule cannot always tell. Silence a deliberate "
        "conversion with `# noqa: TL202`."
    )
    requires = ("float(", "int(", "bool(")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Name) or func.value not in ("float", "int", "bool"):
            return
        args = positional(node)
        if len(args) != 1 or len(node.args) != 1 or self.context.lookup(func):
            return  # rebound builtin
        if per_step(self.context, node) is None or not self.values.is_tensor(args[0].value):
            return
        self.report(node, f"`{func.value}(tensor)` waits for the GPU and copies to the host on every step: " + _ADVICE)


class PrintTensorInHotLoop(_SyncRule):
    code = "TL203"
    name = "print-tensor-in-training-loop"
    summary = (
        "Printing or formatting a device tensor (`print(loss)`, `f\"{loss:.3f}\"`, `\"{}\".format(loss)`, "
        "`writer.add_scalar(..., loss)`) on every step."
    )
    message = "Formatting a tensor waits for the GPU and copies it to the host on every step: " + _ADVICE
    explanation = _EXPLANATION_COMMON.format(
        what="printing or formatting a tensor, and TensorBoard's `add_scalar`, read its values"
    )
    bad = (
        "for step, (x, y) in enumerate(loader):\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    print(f\"step {step}: loss {loss:.4f}\")\n"
    )
    good = (
        "for step, (x, y) in enumerate(loader):\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    if step % 100 == 0:\n"
        "        print(f\"step {step}: loss {loss.item():.4f}\")\n"
    )
    false_positives = (
        "A tensor on the CPU prints without a sync; the rule cannot always tell where a tensor lives. Silence a "
        "deliberate one with `# noqa: TL203`."
    )

    _SINKS = {"print": None, "add_scalar": 1, "add_scalars": 1}

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if self.values.is_tensor(node.expression) and per_step(self.context, node) is not None:
            self.report(node)

    def visit_Call(self, node: cst.Call) -> None:
        name = last_name(node.func)
        if name == "format" and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.SimpleString):
            values = [a.value for a in node.args if a.star == ""]
        elif name == "print" and isinstance(node.func, cst.Name):
            values = [a.value for a in positional(node)]
        elif name in ("add_scalar",) and isinstance(node.func, cst.Attribute):
            arg = node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else keyword(node, "scalar_value")
            values = [arg.value] if arg is not None else []
        else:
            return
        if not values or per_step(self.context, node) is None:
            return
        for value in values:
            if self.values.is_tensor(value):
                self.report(value)
                return

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        # "%.3f" % loss
        if not isinstance(node.operator, cst.Modulo) or not isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString)):
            return
        right = node.right
        items = [e.value for e in right.elements] if isinstance(right, cst.Tuple) else [right]
        tensors = [i for i in items if not isinstance(i, cst.StarredElement) and self.values.is_tensor(i)]
        if tensors and per_step(self.context, node) is not None:
            self.report(tensors[0])


class ImplicitBoolInHotLoop(_SyncRule):
    code = "TL204"
    name = "tensor-condition-in-training-loop"
    summary = (
        "A device tensor used as a condition (`if torch.isnan(loss):`, `assert (x > 0).all()`, "
        "`while err > tol:`) on every step."
    )
    message = (
        "A tensor condition waits for the GPU on every step (Python needs its value): check it every N steps, "
        "or keep the decision on the device (`torch.where`, `torch.nan_to_num`)"
    )
    explanation = _EXPLANATION_COMMON.format(what="`if`, `while`, `assert`, `and`/`or`/`not` call `bool(t)`")
    bad = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    if torch.isnan(loss):\n"
        "        raise RuntimeError(\"loss is NaN\")\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    good = (
        "for step, (x, y) in enumerate(loader):\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    if step % 100 == 0 and torch.isnan(loss):\n"
        "        raise RuntimeError(\"loss is NaN\")\n"
    )
    false_positives = (
        "A check that must stop training at once (NaN detection before an optimizer step that would corrupt "
        "the weights) may be worth its cost; `torch.autograd.detect_anomaly` or a GradScaler's inf checks do it "
        "without a per-step Python branch. Silence a deliberate one with `# noqa: TL204`."
    )

    def visit_If(self, node: cst.If) -> None:
        self._check(node.test, node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node.test, node)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._check(node.test, node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._check(node.test, node)

    def _check(self, test: cst.BaseExpression, where: cst.CSTNode) -> None:
        for part in self._operands(test):
            if self.values.is_tensor(part):
                if per_step(self.context, test) is not None:
                    self.report(test)
                return

    def _operands(self, test: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
        """The operands Python converts to bool, stopping after an interval test joined by `and`
        (`step % 100 == 0 and torch.isnan(loss)` reads the tensor only every 100 steps)."""
        if isinstance(test, cst.BooleanOperation):
            yield from self._operands(test.left)
            if isinstance(test.operator, cst.And) and hotloop.is_interval_test(self.context, test.left):
                return
            yield from self._operands(test.right)
        elif isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            yield from self._operands(test.expression)
        else:
            yield test


class SynchronizeInHotLoop(_SyncRule):
    code = "TL205"
    name = "cuda-synchronize-in-training-loop"
    summary = "`torch.cuda.synchronize()` on every step of a training or evaluation loop."
    message = (
        "`torch.cuda.synchronize()` on every step stalls the host until the GPU is idle: remove it, "
        "or synchronise only on the steps you time or log"
    )
    explanation = _EXPLANATION_COMMON.format(what="`torch.cuda.synchronize()` does nothing else")
    bad = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    torch.cuda.synchronize()\n"
    )
    good = (
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    false_positives = (
        "Timing each step needs a sync to measure the GPU's work; the rule stays silent in loops that read a "
        "clock (`time.time()`, `time.perf_counter()`). Silence a deliberate one with `# noqa: TL205`."
    )
    requires = ("synchronize",)

    def visit_Call(self, node: cst.Call) -> None:
        if last_name(node.func) != "synchronize":
            return
        qual = self.context.qualname(node)
        if qual not in ("torch.cuda.synchronize", "torch.accelerator.synchronize", "torch.mps.synchronize", "torch.xpu.synchronize"):
            return
        loop = per_step(self.context, node)
        if loop is None or self._timed(loop):
            return
        self.report(node)

    def _timed(self, loop: hotloop.Loop) -> bool:
        for call in hotloop.hot_calls_in(self.context, loop):
            name = last_name(call.func)
            if name in _CLOCK_CALLS:
                return True
        return False


class DataDependentShapeInHotLoop(_SyncRule):
    code = "TL206"
    name = "data-dependent-shape-in-training-loop"
    summary = (
        "An operation whose output size depends on tensor values (`x[mask]`, `nonzero()`, `torch.where(cond)`, "
        "`masked_select`, `unique`) on every step of a training loop."
    )
    message = (
        "The output size depends on the data, so the host waits for the GPU to learn it on every step: keep "
        "shapes static (`(x * mask).sum() / mask.sum()`, `torch.where(mask, x, 0)`)"
    )
    explanation = _EXPLANATION_COMMON.format(
        what="an output whose size depends on values: the host must read the count to allocate it"
    )
    bad = (
        "for x, y in loader:\n"
        "    out = model(x)\n"
        "    valid = y != -100\n"
        "    loss = criterion(out[valid], y[valid])\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    good = (
        "for x, y in loader:\n"
        "    out = model(x)\n"
        "    loss = criterion(out, y)  # ignore_index=-100 masks inside the kernel\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    false_positives = (
        "Some algorithms need a data-dependent selection (sampling positives for a detector's loss); the sync "
        "is then the price of the algorithm. Silence it with `# noqa: TL206`."
    )
    default_enabled = False
    _SELECTING = ("nonzero", "masked_select", "unique", "argwhere", "unique_consecutive")

    def visit_Call(self, node: cst.Call) -> None:
        name = last_name(node.func)
        if name not in (*self._SELECTING, "where"):
            return
        qual = self.context.qualname(node)
        if qual is not None:
            if not qual.startswith("torch.") or qual.rsplit(".", 1)[-1] not in (*self._SELECTING, "where"):
                return
            tensor_args = [a.value for a in node.args if a.keyword is None]
            if name == "where" and len(node.args) != 1:
                return
            if not tensor_args or not self.values.is_tensor(tensor_args[0]):
                return
        elif isinstance(node.func, cst.Attribute):
            if name == "where" or not self.values.is_tensor(node.func.value):
                return
        else:
            return
        self._report_in_training(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return
        index = node.slice[0].slice.value
        if not self._is_mask(index):
            return
        if not self.values.is_tensor(node.value):
            return
        self._report_in_training(node)

    def _is_mask(self, index: cst.BaseExpression) -> bool:
        expr = index
        if isinstance(expr, cst.Name):
            value = self.context.assigned_value(expr)
            if value is None:
                return False
            expr = value
        if isinstance(expr, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
                return False
        elif isinstance(expr, cst.Call) and last_name(expr.func) in ("isnan", "isinf", "isfinite", "bool", "eq", "ne", "gt", "lt", "ge", "le", "logical_and", "logical_or", "logical_not"):
            pass
        elif isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            pass
        else:
            return False
        return self.values.is_tensor(expr)

    def _report_in_training(self, node: cst.CSTNode) -> None:
        statement = self.context.enclosing_statement(node)
        if statement is not None and statement is getattr(self, "_last_statement", None):
            return  # one finding per statement
        loop = per_step(self.context, node)
        if loop is not None and hotloop.is_training_loop(self.context, loop):
            self._last_statement = statement
            self.report(node)


# -- one call deep ---------------------------------------------------------------------------------


class _Helpers:
    """Functions and methods defined in this file that read a device value on the host."""

    def __init__(self, context: "Context") -> None:
        self.context = context
        self.functions: dict[str, cst.FunctionDef] = {}
        self.methods: dict[tuple[cst.ClassDef, str], cst.FunctionDef] = {}
        for stmt in context.module.body:
            if isinstance(stmt, cst.FunctionDef):
                self.functions[stmt.name.value] = stmt
            elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                for inner in stmt.body.body:
                    if isinstance(inner, cst.FunctionDef):
                        self.methods[(stmt, inner.name.value)] = inner
        self._syncs: dict[tuple[cst.FunctionDef, bool], Optional[str]] = {}

    def callee(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        func = call.func
        if isinstance(func, cst.Name):
            if self.context.qualname(func) is not None:
                return None
            found = self.functions.get(func.value)
            if found is None:
                return None
            bindings = self.context.lookup(func)
            if not bindings or len(bindings) != 1 or bindings[0].node is not found:
                return None
            return found
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = self.context.enclosing(call, cst.ClassDef)
            if cls is None:
                return None
            return self.methods.get((cls, func.attr.value))  # type: ignore[arg-type]
        return None

    def sync_in(self, function: cst.FunctionDef, training: bool) -> Optional[str]:
        """How `function` syncs (e.g. "`.item()`"), or None. Copies of results to the host
        (`.cpu()`, `.tolist()`) count only when called from a training loop, as for TL201."""
        key = (function, training)
        if key in self._syncs:
            return self._syncs[key]
        self._syncs[key] = None
        values = value_kinds(self.context)
        found = None
        calls = [n for n in scope_nodes(function.body) if isinstance(n, cst.Call)]
        timed = any(last_name(c.func) in _CLOCK_CALLS for c in calls)
        for node in calls:
            func = node.func
            name = last_name(func)
            if isinstance(func, cst.Attribute) and name in ("item", "tolist", "cpu") and not node.args:
                if name != "item" and not training:
                    continue
                kind = values.kind(func.value)
                if kind == T or (name == "item" and kind == UNK):
                    found = f"`.{name}()`"
                    break
            elif isinstance(func, cst.Name) and name in ("float", "int", "bool") and len(node.args) == 1:
                if values.is_tensor(node.args[0].value):
                    found = f"`{name}()` of a tensor"
                    break
            elif name == "synchronize" and self.context.qualname(node) == "torch.cuda.synchronize" and not timed:
                found = "`torch.cuda.synchronize()`"
                break
        self._syncs[key] = found
        return found


class SyncInHelperInHotLoop(_SyncRule):
    code = "TL207"
    name = "sync-in-helper-called-in-training-loop"
    summary = (
        "A call, on every step of a training loop, to a function of the same file that reads a device "
        "value on the host (`.item()`, `float(t)`, `.cpu()`, `torch.cuda.synchronize()`)."
    )
    message = "This helper reads a device value on the host on every step: " + _ADVICE
    _TEMPLATE = "`{name}()` reads a device value on the host ({how}) on every step: " + _ADVICE
    explanation = _EXPLANATION_COMMON.format(what="here inside a helper function")
    bad = (
        "def accuracy(logits, labels):\n"
        "    return (logits.argmax(1) == labels).float().mean().item()\n\n"
        "for x, y in loader:\n"
        "    out = model(x)\n"
        "    loss = criterion(out, y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    accs.append(accuracy(out, y))\n"
    )
    good = (
        "def accuracy(logits, labels):\n"
        "    return (logits.argmax(1) == labels).float().mean()  # a tensor: no sync\n\n"
        "for x, y in loader:\n"
        "    out = model(x)\n"
        "    loss = criterion(out, y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    accs.append(accuracy(out.detach(), y))\n"
        "print(torch.stack(accs).mean().item())\n"
    )
    false_positives = (
        "The helper may sync only on some paths, or on CPU values; the rule reads its body without its "
        "branches. Silence a deliberate call with `# noqa: TL207`."
    )

    def visit_Module(self, node: cst.Module) -> None:
        self._candidates: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) or (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
        ):
            if per_step(self.context, node) is not None:
                self._candidates.append(node)

    def leave_Module(self, node: cst.Module) -> None:
        if not self._candidates:
            return
        helpers = _Helpers(self.context)
        if not helpers.functions and not helpers.methods:
            return
        for call in self._candidates:
            function = helpers.callee(call)
            if function is None or self.context.enclosing_function(call) is function:
                continue
            loop = hotloop.hot_loop(self.context, call)
            training = loop is not None and hotloop.is_training_loop(self.context, loop)
            how = helpers.sync_in(function, training)
            if how is not None:
                self.report(call, self._TEMPLATE.format(name=function.name.value, how=how))
