"""What the code itself shows a value to be, whatever its origin (a parameter of a helper, what any call
returns): a tensor, by what makes it or a use only a tensor allows (`x.size(0)`, `x.detach()`, `torch.exp(x)`;
uses a NumPy array or a module shares, `x.shape`, `x.to(device)`, are no evidence), or a host array
(`x = x.cpu().numpy()` where it is read)."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.walk import descendants
from torchlint.semantic.sample_scopes import Scope
from torchlint.semantic.values import value_kinds

# Methods and attributes of a tensor that a NumPy array, a list, a module or a batch object does not have
# (a module also has `.to()`, `.cuda()`, `.float()`; a tokenizer's batch has `.to()`).
_TENSOR_ONLY = frozenset(
    "size unsqueeze permute is_cuda detach contiguous long masked_fill new_zeros new_ones new_full new_empty "
    "type_as expand numel dim".split()
)

# torch functions that also take a list or a tuple (or Python data): no evidence of a tensor.
_TAKE_LISTS = frozenset(
    "stack cat concat concatenate hstack vstack dstack column_stack row_stack block_diag broadcast_tensors "
    "cartesian_prod meshgrid tensor as_tensor is_tensor numel save load einsum from_numpy Tensor "
    "FloatTensor LongTensor".split()
)

_NUMBERS = frozenset("size numel dim is_cuda".split())  # tensor-only, but what they return is not a tensor

# torch functions that build a tensor from sizes or ranges, and those that cut one into pieces.
_FACTORIES = frozenset(
    "arange linspace logspace zeros ones empty full rand randn randint randperm eye zeros_like ones_like "
    "empty_like full_like rand_like randn_like".split()
)
_PIECES = frozenset("chunk split tensor_split unbind split_with_sizes".split())

_CONTAINERS = (cst.List, cst.ListComp, cst.Tuple, cst.GeneratorExp, cst.Dict, cst.DictComp)


def shown_tensor(context: Context, scope: Scope, expr: cst.BaseExpression) -> bool:
    """`expr` is a name of `scope`, never bound to a Python container, not on the host
    where it is read, that the function binds to what a tensor operation makes or uses as only a tensor can
    be used. A module's output is no evidence: it may be a list of features."""
    if not isinstance(expr, cst.Name) or host_array(context, expr) or value_kinds(context).kind(expr) == "cpu":
        return False  # rows copied to the host first (`t = t.detach().cpu()`): host work, PIL or NumPy
    name = expr.value
    values = scope.assigns.get(name, [])
    if any(isinstance(value, _CONTAINERS) for value in values):
        return False  # rebound to a list or a tuple somewhere: not one tensor
    if any(_built_or_cut(context, value) for value in values):
        return False  # `torch.linspace(...)`, `x.chunk(2)`: a grid of values, a buffer or pieces, not samples
    if any(_tensor_made(context, value) for value in values):
        return True
    return any(_tensor_use(context, node, name) for node in descendants(scope.node))


def _tensor_made(context: Context, value: cst.BaseExpression) -> bool:
    """`x.detach()`, `x.contiguous()`, `torch.exp(x)`: what only a tensor operation returns."""
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Attribute) and value.func.attr.value in _TENSOR_ONLY - _NUMBERS:
        return True
    return _torch_op(context, value)


def _built_or_cut(context: Context, value: cst.BaseExpression) -> bool:
    for node in [value, *descendants(value)]:
        if not isinstance(node, cst.Call):
            continue
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _PIECES:
            return True
        qualname = context.qualname(node) or ""
        if qualname.startswith("torch.") and qualname.rsplit(".", 1)[-1] in _FACTORIES | _PIECES:
            return True
    return False


def host_array(context: Context, name: cst.BaseExpression) -> bool:
    """The binding of `name` that its use reads makes it a NumPy array (`.numpy()`, `np.asarray(...)`)."""
    if not isinstance(name, cst.Name):
        return False
    binding = value_kinds(context).reaching_binding(name, context.lookup(name) or [])
    value = getattr(binding, "value", None)
    while isinstance(value, cst.Call):
        if isinstance(value.func, cst.Attribute) and value.func.attr.value == "numpy" and not value.args:
            return True
        if (context.qualname(value) or "").startswith("numpy."):
            return True
        if not isinstance(value.func, cst.Attribute):
            return False
        value = value.func.value  # `x.numpy().transpose(0, 2, 3, 1)`: still the array
    return False


def _tensor_use(context: Context, node: cst.CSTNode, name: str) -> bool:
    if isinstance(node, cst.Attribute):
        if not (isinstance(node.value, cst.Name) and node.value.value == name and node.attr.value in _TENSOR_ONLY):
            return False
        call = context.parent(node)
        return node.attr.value != "size" or (isinstance(call, cst.Call) and call.func is node)  # an array's size is an int
    if not isinstance(node, cst.Call) or not node.args:
        return False
    first = node.args[0].value
    if not (isinstance(first, cst.Name) and first.value == name and node.args[0].keyword is None):
        return False
    return _torch_op(context, node)


def _torch_op(context: Context, call: cst.Call) -> bool:
    """A torch function that computes on a tensor (not one that also takes a list, or cuts pieces)."""
    qualname = context.qualname(call) or ""
    if qualname.startswith("torch.nn.functional."):
        return True
    return qualname.count(".") == 1 and qualname.startswith("torch.") and qualname[6:] not in _TAKE_LISTS
