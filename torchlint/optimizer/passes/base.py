"""What every pass receives and how it reports, plus small graph helpers the passes share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import fx, nn
from torch.fx.passes.infra.pass_base import PassResult

from ..report import REWROTE, SKIPPED, Report


@dataclass
class PassContext:
    """What one pass sees while it runs on one graph (a new context for every pass and traced piece)."""

    report: Report
    pass_name: str
    training: bool
    device_type: str  # "cpu", "cuda", ...
    piece: str = ""  # dotted path of the traced module this graph came from ("" for the root)
    autocast_dtype: torch.dtype | None = None
    # Whether optimize()'s time budget is spent: a pass working layer by layer asks between layers and stops
    # (what it rewrote so far stays), so a pass started before the end of the budget does not run long past it.
    out_of_time: Callable[[], bool] = lambda: False

    def where(self, target: str) -> str:
        return f"{self.piece}.{target}" if self.piece and target else (self.piece or target)

    def rewrote(self, target: str, detail: str) -> None:
        self.report.add(self.pass_name, REWROTE, self.where(target), detail)

    def skipped(self, target: str, detail: str) -> None:
        self.report.add(self.pass_name, SKIPPED, self.where(target), detail)


@dataclass(frozen=True)
class Pass:
    """A named rewrite. `run(module, ctx)` returns a PassResult(graph_module, modified): the rewritten module and
    whether anything changed (a plain module is accepted from user passes; then the report says whether it did).

    Graph passes get a copy of each traced GraphModule whose leaf modules (and their tensors) are shared with the
    version kept for a rollback: they may rewrite the graph and add or replace submodules and parameters, but
    must not edit a shared module's tensors in place. Whole-model passes (`whole_model=True`) get the root module
    once, traced or not.
    """

    name: str
    run: Callable[[nn.Module, PassContext], PassResult | nn.Module]
    summary: str
    eval_only: bool = False
    cpu_only: bool = False
    whole_model: bool = False
    edits_modules: bool = True  # whole-model passes only: whether undoing needs a copy of the module tree


def submodules(gm: fx.GraphModule) -> dict[str, nn.Module]:
    return dict(gm.named_modules())


def set_submodule(gm: fx.GraphModule, target: str, module: nn.Module) -> None:
    parent_path, _, name = target.rpartition(".")
    parent = gm.get_submodule(parent_path) if parent_path else gm
    setattr(parent, name, module)


def call_sites(gm: fx.GraphModule, target: str) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_module" and n.target == target)


def fresh_name(gm: fx.GraphModule, base: str) -> str:
    """An unused top-level attribute name for a new submodule derived from `base`."""
    name, i = base.replace(".", "_"), 1
    while hasattr(gm, name):
        name, i = f"{base.replace('.', '_')}_{i}", i + 1
    return name


def tensor_shape(node) -> tuple[int, ...] | None:
    """The shape `node` had on the example inputs, if known (recorded by the optimizer or by fx's ShapeProp)."""
    if not isinstance(node, fx.Node):
        return None
    if node.meta.get("torchlint_shape") is not None:
        return tuple(node.meta["torchlint_shape"])
    shape = getattr(node.meta.get("tensor_meta"), "shape", None)
    if shape is None:  # torch.export records a fake tensor, whose sizes may be symbolic
        shape = getattr(node.meta.get("val"), "shape", None)
    return tuple(shape) if shape is not None else None


def finish(gm: fx.GraphModule) -> fx.GraphModule:
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm


# Ops that return a new tensor (never a view of an input), so a value they produce may be overwritten in place.
FRESH_OUTPUT_MODULES = (
    nn.modules.conv._ConvNd,
    nn.Linear,
    nn.modules.batchnorm._BatchNorm,
    nn.LayerNorm,
    nn.GroupNorm,
    nn.modules.pooling._MaxPoolNd,
    nn.modules.pooling._AvgPoolNd,
    nn.modules.pooling._AdaptiveAvgPoolNd,
)
