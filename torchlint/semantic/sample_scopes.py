"""How each name of a function (or of the module) is bound, for the per-sample analysis: parameters,
assignments, unpackings, loop targets, names used as tensors, and whether the function processes batches
(`forward`, a loss, a train/eval step, a method of a module class)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import flatten_targets
from torchlint.lint.walk import scope_nodes
from torchlint.semantic.objects import objects

# Functions whose tensor parameters are batches (besides `forward`).
_BATCH_FUNCTION = re.compile(r"^(forward|__call__)$|loss|criterion|(^|_)(train|training|eval|evaluate|validate|validation|test)(_|$)|(^|_)step$|predict|infer|accuracy|metric|(^|_)(mse|mae|rmse|dice|psnr)(_|$)", re.IGNORECASE)

# A docstring that says the function takes batches ("Dice coeff for batches", "x: a batch of images").
_BATCH_DOC = re.compile(r"\bbatch(es)?\b", re.IGNORECASE)


@dataclass
class Scope:
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


_TENSOR_ATTRIBUTES = frozenset(
    {"size", "shape", "view", "reshape", "dim", "ndim", "unsqueeze", "permute", "transpose", "device", "dtype", "flatten", "to", "cuda", "float", "is_cuda", "t"}
)

# torch functions that also take a list or a tuple of tensors (or build a tensor from Python data).
_TAKE_LISTS = frozenset(
    "stack cat concat concatenate hstack vstack dstack column_stack row_stack block_diag broadcast_tensors "
    "cartesian_prod meshgrid tensor as_tensor is_tensor numel save load einsum".split()
)


def _may_be_tensor(annotation: cst.BaseExpression) -> bool:
    """Whether the annotation's code can read `Tensor` or `torch.Tensor`: only a name or an attribute called
    `Tensor` can (a cheap test before the code is rendered)."""
    if isinstance(annotation, cst.Name):
        return annotation.value == "Tensor"
    return isinstance(annotation, cst.Attribute) and annotation.attr.value == "Tensor"


class Scopes:
    """The name facts of every function of one file, built on first use."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._scopes: dict[cst.CSTNode, Scope] = {}
        self._class_methods: dict[cst.CSTNode, frozenset[str]] = {}

    def of(self, node: cst.CSTNode) -> Scope:
        """The scope of the function `node` is in (the module outside functions)."""
        function = self.context.enclosing(node, cst.FunctionDef)
        return self.of_function(function if function is not None else self.context.module)

    def of_function(self, key: cst.CSTNode) -> Scope:
        """The scope of a function (or of the module) itself."""
        found = self._scopes.get(key)
        if found is None:
            found = self._scopes[key] = self._build(key)
        return found

    def outer(self, scope: Scope) -> Optional[Scope]:
        if isinstance(scope.node, cst.Module):
            return None
        return self.of(scope.node)

    def assigned_anywhere(self, scope: Scope, name: str) -> list[cst.BaseExpression]:
        """The values assigned to `name` in the innermost enclosing scope that binds it."""
        current: Optional[Scope] = scope
        while current is not None:
            if name in current.assigns or name in current.params or name in current.loops:
                return current.assigns.get(name, [])
            current = self.outer(current)
        return []

    def _build(self, node: cst.CSTNode) -> Scope:
        scope = Scope(node)
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
            kind = type(child)  # libcst's node classes have no subclasses: one lookup instead of four tests
            if kind is cst.Assign:
                for target in child.targets:  # type: ignore[attr-defined]
                    self._bind_target(scope, target.target, child.value)  # type: ignore[attr-defined]
            elif kind is cst.AnnAssign:
                if child.value is not None:  # type: ignore[attr-defined]
                    self._bind_target(scope, child.target, child.value)  # type: ignore[attr-defined]
            elif kind is cst.For or kind is cst.CompFor:
                self._bind_loop(scope, child.target, child.iter)  # type: ignore[attr-defined]
            elif kind is cst.Attribute and isinstance(child.value, cst.Name):  # type: ignore[attr-defined]
                if child.attr.value in _TENSOR_ATTRIBUTES:  # type: ignore[attr-defined]
                    scope.tensor_used.add(child.value.value)  # type: ignore[attr-defined]
            elif kind is cst.BinaryOperation and type(child.operator) is cst.MatrixMultiply:  # type: ignore[attr-defined]
                # `emb @ emb.t()`: only tensors and arrays multiply as matrices
                for side in (child.left, child.right):  # type: ignore[attr-defined]
                    if isinstance(side, cst.Name):
                        scope.tensor_used.add(side.value)
            elif kind is cst.Call and scope.params:
                scope.tensor_used.update(self._torch_operands(child, scope))  # type: ignore[arg-type]
        if isinstance(node, cst.FunctionDef):
            for param in [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]:
                annotation = param.annotation
                if annotation is not None and _may_be_tensor(annotation.annotation) and re.fullmatch(
                    r"(torch\.)?Tensor", self.context.code(annotation.annotation).strip()
                ):
                    scope.tensor_used.add(param.name.value)
        return scope

    def _torch_operands(self, call: cst.Call, scope: Scope) -> list[str]:
        """Parameters handed to a torch function that computes on a tensor (`torch.cdist(emb, emb)`,
        `F.normalize(x)`); not to one that also takes a list (`torch.stack(feats)`)."""
        names = [a.value.value for a in call.args if isinstance(a.value, cst.Name) and a.value.value in scope.params]
        if not names:
            return []
        qualname = self.context.qualname(call) or ""
        computes = qualname.startswith("torch.nn.functional.") or (
            qualname.count(".") == 1 and qualname.startswith("torch.") and qualname[6:] not in _TAKE_LISTS
        )
        return names if computes else []

    def _bind_target(self, scope: Scope, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            scope.assigns.setdefault(target.value, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for position, element in enumerate(target.elements):
                if isinstance(element.value, cst.Name):
                    scope.unpacks.setdefault(element.value.value, []).append((value, position))

    def _bind_loop(self, scope: Scope, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
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
