"""Module and optimizer hooks: forward passes (and whether a backward pass reaches them) and optimizer steps."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils._pytree import tree_leaves

from torchlint.trace.events import ForwardSite
from torchlint.trace.provenance import BATCH, DEVICE, SAMPLE

if TYPE_CHECKING:
    from torchlint.trace.tracer import Tracer


class Hooks:
    def __init__(self, tracer: "Tracer") -> None:
        self.tracer = tracer
        self.depth = 0  # nesting of module calls: only the outermost one is the model's forward pass
        self.modules_seen: "weakref.WeakSet" = weakref.WeakSet()
        self.handles: list = []

    def install(self) -> None:
        self.handles = [
            register_module_forward_pre_hook(self._before_forward),
            register_module_forward_hook(self._after_forward, always_call=True),
            register_optimizer_step_post_hook(self._after_optimizer_step),
        ]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def _mark_parameters(self, module: Any) -> None:
        if module in self.modules_seen:
            return
        self.modules_seen.add(module)
        provenance = self.tracer.provenance
        for tensor in (*module.parameters(), *module.buffers()):
            provenance.mark(tensor, DEVICE)

    def _before_forward(self, module: Any, args: Any) -> None:
        if torch.compiler.is_compiling():  # traced into a torch.compile graph: nothing to watch there
            return
        self._mark_parameters(module)
        if self.depth == 0:
            tracer = self.tracer
            tracer.clock.start()
            tracer.clock.busy = True
            provenance = tracer.provenance
            tensors = [value for value in tree_leaves(args) if isinstance(value, torch.Tensor)]
            if provenance.combined(tensors, None) & SAMPLE:
                tracer.sample_launch(type(module).__name__, tensors, None)
            for value in tensors:
                if value.dim() > 0:
                    provenance.mark(value, BATCH)
        self.depth += 1

    def _after_forward(self, module: Any, args: Any, output: Any) -> None:
        if torch.compiler.is_compiling():
            return
        self.depth = max(0, self.depth - 1)
        if self.depth or output is None:
            return
        tracer = self.tracer
        outputs = [t for t in tree_leaves(output) if isinstance(t, torch.Tensor)]
        for tensor in outputs:
            tracer.provenance.mark(tensor, DEVICE)
        if not torch.is_grad_enabled():
            return
        with_grad = [t for t in outputs if t.requires_grad]
        if not with_grad:
            return
        stack = tracer.user.stack(2)
        if not stack:
            return
        site = tracer.events.forwards.get(stack[0])
        if site is None:
            site = tracer.events.forwards[stack[0]] = ForwardSite(stack[0], stack)
        site.with_grad += 1
        step = tracer.clock.index
        if step is not None:
            site.in_steps += 1
            site.steps.add(step)
        reached = [False]

        def on_gradient(grad: Any) -> None:
            # Called when a backward pass (or autograd.grad) computes a gradient for this output.
            if not reached[0]:
                reached[0] = True
                site.reached += 1

        for tensor in with_grad:
            tensor.register_hook(on_gradient)

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not torch.compiler.is_compiling():
            self.tracer.clock.optimizer_stepped()
