"""TL402 cat-in-loop."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument
from torchlint.lint.rule import FixSafety, Rule
from torchlint.lint.walk import descendants
from torchlint.semantic.dataset_items import in_per_item_method
from torchlint.semantic.trip_counts import few_by_nature, literal_trips

_LOOPS = (cst.For, cst.While)

_SCOPE_EDGES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_FEW = 16  # trips of a loop whose growing costs nothing worth a finding


# --------------------------------------------------------------------------------------------------
class CatInLoop(Rule):
    code = "TL402"
    name = "cat-in-loop"
    family = "Vectorisation and loops"
    summary = (
        "A tensor or array grown inside a loop by concatenating onto itself (`x = torch.cat([x, y])`, "
        "`np.append(x, y)`): every iteration copies everything gathered so far."
    )
    message = (
        "Growing a tensor with cat/stack inside a loop copies it every iteration (quadratic): append the pieces "
        "to a list and call torch.cat(pieces) once after the loop"
    )
    explanation = (
        "`torch.cat` and `np.concatenate` allocate a new buffer and copy both inputs into it. Used as an "
        "accumulator, iteration k copies the k pieces gathered so far, so n iterations copy O(n^2) elements "
        "and allocate n ever larger buffers (on a GPU, each also launches kernels and may fragment the caching "
        "allocator). Collecting the pieces in a Python list and concatenating once copies each element once. "
        "Measured on a 2-core CPU (1 thread): gathering 1,000 pieces of 64x128 float32 took 1.2-1.7 s with "
        "`cat` in the loop against under 15 ms with one `cat` after the loop (over 80x); 100 pieces took "
        "8-12 ms against under 0.5 ms. The rule also recognises the accumulation started by a conditional "
        "expression, `x = y if x is None else torch.cat([x, y])`."
    )
    bad = (
        "all_logits = torch.empty(0, num_classes)\n"
        "for x, y in val_loader:\n"
        "    all_logits = torch.cat([all_logits, model(x)])\n"
    )
    good = (
        "chunks = []\n"
        "for x, y in val_loader:\n"
        "    chunks.append(model(x))\n"
        "all_logits = torch.cat(chunks)\n"
    )
    false_positives = (
        "A loop that reads the growing tensor in every iteration (autoregressive decoding feeding the sequence "
        "back to the model, DenseNet-style feature concatenation) needs it whole each time; the rule stays "
        "silent when the accumulator is read elsewhere in the loop body. Loops over a short literal range, or over "
        "a name every assignment of which is a short literal list (`self.levels = [3, 4, 5, 6, 7]`), are ignored, "
        "and so are loops in a network's own methods over its layers or settings (`for conv in self.convs`, "
        "`for i in range(len(modules))` with `modules = self.blocks[1:]`: DenseNet-style branches, the outputs of "
        "a few detection heads) and loops over the machine's devices (`range(1, len(self.device_id))`), "
        "and so are the per-item methods of a Dataset (a few annotations of one sample, grown in a loader "
        "worker; `__init__`, which runs over the whole dataset, is still checked). A loop known to run only a handful of times costs little: silence it with `# noqa: TL402`. "
        "Off by default: most loops that grow a tensor in real code run a handful of trips (the classes of one "
        "image, the objects of one annotation, the tokens of one sentence), which the code does not show; enable "
        "it (`--extend-select TL402`) to review the accumulations of a code base once."
    )
    fix_safety = FixSafety.NONE
    default_enabled = False  # judged on real code: about half its findings grow over a few items
    requires = ("cat", "stack", "append", "concatenate")

    _GROWERS = {
        "torch.cat": "seq",
        "torch.concat": "seq",
        "torch.concatenate": "seq",
        "torch.stack": "seq",
        "torch.vstack": "seq",
        "torch.hstack": "seq",
        "numpy.concatenate": "seq",
        "numpy.vstack": "seq",
        "numpy.hstack": "seq",
        "numpy.stack": "seq",
        "numpy.append": "first",
    }

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._pending: dict[cst.CSTNode, list[tuple[cst.Assign, cst.Call, cst.Name, str]]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        value = self._grow_call(node.value, node.targets[0].target.value)
        if value is None or not isinstance(value.func, (cst.Attribute, cst.Name)):
            return
        last = value.func.attr.value if isinstance(value.func, cst.Attribute) else value.func.value
        if last not in ("cat", "concat", "concatenate", "stack", "vstack", "hstack", "append"):
            return
        kind = self._GROWERS.get(self.context.qualname(value) or "")
        if kind is None:
            return
        name = node.targets[0].target.value
        carried = self._carried_element(value, kind, name)
        if carried is None:
            return
        loop = self._loop_of(node)
        if loop is None or self._short_loop(loop) or in_per_item_method(self.context, node):
            return
        # decided when the loop has been walked: the statements after this one are needed too
        self._pending.setdefault(loop, []).append((node, value, carried, name))

    def leave_For(self, node: cst.For) -> None:
        for assign, value, carried, name in self._pending.pop(node, ()):
            if self._only_grown(node, assign, carried, name):
                self.report(value)

    leave_While = leave_For  # type: ignore[assignment]

    @staticmethod
    def _grow_call(value: cst.BaseExpression, name: str) -> Optional[cst.Call]:
        """The call that may grow `name`: the assigned value, or one branch of a conditional expression whose
        other branch starts the accumulation (`x = y if x is None else torch.cat([x, y])`)."""
        if isinstance(value, cst.Call):
            return value
        if isinstance(value, cst.IfExp):
            for grow, other in ((value.body, value.orelse), (value.orelse, value.body)):
                if isinstance(grow, cst.Call) and not isinstance(other, (cst.Call, cst.IfExp)):
                    mentions = isinstance(other, cst.Name) and other.value == name
                    if not mentions and not any(isinstance(n, cst.Name) and n.value == name for n in descendants(other)):
                        return grow
        return None

    def _carried_element(self, call: cst.Call, kind: str, name: str) -> Optional[cst.Name]:
        """The `x` inside `cat([x, y])` / `np.append(x, y)` when the result is assigned back to `x`."""
        if kind == "first":
            arg = argument(call, "arr", 0)
            value = arg.value if arg is not None else None
            return value if isinstance(value, cst.Name) and value.value == name else None
        arg = argument(call, "tensors", 0) or argument(call, "arrays", 0) or argument(call, "tup", 0)
        if arg is None or not isinstance(arg.value, (cst.List, cst.Tuple)):
            return None
        elements = arg.value.elements
        if len(elements) < 2:
            return None
        for element in elements:
            if isinstance(element, cst.Element) and isinstance(element.value, cst.Name) and element.value.value == name:
                return element.value
        return None

    def _loop_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, _SCOPE_EDGES):
                return None
            if isinstance(ancestor, _LOOPS):
                # In the loop body, not in a `for` header or an `else:` clause.
                return ancestor if self._in_body(ancestor, node) else None
        return None

    def _in_body(self, loop: cst.CSTNode, node: cst.CSTNode) -> bool:
        body = loop.body
        current: Optional[cst.CSTNode] = node
        while current is not None and current is not loop:
            if current is body:
                return True
            current = self.context.parent(current)
        return False

    def _short_loop(self, loop: cst.CSTNode) -> bool:
        """`for i in range(3)`, a loop over a literal tuple/list or over a few levels: growing costs nothing
        worth a finding."""
        if isinstance(loop, cst.For):
            items = loop.iter
            if isinstance(items, cst.Call) and isinstance(items.func, cst.Name) and items.func.value == "enumerate" and items.args:
                items = items.args[0].value
            if isinstance(items, (cst.Tuple, cst.List)):
                return True  # written out in the code, however long
        if few_by_nature(self.context, loop):
            return True  # a network's own layers, the machine's devices
        trips = literal_trips(self.context, loop)
        return trips is not None and trips <= _FEW

    def _only_grown(self, loop: cst.CSTNode, assign: cst.Assign, carried: cst.Name, name: str) -> bool:
        """In the loop, `name` is read only by the growing call(s) and `is None` checks (its value is not needed)."""
        for node in descendants(loop.body):
            if not isinstance(node, cst.Name) or node.value != name or node is carried:
                continue
            parent = self.context.parent(node)
            if isinstance(parent, cst.AssignTarget) and parent is assign.targets[0]:
                continue
            if self._grow_target_or_element(node, parent, name):
                continue
            if isinstance(parent, cst.Comparison) and self._none_check(parent):
                continue
            if isinstance(parent, cst.AssignTarget) and self._guarded_first_assignment(parent, name):
                continue
            return False
        return True

    def _grow_target_or_element(self, node: cst.Name, parent: Optional[cst.CSTNode], name: str) -> bool:
        """Another `x = cat([x, ...])` in the same loop (e.g. in two branches)."""
        if isinstance(parent, cst.AssignTarget):
            assign = self.context.parent(parent)
            return isinstance(assign, cst.Assign) and self._is_grow(assign, name)
        if isinstance(parent, (cst.Element, cst.Arg)):
            call = self.context.enclosing(node, cst.Call)
            assign = self.context.parent(call) if call is not None else None
            if isinstance(assign, cst.IfExp):
                assign = self.context.parent(assign)
            return (
                isinstance(assign, cst.Assign)
                and self._grow_call(assign.value, name) is call
                and self._is_grow(assign, name)
            )
        return False

    def _is_grow(self, assign: cst.Assign, name: str) -> bool:
        value = self._grow_call(assign.value, name)
        if len(assign.targets) != 1 or value is None:
            return False
        target = assign.targets[0].target
        kind = self._GROWERS.get(self.context.qualname(value) or "")
        return (
            kind is not None
            and isinstance(target, cst.Name)
            and target.value == name
            and self._carried_element(value, kind, name) is not None
        )

    @staticmethod
    def _none_check(comparison: cst.Comparison) -> bool:
        return len(comparison.comparisons) == 1 and isinstance(
            comparison.comparisons[0].operator, (cst.Is, cst.IsNot)
        ) and isinstance(comparison.comparisons[0].comparator, cst.Name) and comparison.comparisons[0].comparator.value == "None"

    def _guarded_first_assignment(self, target: cst.AssignTarget, name: str) -> bool:
        """`if acc is None: acc = piece` (the first piece of the accumulation)."""
        assign = self.context.parent(target)
        if not isinstance(assign, cst.Assign):
            return False
        if any(isinstance(n, cst.Name) and n.value == name for n in descendants(assign.value)):
            return False
        if isinstance(assign.value, cst.Name) and assign.value.value == name:
            return False
        # `if features is None: features = out` / `if i == 0: all_preds = preds`: the first piece, in a
        # branch (an unconditional assignment restarts the accumulation every iteration instead)
        return self.context.enclosing(assign, cst.If) is not None
