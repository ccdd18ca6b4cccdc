"""Tensor shapes for graph nodes, seen while the original model runs on the example inputs.

Shapes come from forward hooks on the model's modules during the run that records the reference outputs, so they
cost no extra forward pass. The traced graphs call the very same leaf modules, which is how a shape seen by a hook
finds its graph node. A module called several times with different shapes gives no shape.
"""

from __future__ import annotations

import torch
from torch import fx, nn

META_KEY = "torchlint_shape"


class ShapeRecorder:
    def __init__(self, model: nn.Module) -> None:
        self.calls: dict[int, set[tuple]] = {}
        self._handles = [m.register_forward_hook(self._record) for m in model.modules()]

    def _record(self, module, args, output) -> None:
        first = args[0] if args else None
        shape_in = tuple(first.shape) if isinstance(first, torch.Tensor) else None
        shape_out = tuple(output.shape) if isinstance(output, torch.Tensor) else None
        self.calls.setdefault(id(module), set()).add((shape_in, shape_out))

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def annotate(self, gm: fx.GraphModule) -> None:
        """Put the recorded shapes on the graph's call_module nodes and on their inputs."""
        for node in gm.graph.nodes:
            if node.op != "call_module":
                continue
            calls = self.calls.get(id(gm.get_submodule(node.target)))
            if not calls or len(calls) != 1:
                continue
            (shape_in, shape_out), = calls
            if shape_out is not None:
                node.meta[META_KEY] = shape_out
            source = node.args[0] if node.args else None
            if shape_in is not None and isinstance(source, fx.Node):
                node_shape = source.meta.get(META_KEY)
                source.meta[META_KEY] = shape_in if node_shape in (None, shape_in) else None
