"""TL303 zero-grad-set-to-none-false."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.calls import argument, has_star_args, has_star_kwargs
from torchlint.lint.rule import Fix, FixSafety, Replace, Rule
from torchlint.rules.autograd._common import FAMILY


class ZeroGradSetToNoneFalse(Rule):
    code = "TL303"
    name = "zero-grad-set-to-none-false"
    family = FAMILY
    summary = "`optimizer.zero_grad(set_to_none=False)` / `model.zero_grad(set_to_none=False)` when no code reads `.grad`."
    message = (
        "zero_grad(set_to_none=False) writes zeros into every gradient each step; drop the argument "
        "(set_to_none=True is the default) unless code reads .grad before backward"
    )
    explanation = (
        "With `set_to_none=False`, `zero_grad()` launches a fill kernel for every parameter's gradient each step, "
        "and the next backward then accumulates into the zeroed buffers (a read-modify-write) instead of simply "
        "writing fresh gradients. `set_to_none=True` (the default since PyTorch 2.0) frees the gradients instead: "
        "no fill kernels, and the gradient memory (as large as the model) is free while the next forward pass "
        "builds its activations, which lowers peak memory. PyTorch's documentation says it \"will in general "
        "have lower memory footprint, and can modestly improve performance\". The speed gain is a GPU effect "
        "(one kernel launch per parameter tensor per step); on a 2-core CPU no gain was measurable, so the "
        "finding is mainly about memory.\n\n"
        "The rule reports the explicit `set_to_none=False` (or a positional `False`) when the file never reads "
        "a `.grad` attribute other than to compare it with `None`."
    )
    bad = (
        "for x, y in loader:\n"
        "    optimizer.zero_grad(set_to_none=False)\n"
        "    loss_fn(model(x), y).backward()\n"
        "    optimizer.step()\n"
    )
    good = (
        "for x, y in loader:\n"
        "    optimizer.zero_grad()\n"
        "    loss_fn(model(x), y).backward()\n"
        "    optimizer.step()\n"
    )
    false_positives = (
        "Code in another file that reads `p.grad` (for logging, custom clipping or all-reduce) and expects a "
        "tensor of zeros for parameters that got no gradient. The rule stays silent when this file reads `.grad`."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Removes the argument. Unsafe: afterwards `.grad` is `None` (not zeros) for parameters that received no "
        "gradient, which breaks code that reads `p.grad` without checking for `None`."
    )
    requires = ("zero_grad",)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "zero_grad"):
            return
        if has_star_args(node) or has_star_kwargs(node):
            return
        arg = argument(node, "set_to_none", 0)
        if arg is None or self.context.literal(arg.value) is not False or len(node.args) != 1:
            return
        if self._reads_grad():
            return
        # Remove just the argument: comments inside a call spread over lines survive.
        changes = [Replace(arg, "")]
        if isinstance(arg.comma, cst.Comma):
            changes.append(Replace(arg.comma, ""))
        self.report(node, fix=Fix("Drop set_to_none=False", changes, safe=False))

    def _reads_grad(self) -> bool:
        cached = getattr(self, "_reads", None)
        if cached is None:
            cached = self._reads = _file_reads_grad(self.context.module)
        return cached


def _file_reads_grad(module: cst.Module) -> bool:
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    from torchlint.lint.walk import semantic_children

    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in semantic_children(node):
            parents[child] = node
            stack.append(child)
        if isinstance(node, cst.Attribute) and node.attr.value == "grad":
            parent = parents.get(node)
            if isinstance(parent, cst.Comparison) and all(
                isinstance(t.operator, (cst.Is, cst.IsNot)) for t in parent.comparisons
            ):
                continue
            if isinstance(parent, cst.AssignTarget):
                continue
            return True
    return False
