"""The semantic model of one file: every question a rule asks about what the code means, in one place.

Each answer is computed on first use and kept for the file, so rules that ask the same question share
the work and, above all, get the same answer. The analyses live in the sibling modules (one concept
each); this class is the one door rules go through.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.semantic import datasets, device_batches, file_kind, host_use, hot_paths, loops, modules, one_shot, placement
from torchlint.semantic.boxes import BoxLoops, box_loops
from torchlint.semantic.calls import FunctionSummaries
from torchlint.semantic.grad_mode import FileFacts, collect_grad_facts
from torchlint.semantic.layers import LayerOrder
from torchlint.semantic.loaders import Flow, is_dataloader
from torchlint.semantic.objects import Objects, objects
from torchlint.semantic.samples import PerSampleLoops
from torchlint.semantic.values import ValueKinds

if TYPE_CHECKING:
    from torchlint.lint.context import Context


class SemanticModel:
    """What one file's code means. Reach it as `rule.semantic` (one instance per file)."""

    def __init__(self, context: "Context") -> None:
        self.context = context

    # -- the file ---------------------------------------------------------------------------------
    @cached_property
    def is_test_module(self) -> bool:
        """A module of a test suite (not a user's own evaluation script named test.py)."""
        source = self.context.source
        return file_kind.is_test_file(source.path, source.text)

    @cached_property
    def uses_torch(self) -> bool:
        return file_kind.uses_torch(self.context.source.text)

    # -- placement --------------------------------------------------------------------------------
    @cached_property
    def uses_accelerator(self) -> bool:
        """Whether the program puts data on a GPU or another accelerator at all. When it does not, nothing
        runs asynchronously: host reads and main-process loading cost nothing extra."""
        return placement.on_accelerator(self.context)

    @cached_property
    def imported_by_accelerated(self) -> bool:
        """No accelerator in this file, but a project file that puts data on one imports it (see `placement`)."""
        return placement.imported_by_accelerated(self.context)

    def on_accelerator_at(self, node: cst.CSTNode) -> bool:
        """`node` runs in a program that puts data on an accelerator: this file does, or a file that does
        imports it and `node` is not in its `__main__` block (which runs only when the file is a script)."""
        if self.uses_accelerator:
            return True
        return self.imported_by_accelerated and not file_kind.main_guarded(self.context, node)

    def is_device(self, expr: cst.BaseExpression) -> bool:
        """`device`, `args.device`, `"cuda"`, `torch.device(...)`, `rank`: an expression naming a device."""
        return placement.is_device_argument(self.context, expr)

    def device_kind(self, expr: cst.BaseExpression) -> Optional[str]:
        """"accel" for an accelerator device, "cpu" for the CPU, None when it cannot be told."""
        return placement.device_kind(self.context, expr)

    # -- values -----------------------------------------------------------------------------------
    @cached_property
    def values(self) -> ValueKinds:
        """What an expression evaluates to: a (possibly device) tensor, a host value, or unknown."""
        return ValueKinds(self.context)

    def is_tensor(self, expr: cst.CSTNode) -> bool:
        return self.values.is_tensor(expr)

    @property
    def objects(self) -> Objects:
        """What kind of object a name holds: module, optimizer, scheduler, scaler, loader, dataset, device."""
        return objects(self.context)

    def is_module(self, expr: cst.BaseExpression) -> bool:
        """An `nn.Module` instance (a name bound to one, or a model-like receiver such as `self.net`)."""
        return modules.is_module_like_receiver(self.context, expr)

    def runs_forward(self, call: cst.Call) -> bool:
        """`call` runs a model's forward pass."""
        return loops.is_forward_call(self.context, call)

    @cached_property
    def layer_order(self) -> LayerOrder:
        """Which layer feeds which (nn.Sequential runs, forward() of module classes)."""
        return LayerOrder(self.context)

    # -- data loading -----------------------------------------------------------------------------
    @cached_property
    def loaders(self) -> Flow:
        """Which DataLoaders an expression may hold, their settings, the loops over them and the copies
        of their batches."""
        return Flow(self.context)

    def is_loader(self, expr: cst.BaseExpression) -> bool:
        """Iterating `expr` iterates a DataLoader: built by one, bound to one, or (nothing binds it) named like one."""
        return loops.is_loader_expr(self.context, expr)

    def is_dataloader(self, call: cst.CSTNode) -> bool:
        return is_dataloader(self.context, call)

    def loads_from_memory(self, loader: cst.Call) -> bool:
        """The loader's dataset is already in memory (tensors, a list of ready samples)."""
        return datasets.in_memory_loader(self.context, loader)

    def loads_prepared_hf_data(self, loader: cst.Call) -> bool:
        """The loader reads a Hugging Face dataset tokenized ahead of time."""
        return datasets.prepared_hf_loader(self.context, loader)

    def dataset_on_device(self, loader: cst.Call) -> bool:
        """The loader's dataset was built on a device (its items are already there)."""
        return datasets.dataset_given_device(self.context, loader)

    def batches_on_device(self, loader: cst.Call) -> bool:
        """The loader's batches are already on an accelerator (see `device_batches`)."""
        return device_batches.batches_on_device(self.context, loader)

    # -- loops ------------------------------------------------------------------------------------
    def hot_loop(self, node: cst.CSTNode) -> Optional[loops.Loop]:
        """The innermost loop whose body runs `node` once per step."""
        return loops.hot_loop(self.context, node)

    def per_step(self, node: cst.CSTNode) -> Optional[loops.Loop]:
        """The step loop that runs `node` on every trip (not only under a logging interval)."""
        return loops.per_step(self.context, node)

    def every_step(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """What runs `node` once per step: the step loop, else the `forward()` of a module class."""
        return loops.every_step(self.context, node)

    def element_read(self, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """The collection whose elements `expr` reads one per trip of a loop (`boxes` for `boxes[i]`)."""
        return loops.element_read(self.context, expr)

    def is_hot(self, loop: loops.Loop) -> bool:
        return loops.is_hot(self.context, loop)

    def is_training_loop(self, loop: loops.Loop) -> bool:
        return loops.is_training_loop(self.context, loop)

    def gated(self, node: cst.CSTNode, loop: cst.CSTNode) -> bool:
        """`node` runs on only some trips of `loop` (a logging interval)."""
        return loops.gated(self.context, node, loop)  # type: ignore[arg-type]

    def is_interval_test(self, test: cst.BaseExpression) -> bool:
        return loops.is_interval_test(self.context, test)

    def step_function(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        """The one-step training function that runs `node` once per call."""
        return loops.step_function(self.context, node)

    def on_hot_path(self, node: cst.CSTNode, data: tuple[cst.BaseExpression, ...] = ()) -> bool:
        """`node` runs once per step, sample or batch, not once per run; `data` are the expressions that size
        or place what it builds (see `hot_paths`)."""
        return hot_paths.on_hot_path(self.context, node, data)

    def runs_once(self, node: cst.CSTNode) -> bool:
        """Nothing repeats the code holding `node`: a demo, a notebook cell, a function called once (see
        `one_shot`)."""
        return one_shot.runs_once(self.context, node)

    def called_every_step(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        """The function holding `node` when a step loop calls it, in this file or another (see `hot_paths`)."""
        return hot_paths.called_every_step(self.context, node)

    def forward_loop(self, node: cst.CSTNode) -> Optional[loops.Loop]:
        """The loop that runs `node` on every trip and a model's forward pass on each (a sampler's denoising
        steps, an evaluation over a list of batches), whether or not it is a step loop (see `hot_paths`)."""
        return hot_paths.forward_loop(self.context, node)

    def needed_on_host(self, read: cst.Call) -> bool:
        """The program needs the value of a host read (or of a call returning one) on the host by design: it
        goes to an environment's step or a host structure, or sizes a Python loop (see `host_use`)."""
        return host_use.needed_on_host(self.context, read)

    def drained_by_needed_read(self, read: cst.Call) -> bool:
        """A read right after one the program needs, with no device work queued between (see `host_use`)."""
        return host_use.drained_by_needed_read(self.context, read)

    def guards_non_finite(self, read: cst.Call) -> bool:
        """A NaN guard that stops the run is the read value's only use (see `host_use`)."""
        return host_use.guards_non_finite(self.context, read)

    def calls_in(self, loop: loops.Loop) -> list[cst.Call]:
        """The calls a loop's body makes itself."""
        return loops.hot_calls_in(self.context, loop)

    # -- calls ------------------------------------------------------------------------------------
    @cached_property
    def calls(self) -> FunctionSummaries:
        """The functions and methods this file defines, and what each does for its callers."""
        return FunctionSummaries(self.context, self.values)

    @cached_property
    def per_sample_loops(self) -> PerSampleLoops:
        """Which loops and comprehensions run per sample of a batch."""
        return PerSampleLoops(self.context)

    @cached_property
    def box_loops(self) -> BoxLoops:
        """Which loops handle the boxes of a detection one at a time (NMS, per-class NMS, crops)."""
        return box_loops(self.context)

    # -- grad mode --------------------------------------------------------------------------------
    @cached_property
    def grad(self) -> FileFacts:
        """What each function does about autograd: no-grad blocks, decorators, callers, modes."""
        return collect_grad_facts(self.context)


def semantic_model(context: "Context") -> SemanticModel:
    """The file's one semantic model."""
    return context.shared(SemanticModel)
