"""TL201 item-in-training-loop."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.lint.names import last_name
from torchlint.rules.sync._common import (
    ADVICE,
    EXPLANATION_COMMON,
    SyncRule,
    chained_from,
)
from torchlint.semantic import loops
from torchlint.semantic.host_use import whole_value
from torchlint.semantic.placement import is_cpu_literal
from torchlint.semantic.values import CPU, PY, UNK, T

# Python-number checks a NaN guard uses.
# Variables that hold a loss (`loss`, `loss2`, `g_loss`, `loss_D`, `total_loss`, `losses`); not `loss_fn`.
_LOSS_VARIABLE = re.compile(r"^(?:\w+_)?loss(?:es)?(?:\d+|_?[a-z])?$", re.IGNORECASE)


# Methods that may sit between `.cpu()` and the number it is reduced to.
_REDUCTIONS = frozenset(
    {"sum", "mean", "count_nonzero", "all", "any", "max", "min", "float", "double", "long", "int", "numpy", "squeeze", "detach"}
)


_GATHER = (
    "{what} in an evaluation loop waits for the GPU on every batch: keep the outputs on the device "
    "(append them, `torch.cat` after the loop) and copy to the host once"
)


_FORWARD = (
    "{what} in `{where}()` waits for the GPU on every step the model runs: keep the value on the device, or "
    "compute it on the host before the batch is moved"
)


_PER_ELEMENT = (
    "{what} of each element of a device tensor waits for the GPU once per element: copy the whole tensor to "
    "the host once before the loop (`.tolist()`, `.cpu()`)"
)


class ItemInTrainingLoop(SyncRule):
    code = "TL201"
    name = "item-in-training-loop"
    summary = (
        "`.item()`, `.tolist()` or `.cpu()` of a device tensor on every step of a training or evaluation loop."
    )
    message = (
        "`.item()` waits for the GPU and copies to the host on every step: " + ADVICE
    )
    explanation = EXPLANATION_COMMON.format(what="`.item()`, `.tolist()`, `.cpu()`, `.cpu().numpy()`")
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
        "reported: it needs the value on every step by design (when the value is also logged or accumulated, the "
        "read is reported: it serves the log too). Nor is a value that only the host can use: actions handed to "
        "an environment's `step()`, new priorities handed to a replay buffer's `update_priorities()`, an image or "
        "mask written to a file for each batch (`Image.fromarray(img).save(path)`, `cv2.imwrite`, `np.save`), a "
        "number that bounds a Python loop or sizes a `view` (`keep = torch.topk(s, k)[1].tolist()` then `for i in "
        "keep:`), whether the read is in the loop or in a helper that returns it to such a use (`select_action`). A read "
        "right after a needed one, with no device work queued between, finds the GPU idle and is not reported. A read behind a debug switch (`if args.debug:`), or behind a `--verbose` switch of the file that is off by default, is not reported either. Other syncs that decide "
        "control flow may be intended too. `.cpu()` of predictions gathered in an evaluation loop (appended, stored) is reported "
        "with its own advice: keep the batches on the device and copy once after the loop (when they do not fit in "
        "device memory together, the per-batch copy is the price of fitting: silence it). A read in a one-step "
        "training function (`loss.backward(); optimizer.step()`, no loop, no `epoch` parameter; e.g. `return "
        "loss.item()`) is reported: its caller runs it every step; so is a read of a device tensor in a helper that "
        "a step loop calls, in this file or in another of the project (`max_len = torch.max(lengths).item()` in a "
        "mask helper), and a copy gathered in any loop that runs a model on each trip (a sampler's "
        "`xs.append(x.to(\"cpu\"))`). So is a read in the `forward()` of a module "
        "(`max_len = lengths.max().item()`), which runs on every step wherever the model is called, unless only "
        "the first call runs it (`if not self.initialized:`), and one in the `backward()` of a custom "
        "`torch.autograd.Function`, and one in a hook a framework runs once per batch: a Lightning module's "
        "`training_step`/`validation_step` and its `on_*_batch_end` hooks (given the batch), an ignite engine's "
        "process function and its handlers of `Events.ITERATION_COMPLETED` (not those called with `every=`), unless "
        "a logging interval guards it (`if batch_idx % 100 == 0:`). The loss a project object's method returns to a step "
        "loop (`loss = trainer.train_step(x, y)`, a class of this file or another) is a device tensor there. A helper's read that a step loop of this file reaches "
        "through a call that TL207 reports is reported at that call only: one finding per sync. A statement that reads several values "
        "(`print(a.item(), b.item())`) is reported once, at its first read: the later ones find the GPU idle. "
        "Silence a deliberate one with `# noqa: TL201`."
    )
    requires = (".item(", ".tolist(", ".cpu(", ".to(")

    def visit_Module(self, node: cst.Module) -> None:
        self._reported: set[cst.CSTNode] = set()
        self._element_reads: list[tuple[cst.Call, str, Optional[cst.CSTNode], cst.BaseExpression]] = []
        self._helper_reads: list[tuple[cst.Call, str, Optional[cst.CSTNode]]] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method == "to" and self._to_host(node):
            method = "cpu"  # `.to("cpu")` is the same copy
        elif method not in ("item", "tolist", "cpu") or node.args:
            return
        statement = self.context.enclosing_statement(node)
        if statement in self._reported:
            return  # the first sync of a statement empties the queue: later ones wait for nothing
        loop: Optional[cst.CSTNode] = self.semantic.every_step(node)
        if loop is None:
            loop = self._in_step_function(node)
            if loop is not None and self.semantic.calls.reported_at_a_call(loop):  # type: ignore[arg-type]
                return  # TL207 reports the call the step loop makes: one finding per sync
        if loop is None:
            if self.values.kind(func.value) == T:
                self._helper_reads.append((node, method, statement))  # its callers are known once the walk ends
            elif not self._gathered_in_forward_loop(node, method, statement):
                self._check_element_read(node, method, statement)
            return
        self._judge(node, method, statement, loop)

    def _judge(self, node: cst.Call, method: str, statement: Optional[cst.CSTNode], loop: cst.CSTNode) -> None:
        kind = self.values.kind(node.func.value)  # type: ignore[attr-defined]
        if method == "item":
            if kind in (PY, CPU) or self.semantic.guards_non_finite(node):
                return
        elif kind != T and not (method == "cpu" and kind == UNK and self._copies_a_tensor(node)):
            return
        receiver = chained_from(node.func.value)  # type: ignore[attr-defined]
        collection = self.semantic.element_read(receiver)
        walked = collection is not None and self.walks_device_tensor(collection)
        per_element = walked or self._indexed_per_trip(receiver, loop)
        if self.semantic.needed_on_host(node) and not per_element:
            return  # `envs.step(actions.cpu().numpy())`, `for i in keep:`: only the host can use the value
        if self.semantic.drained_by_needed_read(node) and not per_element:
            return  # a needed read just before already waited for the GPU: this one finds it idle
        self._reported.add(statement)  # type: ignore[arg-type]
        what = self._spelling(node, method)
        if (
            method in ("cpu", "tolist")
            and isinstance(loop, (cst.For, cst.While))
            and not self.semantic.is_training_loop(loop)
            and not self._reduced_at_once(node)
        ):
            self.report(node, _GATHER.format(what=what))
        elif isinstance(loop, cst.FunctionDef) and loop.name.value in ("forward", "backward"):
            self.report(node, _FORWARD.format(what=what, where=loop.name.value))
        elif isinstance(loop, cst.FunctionDef) and not loops.is_step_function(self.context, loop):
            self.report(node, f"{what} in `{loop.name.value}()`, which runs on every step, waits for the GPU: " + ADVICE)
        else:
            self.report(node, f"{what} waits for the GPU and copies to the host on every step: " + ADVICE)

    def _indexed_per_trip(self, receiver: cst.BaseExpression, loop: cst.CSTNode) -> bool:
        """`images[i]` under `for i in range(len(images)):` inside the step: one copy per element of the batch."""
        if not isinstance(receiver, cst.Subscript):
            return False
        names = {e.slice.value.value for e in receiver.slice if isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Name)}
        for ancestor in self.context.ancestors(receiver):
            if ancestor is loop:
                return False
            if isinstance(ancestor, cst.For) and isinstance(ancestor.target, cst.Name) and ancestor.target.value in names:
                return True
        return False

    def _gathered_in_forward_loop(self, node: cst.Call, method: str, statement: Optional[cst.CSTNode]) -> bool:
        """`xs.append(x.to("cpu"))`, `preds[start:end] = pred.cpu().numpy()` in a loop that runs a model on each
        trip (a sampler's steps, an evaluation over batches it builds itself): one copy per trip that could be
        one copy after the loop."""
        if method != "cpu" or self.values.kind(node.func.value) != T:  # type: ignore[attr-defined]
            return False
        loop = self.semantic.forward_loop(node)
        if loop is None or loops.few_trips(self.context, loop) or not self._gathered(node):  # type: ignore[arg-type]
            return False
        self._reported.add(statement)  # type: ignore[arg-type]
        self.report(node, _GATHER.format(what=self._spelling(node, method)))
        return True

    def _gathered(self, node: cst.Call) -> bool:
        """The copy is kept for after the loop: appended to a list or stored into a slice of an array."""
        value = whole_value(self.context, node)
        if isinstance(value, cst.Call) and last_name(value.func) in ("item", "tolist"):
            return False  # reduced to a number at once: a read, not a copy kept
        parent = self.context.parent(value)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            return isinstance(call, cst.Call) and last_name(call.func) in ("append", "extend")
        return isinstance(parent, cst.Assign) and any(isinstance(t.target, cst.Subscript) for t in parent.targets)

    def _check_element_read(self, node: cst.Call, method: str, statement: Optional[cst.CSTNode]) -> None:
        """`for i in range(len(boxes)): boxes[i].item()`, `[s.item() for s in scores]`: one wait per element
        of a device tensor, in any loop (post-processing included). Judged at the end of the file: a
        comprehension's iterable is visited after its element."""
        collection = self.semantic.element_read(node.func.value)  # type: ignore[attr-defined]
        if collection is not None:
            self._element_reads.append((node, method, statement, collection))

    def leave_Module(self, node: cst.Module) -> None:
        for call, method, statement in self._helper_reads:
            if statement in self._reported:
                continue
            function = self.semantic.called_every_step(call)  # a helper a step loop calls, here or in another file
            if function is not None and self.semantic.calls.reported_at_a_call(function):
                continue  # TL207 reports the call the step loop makes: one finding per sync
            if function is not None:
                self._judge(call, method, statement, function)
            elif not self._gathered_in_forward_loop(call, method, statement):
                self._check_element_read(call, method, statement)
        for call, method, statement, collection in self._element_reads:
            if statement not in self._reported and self.walks_placed_tensor(collection):
                self._reported.add(statement)  # type: ignore[arg-type]
                self.report(call, _PER_ELEMENT.format(what=self._spelling(call, method)))

    def _spelling(self, node: cst.Call, method: str) -> str:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "to":
            return '`.to("cpu")`'
        return "`.cpu().numpy()`" if method == "cpu" and self._is_numpy_of(node) else f"`.{method}()`"

    def _to_host(self, node: cst.Call) -> bool:
        """`x.to("cpu")`, `x.to(torch.device("cpu"))`: a copy to the host, like `.cpu()`."""
        args = node.args
        return len(args) == 1 and args[0].keyword is None and is_cpu_literal(self.context, args[0].value)

    def _in_step_function(self, node: cst.Call) -> Optional[cst.FunctionDef]:
        """A read in a one-step training function (`loss.backward(); optimizer.step()`, no loop; e.g.
        `logs["loss"] = loss.item()` or `return loss.item()`): the caller runs it once per step
        (`agent.replay()`, `self._train_batch(X, y)`). A function that takes the epoch (`def train(epoch):`,
        full-batch training) is left to TL207 at the call in its epoch loop."""
        context = self.context
        function = loops.step_function(context, node)
        if function is None or loops.gated(context, node, function):  # type: ignore[arg-type]
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

    def _copies_a_tensor(self, node: cst.Call) -> bool:
        """`.cpu()` of a value of unknown kind that is still a tensor: `out.data.cpu()` (`.data`, like
        `.detach()`, is a tensor's), `loss.cpu()` (only tensors and modules have `.cpu()`, and a name that
        reads like a loss is not a module), `out.cpu().numpy()` (a module's `.cpu()` has no `.numpy()`)."""
        parent = self.context.parent(node)
        while isinstance(parent, cst.Subscript) and parent.value is not None:  # `pred.cpu()[:, 0].numpy()`
            parent = self.context.parent(parent)
        if isinstance(parent, cst.Attribute) and parent.attr.value in ("numpy", "detach", "data"):
            return True
        expr = node.func.value  # type: ignore[attr-defined]
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            base = expr.value
            return not (isinstance(base, cst.Name) and base.value == "self") and self.values.kind(base) == UNK
        return isinstance(expr, cst.Name) and bool(_LOSS_VARIABLE.match(expr.value)) and self.context.qualname(expr) is None

    def _is_numpy_of(self, node: cst.Call) -> bool:
        parent = self.context.parent(node)
        return isinstance(parent, cst.Attribute) and parent.attr.value == "numpy"
