"""TL407 per-element-tensor."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.rule import FixSafety, Rule
from torchlint.lint.walk import descendants
from torchlint.semantic.cuda_constructors import FROM_DATA, builds_on_device, moves_to_device
from torchlint.semantic.element_reads import READ, element_reads
from torchlint.semantic.element_walks import walks_device_tensor
from torchlint.semantic.index_loops import copies_rows_per_index

_COMBINE = frozenset("torch.stack torch.cat torch.concat torch.concatenate torch.vstack".split())


_READ_MESSAGE = (
    "Tensor read back one element at a time (a device-to-host copy and a sync each on GPU): convert it "
    "once with .tolist()"
)

_ROWS_MESSAGE = (
    "Device tensor read back element by element in a loop (a copy and a sync per read on GPU): move it to "
    "the host once before the loop, e.g. rows = dets.tolist() (or dets.cpu().numpy())"
)

_INDEX_MESSAGE = (
    "Rows copied one index at a time in a Python loop (each index read back from the tensor, a sync each on "
    "GPU): copy them all with one indexed assignment, e.g. out[b, inds] = src[b, inds]"
)

_WALK_MESSAGE = (
    "Tensor walked one element at a time by a Python builtin (max/min/sorted/map: a read back and a sync per "
    "element on GPU): use the tensor operation (t.max(), t.eq(0)) or convert once with .tolist()"
)

_COMPARE_MESSAGE = (
    "Tensor compared one element at a time in a Python loop (a read back and a sync each on GPU): compare "
    "the whole tensor at once, e.g. (labels > 0).sum().item()"
)


def _converts(elt: cst.BaseExpression, item: str) -> bool:
    """`item.item()`, `int(item)`, `float(item)`: the element turned into a Python number."""
    if not isinstance(elt, cst.Call) or len(elt.args) > 1:
        return False
    func = elt.func
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not elt.args:
        return isinstance(func.value, cst.Name) and func.value.value == item
    if isinstance(func, cst.Name) and func.value in ("int", "float", "bool") and len(elt.args) == 1:
        value = elt.args[0].value
        return isinstance(value, cst.Name) and value.value == item
    return False


def _counts(statement: cst.If, item: str) -> bool:
    """`if v.item() > 0: n += 1` (or `if v == 3:`): one element compared, a count kept on the host."""
    test = statement.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = (test.left, test.comparisons[0].comparator)
    if not any(_converts(side, item) or (isinstance(side, cst.Name) and side.value == item) for side in sides):
        return False
    body = statement.body.body if isinstance(statement.body, cst.IndentedBlock) else statement.body.body
    smalls = [s for line in body for s in (line.body if isinstance(line, cst.SimpleStatementLine) else [line])]
    return bool(smalls) and all(
        isinstance(s, cst.AugAssign) and isinstance(s.operator, cst.AddAssign) and isinstance(s.value, cst.Integer)
        for s in smalls
    )


class PerElementTensor(Rule):
    code = "TL407"
    name = "per-element-tensor"
    family = "Vectorisation and loops"
    summary = (
        "A comprehension fed to `torch.stack`/`torch.cat` that builds a tensor from each element of a Python "
        "list and copies it to the device, one element at a time (directly or through a function of the same "
        "file); or a list comprehension or loop that reads a tensor back one element at a time "
        "(`[p.item() for p in preds]`, `for p in preds: out.append(p.item())`) or compares it one element at "
        "a time to count (`for v in t: if v.item() > 0: n += 1`); or a loop or comprehension over the rows "
        "of a device tensor that converts each row's elements to Python numbers (`for det in dets: x1 = "
        "int(det[0]); score = det[4].item()`); or a loop over an index tensor that copies one row per index "
        "(`for i in range(inds.numel()): out[inds[i]] = src[inds[i]]`); or a Python builtin that walks a device "
        "tensor element by element (`max(lengths)`, `map(lambda s: s == 0, row)` for each row of a batch)."
    )
    message = (
        "Tensor built and copied to the device one element at a time: build one tensor from the whole list "
        "(torch.as_tensor(np.asarray(items))) and move it once with .to(device)"
    )
    explanation = (
        "Each element pays for a tensor construction, a host-to-device copy (a separate transfer and, from "
        "pageable memory, a synchronisation) and is then copied again by `torch.stack`. Converting the list "
        "once with NumPy and moving one tensor does one allocation and one transfer. Measured on a 2-core CPU, "
        "building 1,000 states of 8 floats element by element with `torch.tensor(s).float()` and stacking "
        "took 18.2 ms against 0.42 ms for `torch.as_tensor(np.asarray(states), dtype=torch.float32)`, before "
        "any device copy; on a GPU each element adds a transfer of a few microseconds. The reverse, "
        "`[p.item() for p in preds]` on a device tensor, copies and synchronises once per element where "
        "`preds.tolist()` does one copy; even on a CPU, reading 1,000 elements took 17 ms with `.item()` each "
        "against 0.005 ms with `.tolist()`."
    )
    bad = (
        "states = torch.stack([torch.tensor(s).float().to(device) for s in episode_states])\n"
        "labels = [p.item() for p in preds]  # preds on the GPU\n"
        "for det in dets:  # dets on the GPU\n"
        "    x1, score = int(det[0]), det[4].item()\n"
    )
    good = (
        "states = torch.as_tensor(np.asarray(episode_states), dtype=torch.float32).to(device)\n"
        "labels = preds.tolist()\n"
        "for det in dets.tolist():\n"
        "    x1, score = int(det[0]), det[4]\n"
    )
    false_positives = (
        "The rule needs all of: a list or generator comprehension that is the first argument of `torch.stack`/"
        "`torch.cat` (or `vstack`), an element expression that builds a tensor from the loop item "
        "(`torch.tensor`, `torch.as_tensor`, `torch.from_numpy`, `torch.Tensor`, `torch.FloatTensor`...) and "
        "moves it with `.to(device)` or `.cuda()` (or calls a function of the same file that does both), and "
        "an iterable that is not itself a tensor. Elements of "
        "different shapes cannot be stacked either way; where the elements are already tensors of different "
        "sizes padded later, silence the line with `# noqa: TL407`. Read-backs are reported only for a list "
        "comprehension over a tensor the model knows may live on the accelerator, whose element is "
        "`x.item()`, `int(x)`, `float(x)` or `bool(x)` of the loop item, and for a `for` loop over such a "
        "tensor (or over a model's output on a batch, `pred = m(x).argmax(1)`, in a program that uses an accelerator) whose whole body appends or adds that conversion, or counts (`n += 1`) under a comparison of "
        "it; on a host tensor `.tolist()` is still faster, but no synchronisation is saved. Rows read back one "
        "element at a time are reported for a `for` loop, a `map` of a lambda or a comprehension (a filter only when "
        "it converts an element: `[c for x in dets if int(x[0]) == k]`) over a tensor made "
        "by a model's forward pass or moved to the device (`.cuda()`, `.to(device)`) in the same function (or "
        "over `range(len(t))`, `range(t.size(0))`, whose body converts an element of a row of `t` or of any other "
        "device tensor the index walks, or a value computed from that row: `for i in range(labels.size(0)): "
        "hits[labels[i]] += c[i].item()`, `kept.append(out[i].argmax().item())`; or any range whose index walks two device tensors together and "
        "converts an element: `for i in range(4): label = labels[i]; right[label] += c[i].item()`), on a path that runs every step of a program that uses an "
        "accelerator (a printout after training is left alone) or over a tensor gathered on the device batch "
        "by batch (`preds.append(model(x))` in a loop, then `torch.cat(preds)`: one trip per sample of the data "
        "set, even in a metric run once an epoch; not when each batch was moved to the host first), whose body converts "
        "an element of the row with `int()`, `float()`, `bool()`, `round()` or `.item()` (or reads back a value "
        "computed from the row: `target(o).item()`), directly or through "
        "a function of the same file given the row; not when the tensor was moved to the host first "
        "(`.cpu()`, `.numpy()`, `.tolist()`), not when the loop stops early (`break`, `return`) and not when it "
        "keeps the rows themselves (`if det[4] > t: kept.append(det)`: a filter), nor when the loop computes per sample (a metric per image read with `.item()`: TL401 reports it). Elements compared one at a "
        "time are reported for a loop that branches on them (`for p, t in zip(preds, labels): if p == t:`) "
        "and for a count, `sum(1 for p, t in zip(preds, labels) if p == t)`. Nothing is reported where "
        "nothing repeats the loop: module-level code outside any loop (a demo on one image, a notebook cell) "
        "or a function or method of a script no project file imports, called only from such code. Rows copied one index at a time are reported for a `for` loop over an index tensor "
        "(`range(inds.numel())`, `range(len(inds))`, or `inds` itself) on a per-step path whose body only "
        "assigns rows at the element (`ind = inds[i]; out[b, ind] = src[b, ind]`); not an accumulation "
        "(`out[ind] += v`, which needs `index_add_` where indices repeat), not a body with calls or branches, "
        "and not NumPy or list indices. A tensor is built on the device also by `torch.cuda.LongTensor(ids)` or by a "
        "name the file binds to it (`LongTensor = torch.cuda.LongTensor if USE_CUDA else torch.LongTensor`). "
        "Element walks are reported for `max(t)`, `min(t)` or `sorted(t)` (the tensor the only positional argument) "
        "and `map(f, t)` whose function compares or converts one element (`lambda s: s == 0`, `int`), where `t` "
        "(or `t.data`) is a tensor that may live on the accelerator or a row of one (a comprehension over the batch: "
        "the comprehension is reported), on a per-step path of a program that uses an accelerator; not a lambda "
        "doing tensor work on each piece (`map(lambda t: t.transpose(1, 2), qkv)`), not a host tensor or a list."
    )
    fix_safety = FixSafety.NONE
    requires = ("torch",)

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._reported: set[cst.CSTNode] = set()  # loops reported in this file

    def _report_once(self, node: cst.CSTNode, message: Optional[str] = None) -> None:
        """One finding per loop nest: a loop or comprehension inside a reported one is part of it."""
        if node in self._reported or any(a in self._reported for a in self.context.ancestors(node)):
            return
        if self.semantic.runs_once(node):
            return  # a demo or a notebook cell: the loop runs once, no step repeats it
        self._reported.add(node)
        self.report(node, message)

    def visit_Module(self, node: cst.Module) -> None:
        self._rows: list[tuple[cst.CSTNode, str]] = []  # loops (and calls) that read back per element
        self._index_loops: list[cst.For] = []

    def leave_Module(self, node: cst.Module) -> None:
        # Decided once the walk is over: whether a function runs per step depends on calls further down.
        reads = element_reads(self.context)
        for loop, message in self._rows:
            walks_data_set = isinstance(loop, (cst.For, cst.Call)) and reads.walks_gathered(loop)
            if self.semantic.on_accelerator_at(loop) and (self.semantic.on_hot_path(loop) or walks_data_set):
                self._report_once(loop, message)
        for loop in self._index_loops:  # a row copy per index costs launches on any device, a sync on a GPU
            if self.semantic.on_hot_path(loop):
                self._report_once(loop, _INDEX_MESSAGE)

    def _check_rows(self, node: cst.CSTNode) -> None:
        """`for det in dets: x1 = int(det[0])`: rows of a device tensor read back element by element, in a
        program that uses an accelerator, on every step (a one-off print after training is noise)."""
        reads = element_reads(self.context)
        found = reads.loop(node) if isinstance(node, cst.For) else reads.comprehension(node)
        if found is not None and not self.semantic.per_sample_loops.computes_per_sample(node):  # TL401's advice
            self._rows.append((node, _ROWS_MESSAGE if found == READ else _COMPARE_MESSAGE))

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._check_rows(node)

    def visit_Call(self, node: cst.Call) -> None:
        walk = walks_device_tensor(self.context, node, self.semantic.per_sample_loops.device_tensor)
        mapped = element_reads(self.context).mapped(node)  # `map(lambda det: draw(det, img), dets)`
        if walk is not None or mapped:
            self._rows.append((walk or node, _ROWS_MESSAGE if walk is None else _WALK_MESSAGE))
        if (self.context.qualname(node) or "") not in _COMBINE or not node.args:
            return
        comprehension = node.args[0].value
        if not isinstance(comprehension, (cst.ListComp, cst.GeneratorExp)):
            return
        for_in = comprehension.for_in
        if for_in.inner_for_in is not None or self._tensor(for_in.iter):
            return
        items = {n.value for n in [for_in.target, *descendants(for_in.target)] if isinstance(n, cst.Name)}
        built = self._built_from(comprehension.elt, items)
        if built is not None and self._moved_to_device(comprehension.elt, built):
            if not self.semantic.runs_once(comprehension):
                self.report(comprehension)

    def visit_For(self, node: cst.For) -> None:
        self._check_for(node)
        self._check_rows(node)
        if copies_rows_per_index(self.context, node):
            self._index_loops.append(node)

    def _check_for(self, node: cst.For) -> None:
        # `for p in preds: labels.append(p.item())`, `for v in t: if v.item() > 0: n += 1`
        if not isinstance(node.target, cst.Name) or node.orelse is not None:
            return
        if not isinstance(node.iter, (cst.Name, cst.Attribute, cst.Call)) or not self.semantic.per_sample_loops.device_tensor(node.iter):
            return
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        if len(body) != 1:
            return
        item = node.target.value
        statement = body[0]
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
            small = statement.body[0]
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                call = small.value
                if isinstance(call.func, cst.Attribute) and call.func.attr.value == "append" and len(call.args) == 1:
                    if _converts(call.args[0].value, item):
                        self._report_once(node, _READ_MESSAGE)
            elif isinstance(small, cst.AugAssign) and _converts(small.value, item):
                self._report_once(node, _READ_MESSAGE)
        elif isinstance(statement, cst.If) and statement.orelse is None and _counts(statement, item):
            self._report_once(node, _COMPARE_MESSAGE)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._check_list(node)
        self._check_rows(node)

    def _check_list(self, node: cst.ListComp) -> None:
        # `[p.item() for p in preds]`, `[int(v) for v in labels]`: one read back per element
        for_in = node.for_in
        if for_in.inner_for_in is not None or for_in.ifs or not isinstance(for_in.target, cst.Name):
            return
        if not isinstance(for_in.iter, (cst.Name, cst.Attribute, cst.Call)) or not self.semantic.per_sample_loops.device_tensor(for_in.iter):
            return
        if _converts(node.elt, for_in.target.value):
            self._report_once(node, _READ_MESSAGE)

    def _tensor(self, iterable: cst.BaseExpression) -> bool:
        if self.semantic.values.kind(iterable) in ("tensor", "cpu"):
            return True
        function = self.context.enclosing_function(iterable)
        if isinstance(iterable, cst.Name) and function is not None:
            for param in function.params.params:
                if param.name.value == iterable.value and param.annotation is not None:
                    return "Tensor" in self.context.code(param.annotation.annotation)
        return False

    def _built_from(self, elt: cst.BaseExpression, items: set[str]) -> Optional[cst.Call]:
        """The `torch.tensor(item)` call inside the element expression."""
        for node in [elt, *descendants(elt)]:
            if isinstance(node, cst.Call) and node.args:
                data = node.args[0].value
                if not any(isinstance(n, cst.Name) and n.value in items for n in [data, *descendants(data)]):
                    continue
                if (self.context.qualname(node) or "") in FROM_DATA or builds_on_device(self.context, node):
                    return node
        return None

    def _moved_to_device(self, elt: cst.BaseExpression, built: cst.Call) -> bool:
        """`.to(device)` or `.cuda()` applied (through a chain of methods) to the built tensor."""
        for node in [elt, *descendants(elt)]:
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
                continue
            moves = moves_to_device(self.context, node)
            if moves and any(n is built for n in descendants(node.func.value)) or moves and node.func.value is built:
                return True
        return builds_on_device(self.context, built)  # a CUDA constructor, or a helper that moves what it builds
