"""Tracing with torch.fx, falling back to the largest submodules that trace when the whole model does not."""

from __future__ import annotations

import collections
import copy
import os
import traceback
from dataclasses import dataclass, field

import torch
from torch import fx, nn
from torch.nn.modules.batchnorm import _BatchNorm

from .export import export_graph
from .modules import OPTIMIZER_MODULES

_TORCH_DIR = os.path.dirname(torch.__file__)
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


class Tracer(fx.Tracer):
    """fx's tracer, plus: BatchNorm layers and the optimizer's own modules stay leaves.

    fx traces into BatchNorm2d's own forward and then fails on its input-dimension check; as a leaf it is one
    call_module node that the folding pass can inspect with isinstance. A subclass with a forward of its own
    (timm's BatchNormAct2d: batch norm, then dropout and an activation) is traced through when it traces alone,
    so its F.batch_norm can be folded and its activation fused like any other.
    """

    def trace(self, root, concrete_args=None):
        self.traced_norms = {id(m) for m in root.modules() if _own_forward_traces(m)} if isinstance(
            root, nn.Module) else set()
        return super().trace(root, concrete_args)

    def create_arg(self, a):
        # fx turns every dict into a plain dict; an OrderedDict (torchvision's segmentation models return one)
        # stays an OrderedDict.
        if type(a) is collections.OrderedDict:
            return self.create_node("call_function", collections.OrderedDict, (self.create_arg(list(a.items())),), {})
        return super().create_arg(a)

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        if isinstance(m, _BatchNorm):
            return id(m) not in self.traced_norms
        if isinstance(m, OPTIMIZER_MODULES):
            return True
        return super().is_leaf_module(m, qualname)


def _own_forward_traces(module: nn.Module) -> bool:
    """A BatchNorm subclass whose own forward (not BatchNorm's) traces on its own."""
    if not isinstance(module, _BatchNorm) or type(module).forward in (_BatchNorm.forward, nn.SyncBatchNorm.forward):
        return False
    try:
        fx.Tracer().trace(module)
    except Exception:  # noqa: BLE001 - any failure means: keep it a leaf, as before
        return False
    return True


def trace(module: nn.Module) -> fx.GraphModule:
    graph = Tracer().trace(module)
    name = type(module).__name__
    gm = fx.GraphModule(module, graph, name)
    _keep_plain_attributes(module, gm)
    return gm


def copy_graph_module(gm: fx.GraphModule) -> fx.GraphModule:
    """A new GraphModule with a copy of the graph and its own module hierarchy, sharing the leaf modules."""
    new = fx.GraphModule(gm, copy.deepcopy(gm.graph), type(gm).__name__)
    _keep_plain_attributes(gm, new)
    return new


def _keep_plain_attributes(original: nn.Module, gm: fx.GraphModule) -> None:
    # A parent that fx could not trace may read plain attributes of the child we replace
    # (`self.block.out_channels`); carry them over so that code keeps working.
    for key, value in vars(original).items():
        if key.startswith("_") or key == "training" or hasattr(gm, key):
            continue
        if isinstance(value, (bool, int, float, str, tuple, type(None))):
            setattr(gm, key, value)


@dataclass
class Untraced:
    path: str
    reason: str


@dataclass
class Traced:
    root: nn.Module  # the model with its traced pieces swapped in (a GraphModule when the whole model traced)
    pieces: list[str]  # dotted paths of the traced pieces ("" for the root)
    untraced: list[Untraced]  # modules that did not trace, and why
    original: nn.Module  # the model as it was
    replaced: list[tuple[nn.Module, str, nn.Module]]  # (parent, attribute, original child) for each swapped piece
    exported: bool = False  # the whole model was captured with torch.export, not traced with torch.fx
    # Each module's parameters and their tensors as traced: the graphs share the leaf modules with the original,
    # and passes give those layers new weights (or re-lay out their data in training mode).
    weights: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.weights = [(m, dict(m._parameters), [(p, p.data) for p in m._parameters.values() if p is not None])
                        for m in self.original.modules()]

    def undo(self) -> nn.Module:
        """Put the original modules and their weights back and return the original model."""
        for parent, name, child in self.replaced:
            setattr(parent, name, child)
        for module, parameters, data in self.weights:
            module._parameters.update(parameters)
            for param, tensor in data:
                param.data = tensor
        return self.original


def trace_largest(model: nn.Module, follow_mode: bool = False, export_inputs: tuple | None = None) -> Traced:
    """Trace `model`, or failing that its largest traceable descendants, swapping them in place.
    Built-in torch.nn modules that do not trace are kept as they are.

    With export_inputs (args, kwargs), a model that torch.fx cannot trace whole is captured with torch.export
    (non-strict) before falling back to its descendants.

    With follow_mode, a module whose traced graph depends on its train/eval mode (code reading self.training,
    such as stochastic depth or F.dropout(x, training=self.training)) is not traced, since the graph would fix
    the current mode's branch; its children are tried instead. Leaf modules (Dropout, BatchNorm) read their mode
    at run time, so a graph holding them follows .train()/.eval()."""
    pieces: list[str] = []
    untraced: list[Untraced] = []
    replaced: list[tuple[nn.Module, str, nn.Module]] = []

    def visit(module: nn.Module, path: str, tried: bool = False) -> nn.Module:
        if not tried and not isinstance(module, (nn.ModuleList, nn.ModuleDict)):
            try:
                gm = trace(module)
                if follow_mode and _depends_on_mode(module, gm):
                    raise _ModeDependent()
            except _ModeDependent:
                untraced.append(Untraced(path, "its forward depends on train/eval mode (self.training): a graph "
                                               "would keep the current mode's branch after .eval()"))
            except Exception as error:  # noqa: BLE001 - fx raises many kinds of errors
                untraced.append(Untraced(path, describe_trace_error(error)))
            else:
                pieces.append(path)
                return gm
        for name, child in list(module.named_children()):
            if _worth_descending(child):
                child_path = f"{path}.{name}" if path else name
                new_child = visit(child, child_path)
                if new_child is not child:
                    setattr(module, name, new_child)
                    replaced.append((module, name, child))
        return module

    tried = False
    if export_inputs is not None and not follow_mode:
        try:
            return Traced(trace(model), [""], [], model, [])
        except Exception as error:  # noqa: BLE001 - fx raises many kinds of errors
            reason = describe_trace_error(error)
        try:
            return Traced(export_graph(model, *export_inputs), [""], [], model, [], exported=True)
        except Exception as error:  # noqa: BLE001 - export raises many kinds of errors too
            untraced.append(Untraced("", f"torch.fx: {reason}; torch.export: {describe_trace_error(error)}"))
            tried = True
    return Traced(visit(model, "", tried), pieces, untraced, model, replaced)


class _ModeDependent(Exception):
    pass


def _depends_on_mode(module: nn.Module, gm: fx.GraphModule) -> bool:
    """Whether tracing `module` in the other mode gives another graph."""
    modes = [(m, m.training) for m in module.modules()]
    for m, training in modes:
        m.training = not training  # set directly: a module's own train() may do more than set the flag
    try:
        other = trace(module)
    except Exception:  # noqa: BLE001 - does not even trace in the other mode
        return True
    finally:
        for m, training in modes:
            m.training = training
    return other.code != gm.code


def _worth_descending(module: nn.Module) -> bool:
    # A built-in module (Conv2d, TransformerEncoder...) traced as a root only exposes its own functional calls,
    # which no pass improves; user modules and containers may hold conv + BatchNorm pairs.
    if isinstance(module, _CONTAINERS):
        return True
    if isinstance(module, OPTIMIZER_MODULES) or not any(True for _ in module.children()):
        return False
    return not type(module).__module__.startswith("torch.")


def describe_trace_error(error: BaseException) -> str:
    """One line: the error and, when it came from user code, the file and line that fx could not trace."""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(_TORCH_DIR)]
    user = [f for f in frames if not f.filename.startswith(os.path.dirname(__file__))]
    if user:
        frame = user[-1]
        code = f": {frame.line.strip()}" if frame.line else ""
        text += f" (at {os.path.basename(frame.filename)}:{frame.lineno}{code})"
    return text
