"""TL501 empty-cache-in-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.rule import FixSafety, Rule


class EmptyCacheInLoop(Rule):
    code = "TL501"
    name = "empty-cache-in-loop"
    family = "Memory"
    summary = "`torch.cuda.empty_cache()` on every step of a training or evaluation loop."
    message = (
        "`torch.cuda.empty_cache()` on every step returns cached blocks to the driver, only for the next step to "
        "allocate them again (and it synchronises): remove it, or call it once after the loop"
    )
    explanation = (
        "PyTorch's CUDA caching allocator keeps freed blocks to serve the next allocation of the same size "
        "without calling `cudaMalloc`. `empty_cache()` hands every unused cached block back to the driver: the "
        "next step then pays `cudaMalloc`/`cudaFree` again for all its activations (each a synchronising call "
        "costing tens of microseconds to milliseconds), and the flush itself waits for the device. It does not "
        "give your own process more memory: tensors still referenced stay allocated. PyTorch's CUDA semantics "
        "notes say it \"will not increase the amount of GPU memory available for PyTorch\"; it only helps other "
        "processes sharing the GPU. Reported only when it runs on every step (not under `if step % N == 0:`)."
    )
    bad = (
        "for x, y in train_loader:\n"
        "    loss = criterion(model(x.cuda()), y.cuda())\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    optimizer.zero_grad()\n"
        "    torch.cuda.empty_cache()\n"
    )
    good = (
        "for x, y in train_loader:\n"
        "    loss = criterion(model(x.cuda()), y.cuda())\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    optimizer.zero_grad(set_to_none=True)\n"
        "torch.cuda.empty_cache()  # once, if another process needs the memory\n"
    )
    false_positives = (
        "Sharing one GPU with another process that needs the memory between steps, or working around "
        "fragmentation with wildly varying input sizes (prefer `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`). "
        "Silence a deliberate call with `# noqa: TL501`."
    )
    fix_safety = FixSafety.NONE
    requires = ("empty_cache",)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "empty_cache":
            return
        if self.context.qualname(node) not in ("torch.cuda.empty_cache", "torch.mps.empty_cache", "torch.xpu.empty_cache"):
            return
        if self.semantic.per_step(node) is not None:
            self.report(node)
