"""Per-function summaries: what a function defined in the file does, for the code that calls it."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.context import UNKNOWN, Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import scope_nodes
from torchlint.semantic import host_use, project
from torchlint.semantic.functions import called_function, method_named
from torchlint.semantic.memo import CycleSafeMemo, question_stack
from torchlint.semantic.objects import objects
from torchlint.semantic.placement import is_cpu_literal
from torchlint.semantic.values import UNK, T, ValueKinds

# Calls that read a clock or a CUDA event: a sync next to them is there to time the step.
CLOCK_CALLS = frozenset(
    {"time", "perf_counter", "monotonic", "perf_counter_ns", "time_ns", "record", "elapsed_time", "time_sync", "tic", "toc"}
)


# How a function syncs when it reads only the tensors it is given (`if isinstance(v, torch.Tensor): v = v.item()`,
# a metric logger's `update`): a call syncs only when it passes a tensor.
TENSOR_ARGUMENT = "`.item()` of a tensor it is given"


# Words a module's text must contain for one of its functions to read a device value on the host itself
# (`float(loss)` returned by a step function of another file included: the scan spares less, the summary
# still reads `float(x)` as a sync only where `x` is shown to be a tensor).
SYNC_WORDS = (".item()", ".tolist()", ".cpu()", "synchronize", '"cpu"', "'cpu'", "float(", "int(")


# Methods that return the module they are called on (`Net().to(device)`, `Net().cuda().eval()`).
_PLACEMENT_METHODS = frozenset({"to", "cuda", "cpu", "eval", "train", "float", "half", "double"})


def is_self_attribute(expr: cst.BaseExpression) -> bool:
    """`self.name`."""
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def reads_given_tensor(how: str) -> bool:
    """A helper's sync that reads only a tensor its caller hands it (`TENSOR_ARGUMENT`, `pred.cpu()` of a
    parameter `pred`): a call syncs when it passes a tensor."""
    return how.endswith(" of a tensor it is given")


def _to_host(context: "Context", call: cst.Call) -> bool:
    """`x.to("cpu")`: a copy to the host."""
    args = call.args
    return len(args) == 1 and args[0].keyword is None and is_cpu_literal(context, args[0].value)


class FunctionSummaries:
    """What the functions and methods defined in this file do, as far as their callers care."""

    def __init__(self, context: "Context", values: ValueKinds) -> None:
        self.context = context
        self.values = values
        self._syncs: CycleSafeMemo[tuple[cst.FunctionDef, bool], Optional[str]] = CycleSafeMemo(None, question_stack(context))

    def callee(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        return called_function(self.context, call)

    def sync_in(self, function: cst.FunctionDef, *, strict: bool = False) -> Optional[str]:
        """How `function` reads a device value on the host (e.g. "`.item()`"), itself or through the
        functions it calls, or None. `.item()` of a value of unknown kind counts only when not `strict`:
        helpers further down, and those of other files, must show that the value is a tensor."""
        return self._syncs.ask((function, strict), self._sync_in)

    def _sync_in(self, key: tuple[cst.FunctionDef, bool]) -> Optional[str]:
        from torchlint.semantic.loops import gated

        function, strict = key
        values = self.values
        found = None
        calls = [n for n in scope_nodes(function.body) if isinstance(n, cst.Call)]
        timed = any(last_name(c.func) in CLOCK_CALLS for c in calls)
        for node in calls:
            if gated(self.context, node, function):  # type: ignore[arg-type]
                continue  # `if (step + 1) % 10 == 0: size = t.item()`: one read every ten calls, not every call
            if self._in_own_step_loop(node, function):
                continue  # `def evaluate(loader): for x, y in loader: ... .item()`: reported in that loop, per batch
            func = node.func
            name = last_name(func)
            if name in host_use.READS and (
                host_use.needed_on_host(self.context, node, sizes=False)
                or host_use.drained_by_needed_read(self.context, node)
            ):
                continue  # `memory.update_priorities(idx, td.cpu().numpy())`: the algorithm's own read
            if isinstance(func, cst.Attribute) and name in ("item", "tolist", "cpu") and not node.args:
                if name == "item" and self._tensor_checked(func.value, function):
                    found = TENSOR_ARGUMENT  # keep looking: an unconditional sync says more
                    continue
                kind = values.kind(func.value)
                read = name == "item" or self._copied_tensor(node)
                if kind == T or (kind == UNK and not strict and read):
                    found = f"`.{name}()`"
                    break
                if kind == UNK and read and self._given(func.value, function, derived=name == "item"):
                    found = found or f"`.{name}()` of a tensor it is given"  # counted where a call passes one
                    continue
            elif isinstance(func, cst.Attribute) and name == "to" and _to_host(self.context, node):
                if values.kind(func.value) == T:
                    found = '`.to("cpu")`'
                    break
            elif isinstance(func, cst.Name) and name in ("float", "int", "bool") and len(node.args) == 1:
                if values.is_tensor(node.args[0].value):
                    found = f"`{name}()` of a tensor"
                    break
            elif name == "synchronize" and self.context.qualname(node) == "torch.cuda.synchronize" and not timed:
                found = "`torch.cuda.synchronize()`"
                break
            else:
                inner = self.sync_of_call(node, strict=True)  # a helper of the helper, any depth
                if inner is not None and not reads_given_tensor(inner[1]):
                    found = f"{inner[1]}, in `{inner[0]}()`"
                    break
        return found

    def _in_own_step_loop(self, node: cst.Call, function: cst.FunctionDef) -> bool:
        """`node` runs on every step of a loop of `function` itself that runs a model on each trip (`def
        evaluate(loader): for x, y in loader: out = model(x) ...`): a caller runs the whole loop, a split, at
        once, and the read is reported in that loop, per batch, not at the call."""
        from torchlint.semantic.hot_paths import forward_loop
        from torchlint.semantic.loops import every_step

        loop = every_step(self.context, node)
        return isinstance(loop, (cst.For, cst.While)) and forward_loop(self.context, node) is loop

    def reported_at_a_call(self, function: cst.FunctionDef, _seen: Optional[set[cst.FunctionDef]] = None) -> bool:
        """A call of `function` runs on every step and syncs through it (see `sync_of_call`), in this file,
        directly or through the functions that call it, or in a step loop of another project file (a top-level
        function): the helper's read is reported there, at the call the step loop makes (TL207), and one
        finding per sync is enough."""
        from torchlint.semantic import hot_paths, loops

        seen = _seen if _seen is not None else set()
        if function in seen:
            return False
        seen.add(function)
        if function in self.context.module.body:  # a top-level function: the step loops of other files too
            for site in project.call_sites(self.context.source.path, function.name.value):
                if loops.every_step(site.summary.context, site.call) is not None:
                    return True
        for call in hot_paths.callers_of(self.context, function):
            func = call.func
            named = isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name))
            if named and loops.every_step(self.context, call) is not None and self.sync_reported_at(call) is not None:
                return True
            outer = self.context.enclosing_function(call)
            if outer is not None and outer is not function and self.reported_at_a_call(outer, seen):
                return True
        return False

    def _tensor_checked(self, value: cst.BaseExpression, function: cst.FunctionDef) -> bool:
        """`v` in `if isinstance(v, torch.Tensor): v = v.item()`: a tensor on that branch only."""
        if not isinstance(value, cst.Name):
            return False
        child: cst.CSTNode = value
        for ancestor in self.context.ancestors(value):
            if ancestor is function:
                return False
            if isinstance(ancestor, cst.If) and child is ancestor.body:
                test = ancestor.test
                if (
                    isinstance(test, cst.Call)
                    and last_name(test.func) == "isinstance"
                    and len(test.args) == 2
                    and isinstance(test.args[0].value, cst.Name)
                    and test.args[0].value.value == value.value
                    and last_name(test.args[1].value) == "Tensor"
                ):
                    return True
            child = ancestor
        return False

    def _method_of_instance(self, call: cst.Call, strict: bool) -> Optional[tuple[str, str]]:
        """`augment.tune(pred)` where `augment = AdaptiveAugment(...)`, a class of this file or of another
        project module: what that method reads on the host."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        built = self._instance_built(func.value)
        while (
            isinstance(built, cst.Call)
            and isinstance(built.func, cst.Attribute)
            and built.func.attr.value in _PLACEMENT_METHODS
            and isinstance(built.func.value, cst.Call)
        ):
            built = built.func.value  # `Meta(args).to(device)`: the object `Meta(args)` built
        if not isinstance(built, cst.Call) or not isinstance(built.func, (cst.Name, cst.Attribute)):
            return self._method_of_passed_object(func.value, func.attr.value, strict)
        method = func.attr.value
        if isinstance(built.func, cst.Name):
            bindings = self.context.lookup(built.func)
            if bindings and len(bindings) == 1 and isinstance(bindings[0].node, cst.ClassDef):
                function = method_named(bindings[0].node, method)
                how = self.sync_in(function, strict=strict) if function is not None else None
                return (f"{built.func.value}.{method}", how) if how is not None else None
        found = project.imported(self.context, built.func, SYNC_WORDS)
        if found is None:
            return None
        summary, name = found
        how = summary.method_syncs(name, method)
        return (f"{name}.{method}", how) if how is not None else None

    def _method_of_passed_object(
        self, holder: cst.BaseExpression, method: str, strict: bool, depth: int = 0
    ) -> Optional[tuple[str, str]]:
        """`metric.update(out, y)` where `metric` is a parameter, or `self.metric` is assigned one in `__init__`,
        and the callers pass an object of a project class whose `update` reads a device value on the host (their
        own parameters are followed to their callers, two calls up)."""
        from torchlint.semantic.call_arguments import passed_for
        from torchlint.semantic.model import semantic_model
        from torchlint.semantic.network_methods import receiver_classes

        if is_self_attribute(holder):
            built = self._instance_built(holder)  # `self.metric = metric`: the parameter of `__init__`
            if not isinstance(built, cst.Name):
                return None
            holder = built
        if not isinstance(holder, cst.Name):
            return None
        for owner, cls in receiver_classes(semantic_model(self.context).grad, holder):
            function = method_named(cls, method)
            if function is None:
                continue
            if owner.context is self.context:
                how = self.sync_in(function, strict=strict)
            else:
                found = project.summary(owner.context.source.path)
                how = found.method_syncs(cls.name.value, method) if found is not None else None
            if how is not None:
                return f"{cls.name.value}.{method}", how
        bindings = self.context.lookup(holder) or ()
        if depth < 1 and len(bindings) == 1 and bindings[0].kind == "param" and isinstance(bindings[0].node, cst.Param):
            for there, argument in passed_for(self.context, bindings[0].node):
                if isinstance(argument, cst.Name):
                    summaries = semantic_model(there).calls
                    found = summaries._method_of_passed_object(argument, method, strict, depth + 1)
                    if found is not None:
                        return found
        return None

    def _given(self, value: cst.BaseExpression, function: cst.FunctionDef, *, derived: bool) -> bool:
        """`value` is a parameter of `function` never rebound there (`pred`), or, when `derived`, a value computed
        from its parameters alone (`(pred.argmax(1) == y).sum()`, `torch.sum(pred == y)`: every name it reads is
        such a parameter or an imported module). A number a meter reads from what it is given (`.item()`) is
        derived; a copy of an array computed from it is more often the input of a host algorithm."""
        if not derived and not isinstance(value, cst.Name):
            return False
        names = [n for n in (value, *scope_nodes(value)) if isinstance(n, cst.Name) and not self._is_attribute_name(n)]
        if not names or isinstance(value, cst.Lambda):
            return False
        given = False
        for name in names:
            bindings = self.context.lookup(name)
            if not bindings:
                return False
            if all(b.kind == "param" and self.context.enclosing(b.node, cst.FunctionDef) is function for b in bindings):
                given = True
            elif not all(b.kind == "import" for b in bindings):
                return False
        return given

    def _is_attribute_name(self, name: cst.Name) -> bool:
        """`sum` of `x.sum`, `dim` of `f(dim=1)`: a name that is not a variable."""
        parent = self.context.parent(name)
        return (isinstance(parent, cst.Attribute) and parent.attr is name) or (
            isinstance(parent, cst.Arg) and parent.keyword is name
        )

    def _instance_built(self, holder: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """What built the object `holder` names: `metric` after `metric = Metric(...)`, or `self.metric`
        assigned once in its class (`self.metric = Metric(...)` in `__init__`), or `meters["loss"]` after
        `meters = {"loss": AverageMeter(), ...}`."""
        if isinstance(holder, cst.Subscript) and len(holder.slice) == 1 and isinstance(holder.slice[0].slice, cst.Index):
            key = self.context.literal(holder.slice[0].slice.value)
            built = self._instance_built(holder.value)
            if key is UNKNOWN or not isinstance(built, cst.Dict):
                return None
            found = [e.value for e in built.elements if isinstance(e, cst.DictElement) and self.context.literal(e.key) == key]
            return found[0] if len(found) == 1 else None
        if isinstance(holder, cst.Name):
            return self.context.assigned_value(holder)
        if is_self_attribute(holder):
            cls = self.context.enclosing(holder, cst.ClassDef)
            values = objects(self.context).self_assignments(cls).get(holder.attr.value) if cls is not None else None
            return values[0] if values and len(values) == 1 else None
        return None

    def _copied_tensor(self, call: cst.Call) -> bool:
        """`pred.cpu().data.numpy()`: a module's `.cpu()` has no `.numpy()`, `.data` or `.detach()`, so the
        receiver is a tensor (one of unknown place: counted only in a helper the loop calls itself)."""
        parent = self.context.parent(call)
        return isinstance(parent, cst.Attribute) and parent.attr.value in ("numpy", "data", "detach")

    def sync_reported_at(self, call: cst.Call) -> Optional[tuple[str, str]]:
        """`sync_of_call`, less a helper that reads only the tensors it is given when the call passes none
        (`metric_logger.update(loss=loss_value)` hands it a number): the sync TL207 reports at a step's call."""
        found = self.sync_of_call(call)
        if found is not None and reads_given_tensor(found[1]) and not any(self._may_be_tensor(a.value) for a in call.args):
            return None
        if found is not None and host_use.needed_on_host(self.context, call, sizes=False):
            return None  # `action = agent.select_action(state)` then `env.step(action)`: the host needs it
        return found

    def _may_be_tensor(self, value: cst.BaseExpression) -> bool:
        """A tensor, or a name bound to a tensor on one path and to `None` on the others (`acc = (p == y).mean()`
        when no mixup, else `acc = None`): a helper that reads what it is given reads it on that path."""
        if self.values.is_tensor(value):
            return True
        if not isinstance(value, cst.Name):
            return False
        bindings = self.context.lookup(value) or ()
        values = [b.value for b in bindings if b.kind == "assign"]
        if len(values) != len(bindings) or len(values) < 2:
            return False
        nones = [v for v in values if isinstance(v, cst.Name) and v.value == "None"]
        return bool(nones) and len(nones) < len(values) and all(
            v in nones or self.values.is_tensor(v) for v in values  # type: ignore[arg-type]
        )

    def sync_of_call(self, call: cst.Call, *, strict: bool = False) -> Optional[tuple[str, str]]:
        """(name, how) when `call` runs a function, of this file or imported from the project, that reads a
        device value on the host (see `sync_in`)."""
        function = self.callee(call)
        if function is not None:
            if self.context.enclosing_function(call) is function:
                return None  # recursion
            how = self.sync_in(function, strict=strict)
            return (function.name.value, how) if how is not None else None
        instance = self._method_of_instance(call, strict)
        if instance is not None:
            return instance
        found = project.imported(self.context, call.func, SYNC_WORDS)
        if found is None:
            return None
        summary, name = found
        function_summary = summary.function_summary(name)
        if function_summary is None:
            return None
        how = function_summary.syncs
        return (name, how) if how is not None else None

