"""Which calls in a loop body run a model: a module or a loss (`self.head(x)`, `model(x)`, `criterion(a, b)`,
an `nn.Linear` instance), or a function or method of the same file that computes with torch."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants
from torchlint.semantic import project
from torchlint.semantic.call_arguments import passed_for
from torchlint.semantic.functions import called_function, method_named
from torchlint.semantic.objects import MODULE, objects
from torchlint.semantic.sample_scopes import Scope, Scopes

# What an iterable or a callee is called, when the spelling is the only evidence.
_MODEL = re.compile(
    r"(^|_)(model|models|net|network|encoder|decoder|classifier|backbone|criterion|loss_fn|loss_func|lossfn|"
    r"loss_function|teacher|student|generator|discriminator|critic|actor|policy|mlp|fc|head|embed|embedding|"
    r"projector|projection|predictor|regressor|transformer|bert|vae|unet|cnn|rnn|lstm|gru|conv)\d*$",
    re.IGNORECASE,
)

# Methods of a model that run it.
_MODEL_METHODS = frozenset("forward predict predict_proba encode embed infer inference".split())

# Methods only an nn.Module has (a model put in training or evaluation mode, its parameters handed out).
_MODULE_ONLY_METHODS = frozenset("train eval parameters named_parameters state_dict load_state_dict modules children".split())

# Tensor methods that multiply: their presence shows a helper computes with tensors.
_PRODUCTS = frozenset("dot mm bmm matmul mv einsum".split())
_REDUCTIONS = frozenset("sum mean norm pow sqrt exp log abs clamp sigmoid softmax log_softmax".split())

# torch functions that are not per-sample computation (creation, I/O, conversion, shape-only).
TORCH_NOT_WORK = frozenset(
    """
    tensor as_tensor from_numpy save load zeros ones empty full arange linspace rand randn randint randperm
    zeros_like ones_like empty_like full_like is_tensor numel manual_seed no_grad enable_grad set_grad_enabled
    inference_mode device stack cat concat concatenate hstack vstack Size get_default_dtype
    """.split()
)

# Per-sample results of varying size: the loop cannot be replaced by one batched call.
VARIABLE_LENGTH = frozenset(
    "nonzero argwhere unique unique_consecutive masked_select nms batched_nms non_max_suppression "
    "split_with_sizes tolist".split()
)


# Libraries of image and signal metrics computed with torch (`ssim(sr[i:i + 1], hr[i:i + 1])`).
_METRIC_LIBRARIES = ("pytorch_msssim.", "piq.", "kornia.metrics.", "kornia.losses.", "torchmetrics.functional.")


class Callees:
    """Answers, for one file, whether a call runs a module, a loss or a torch-computing helper."""

    def __init__(self, context: Context, scopes: Scopes) -> None:
        self.context = context
        self.scopes = scopes
        self._helpers: Optional[dict[str, bool]] = None  # module-level functions: do they compute with torch?
        self._locals: dict[cst.FunctionDef, bool] = {}  # functions defined inside functions: the same question
        self._receivers: dict[cst.CSTNode, frozenset[str]] = {}

    def is_module_call(self, scope: Scope, call: cst.Call) -> bool:
        """`self.head(x)`, `model(x)`, `criterion(out, y)`, an `nn.Linear` instance: a module or loss call."""
        func = call.func
        if isinstance(func, (cst.Name, cst.Attribute)) and self._module_by_evidence(scope, func):
            return True
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            attr = func.attr.value
            return attr not in scope.methods and not attr.startswith("_") and bool(
                _MODEL.search(attr) or self._self_module(scope, attr)
            )
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            receiver = func.value
            if isinstance(receiver, cst.Call) and isinstance(receiver.func, (cst.Name, cst.Attribute)):
                # `DiceCoeff().forward(a, b)`: a module or an autograd Function built and run on the spot
                written = self.context.dotted(receiver.func) or ""
                return written.rsplit(".", 1)[-1][:1].isupper()
            return isinstance(receiver, (cst.Name, cst.Attribute)) and self.is_module_call(
                scope, cst.Call(func=receiver)
            )
        if isinstance(func, cst.Name):
            if _MODEL.search(func.value):
                return True
            for value in self.scopes.assigned_anywhere(scope, func.value):
                if isinstance(value, cst.Call) and self._nn_module_class(value):
                    return True
            return False
        if isinstance(func, cst.Attribute) and isinstance(func.value, (cst.Name, cst.Attribute)):
            if self.context.qualname(func) is not None:
                return False
            if func.attr.value in _MODEL_METHODS and isinstance(func.value, cst.Name) and _MODEL.search(func.value.value):
                return True  # `model.predict(x)`, `net.forward(x)`
            return bool(_MODEL.search(func.attr.value)) and func.attr.value.lower() not in ("head", "conv")
        return False

    def _module_by_evidence(self, scope: Scope, func: cst.BaseExpression) -> bool:
        """What the callee is built from (`net = Net()`, `self.m = nn.Linear(...)`, a class or factory of
        another project file), or how the code around it treats it: `m.train()`, `m.parameters()` (only a
        module has those), whatever it is called."""
        if self.context.qualname(func) is not None:
            return False
        if objects(self.context).kind(func) == MODULE:
            return True
        if isinstance(func, cst.Name) and func.value in scope.params:
            holder: cst.CSTNode = scope.node  # a parameter: its own function's code shows what it is
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            holder = self.context.enclosing(scope.node, cst.ClassDef) or scope.node  # `self.m`: the class's code
        else:
            return False
        if (self.context.dotted(func) or "") in self._module_receivers(holder):
            return True
        return isinstance(func, cst.Name) and self._passed_module(scope, func.value)

    def _passed_module(self, scope: Scope, name: str) -> bool:
        """Every call in this file of the top-level function `name` is a parameter of passes a module for it
        (built as one, or a parameter of the caller that the caller treats as one: `m.train()`)."""
        function = scope.node
        if not isinstance(function, cst.FunctionDef) or function not in self.context.module.body:
            return False
        param = next((p for p in function.params.params if p.name.value == name), None)
        passed = passed_for(self.context, param, elsewhere=False, every=True) if param is not None else []
        for _, value in passed:
            if not isinstance(value, (cst.Name, cst.Attribute)):
                return False
            if objects(self.context).kind(value) == MODULE:
                continue
            caller = self.context.enclosing(value, cst.FunctionDef)
            if caller is None or (self.context.dotted(value) or "") not in self._module_receivers(caller):
                return False
        return bool(passed)

    def _module_receivers(self, holder: cst.CSTNode) -> frozenset[str]:
        """The code of every receiver of a method only modules have, in `holder` (`m` in `m.train()`)."""
        found = self._receivers.get(holder)
        if found is None:
            found = self._receivers[holder] = frozenset(
                self.context.dotted(node.func.value) or ""
                for node in descendants(holder)
                if isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in _MODULE_ONLY_METHODS
                and isinstance(node.func.value, (cst.Name, cst.Attribute))
            )
        return found

    def tensor_helper(self, call: cst.Call) -> bool:
        """`dice_coeff(a, b)` for a function of this module that computes with torch (`torch.dot`, `F.*`) and
        has no per-sample work of varying size."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            # `self.score(h, enc[i])`: a method of the class that computes with torch
            cls = self.context.enclosing(call, cst.ClassDef)
            method = method_named(cls, func.attr.value) if cls is not None else None
            return method is not None and self.computes_with_torch(method)
        if isinstance(func, cst.Attribute):
            return self._foreign_helper(func)
        if not isinstance(func, cst.Name):
            return False
        local = called_function(self.context, call)
        if local is not None and local not in self.context.module.body:
            # `def one(a, b): ...` inside the function that loops: a helper like any other
            return self._local_helper(local)
        helpers = self._helpers
        if helpers is None:
            helpers = self._helpers = {}
            for statement in self.context.module.body:
                if isinstance(statement, cst.FunctionDef):
                    helpers[statement.name.value] = self.computes_with_torch(statement)
        if func.value not in helpers:
            helpers[func.value] = self._imported_helper(func)
        return helpers[func.value]

    def _local_helper(self, function: cst.FunctionDef) -> bool:
        found = self._locals.get(function)
        if found is None:
            found = self._locals[function] = self.computes_with_torch(function)
        return found

    def _imported_helper(self, func: cst.Name) -> bool:
        """`calc_psnr` imported from a project module (or a metric library) that computes with torch."""
        qualname = self.context.qualname(cst.Call(func=func)) or ""
        if qualname.startswith(_METRIC_LIBRARIES):
            return True
        found = project.imported(self.context, func)
        if found is None:
            return False
        summary, name = found
        definition = summary.definition(name)
        if not isinstance(definition, cst.FunctionDef):
            return False
        return summary.model.per_sample_loops.callees.computes_with_torch(definition)

    def _foreign_helper(self, func: cst.Attribute) -> bool:
        """`utils.psnr(a, b)` of an imported project module, or `agent.evaluate(x)` where `agent` is built
        once as an instance of a project class: a function or method there that computes with torch."""
        found = foreign_function(self.context, func)
        return found is not None and found[0].model.per_sample_loops.callees.computes_with_torch(found[1])

    def computes_with_torch(self, function: cst.FunctionDef) -> bool:
        computes = False
        for node in descendants(function.body):
            if not isinstance(node, cst.Call):
                continue
            if last_name(node.func) in VARIABLE_LENGTH:
                return False
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in _PRODUCTS | _REDUCTIONS:
                computes = True  # `h.dot(e)`, `q.matmul(k)`, `(p * t).sum()` on the tensors it is given
            elif self._self_module_call(function, node):
                computes = True  # `self.attn(e)`
            elif self.is_module_call(self.scopes.of_function(function), node):
                computes = True  # `model(x.unsqueeze(0))`, `self.net(state)`
            qualname = self.context.qualname(node) or ""
            if qualname.startswith("torch.nn.functional.") or (
                qualname.startswith("torch.") and qualname.count(".") == 1
                and qualname.rsplit(".", 1)[1] not in TORCH_NOT_WORK
            ):
                computes = True
        return computes

    def _self_module_call(self, function: cst.FunctionDef, call: cst.Call) -> bool:
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return False
        cls = self.context.enclosing(function, cst.ClassDef)
        return cls is not None and any(
            isinstance(value, cst.Call) and self._nn_module_class(value)
            for value in self._class_self_assigns(cls).get(func.attr.value, [])
        )

    def _nn_module_class(self, call: cst.Call) -> bool:
        """A module built here (a container of modules is not one that computes)."""
        qualname = self.context.qualname(call) or ""
        return objects(self.context).kind(call) == MODULE and not qualname.endswith(("ModuleList", "ModuleDict"))

    def _self_module(self, scope: Scope, attr: str) -> bool:
        """`self.attr = nn.Something(...)` somewhere in the enclosing class."""
        cls = self.context.enclosing(scope.node, cst.ClassDef)
        if cls is None:
            return False
        for assigned in self._class_self_assigns(cls).get(attr, []):
            if isinstance(assigned, cst.Call) and self._nn_module_class(assigned):
                return True
        return False

    def _class_self_assigns(self, cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression]]:
        return objects(self.context).self_assignments(cls)


def foreign_function(
    context: Context, func: cst.BaseExpression
) -> Optional[tuple[project.ModuleSummary, cst.FunctionDef, bool]]:
    """The function of another project file a call of `func` runs, with that file's summary and whether it
    is a method: an imported function (`predict`, `utils.predict`), or the method of a project class that
    the receiver is bound to once (`agent = Agent(net)`, then `agent.evaluate`)."""
    found = project.imported(context, func)
    definition = found[0].definition(found[1]) if found is not None else None
    if isinstance(definition, cst.FunctionDef):
        return found[0], definition, False  # type: ignore[index]
    cls = imported_instance(context, func.value) if isinstance(func, cst.Attribute) else None
    node = cls[0].definition(cls[1]) if cls is not None else None
    method = method_named(node, func.attr.value) if isinstance(node, cst.ClassDef) else None
    return (cls[0], method, True) if method is not None else None  # type: ignore[index]


def imported_instance(
    context: Context, receiver: cst.BaseExpression, follow_callers: bool = True
) -> Optional[tuple[project.ModuleSummary, str]]:
    """The class of another project file (that file's summary, the class's name there) whose instance
    `receiver` is: a name bound once to a call of it (`agent = Agent(net)`), or (`follow_callers`) a parameter
    of a top-level function that every call of it passes such an instance (`test(args, dqn)` for
    `dqn = Agent(args)` in the training script)."""
    built = context.assigned_value(receiver) if isinstance(receiver, cst.Name) else None
    if isinstance(built, cst.Call):
        return project.imported(context, built.func)
    if follow_callers and isinstance(receiver, cst.Name):
        return _passed_instance(context, receiver)
    return None


def _passed_instance(context: Context, receiver: cst.Name) -> Optional[tuple[project.ModuleSummary, str]]:
    """The one project class whose instance every call of the enclosing top-level function passes for the
    parameter `receiver` (calls in this file and in the project files that import it; one level of callers)."""
    bindings = context.lookup(receiver) or []
    if len(bindings) != 1 or bindings[0].kind != "param" or not isinstance(bindings[0].node, cst.Param):
        return None
    function = context.enclosing(bindings[0].node, cst.FunctionDef)
    if function not in context.module.body:
        return None
    found: Optional[tuple[project.ModuleSummary, str]] = None
    for caller, passed in passed_for(context, bindings[0].node, every=True):
        cls = imported_instance(caller, passed, follow_callers=False)
        if cls is None or found is not None and (found[0].path, found[1]) != (cls[0].path, cls[1]):
            return None
        found = cls
    return found
