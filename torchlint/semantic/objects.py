"""Objects: what kind of object an expression holds — a module, an optimizer, a scheduler, a grad scaler,
a DataLoader, a dataset or a device.

Evidence comes first: the constructor (resolved through imports: `torch.optim.Adam(...)`,
`nn.Linear(...)`, a class of this file that subclasses `nn.Module`), an annotation (`model: nn.Module`),
a single assignment (`net = Net().to(device)`), the assignments to `self.<attr>` in the class. Only when
nothing binds the name is its spelling used (`model`, `optimizer`, `train_loader`): that is the one table of
naming conventions every rule shares.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.names import dotted, last_name
from torchlint.semantic import project
from torchlint.semantic.functions import called_function, is_generator, returns_of
from torchlint.semantic.memo import CycleSafeMemo, question_stack

if TYPE_CHECKING:
    from torchlint.lint.context import Context

MODULE = "module"
OPTIMIZER = "optimizer"
SCHEDULER = "scheduler"
SCALER = "scaler"
LOADER = "loader"
DATASET = "dataset"
DEVICE = "device"

# Constructors, by qualified name, and what they build.
_CONSTRUCTORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^torch\.optim\.lr_scheduler\.\w+$|^torch\.optim\.swa_utils\.SWALR$"), SCHEDULER),
    (re.compile(r"^torch\.optim\.swa_utils\.AveragedModel$"), MODULE),
    (re.compile(r"^torch\.optim\.[A-Z]\w*$"), OPTIMIZER),
    (re.compile(r"^torch\.(?:cuda\.)?amp\.(?:grad_scaler\.)?GradScaler$"), SCALER),
    (re.compile(r"^torch\.utils\.data\.(?:dataloader\.)?DataLoader$"), LOADER),
    (re.compile(r"^torch\.utils\.data\.(?:dataset\.)?(?:TensorDataset|Subset|ConcatDataset|StackDataset)$"), DATASET),
    (re.compile(r"^torchvision\.datasets\.[A-Z]\w*$"), DATASET),
    (re.compile(r"^torch\.nn\.(?:parallel\.)?(?:DistributedDataParallel|DataParallel)$"), MODULE),
    (re.compile(r"^torch\.nn\.(?!Parameter)(?:modules\.\w+\.)?[A-Z]\w*$"), MODULE),
    (re.compile(r"^torchvision\.models\.(?:\w+\.)?[a-z]\w*$|^timm\.create_model$"), MODULE),
    (re.compile(r"^torch\.(?:jit|hub)\.load$"), MODULE),  # a TorchScript module, a hub model
    (re.compile(r"^torch\.device$"), DEVICE),
)
# Base classes, by qualified name, and what their subclasses are.
_BASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^torch\.nn\.(?:Module|Sequential|ModuleList|ModuleDict)$|^torch\.nn\.[A-Z]\w*$"), MODULE),
    (re.compile(r"^torch\.utils\.data\.(?:dataset\.)?(?:Dataset|IterableDataset|TensorDataset)$"), DATASET),
    (re.compile(r"^torch\.optim\.(?:optimizer\.)?Optimizer$"), OPTIMIZER),
    (re.compile(r"^torch\.optim\.lr_scheduler\.\w+$"), SCHEDULER),
    (re.compile(r"^torch\.utils\.data\.(?:dataloader\.)?DataLoader$"), LOADER),
)
_NOT_CONSTRUCTORS = frozenset({"torch.nn.Parameter", "torch.nn.ParameterList", "torch.nn.ParameterDict"})
_LITERALS = (
    cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Integer, cst.Float, cst.List, cst.Tuple,
    cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp, cst.Lambda,
)  # fmt: skip
# Methods that return the object they are called on (`Net().to(device).eval()`).
_SAME_OBJECT = frozenset({"to", "cuda", "cpu", "eval", "train", "float", "half", "double", "bfloat16", "requires_grad_", "share_memory"})

# The naming conventions, matched on the last segment of a name when no binding says what it holds.
MODEL_NAME = re.compile(
    # `save_model`, `load_net`, `build_model`: a verb first names a function that handles a model, not a model.
    r"^(?!(?:save|load|build|get|create|make|init|update|train|run|export|print|setup|prepare|wrap|freeze|unfreeze"
    r"|copy|restore|reset|sync|log|define|construct|compile|fit|validate|evaluate|test|show|summarize|plot)_)"
    r"(?:model|models|net|network|module|generator|discriminator|netg|netd|g|d|encoder|decoder|classifier|backbone|"
    r"student|teacher|policy|critic|actor|unet|vae|autoencoder|ddp_model|raw_model|base_model|\w+_model|\w+_net|"
    r"model_\w+|net_\w+)$",
    re.IGNORECASE,
)
LOSS_MODULE_NAME = re.compile(
    r"^(?:criterion|criterion_\w+|\w+_criterion|crit|loss_fn|loss_func|lossfn|loss_function|\w+_loss_fn|loss_fct)$",
    re.IGNORECASE,
)
OPTIMIZER_NAME = re.compile(
    r"(?:^|_)(?:opt|optim|optimizer|optimiser|optimizers|scaler|grad_scaler)(?:_\w+)?$|^optimizer\w*$|^opt_\w+$"
    r"|^\w*optimizer$",
    re.IGNORECASE,
)
SCHEDULER_NAME = re.compile(r"sched|lr_|warmup|ema|swa", re.IGNORECASE)
LOADER_NAME = re.compile(
    r"^(?:\w*_)?(?:data|train|val|valid|test|eval|dev|calib|source|target|labeled|unlabeled)?_?"
    r"(?:loader|dataloader|dl)s?$"
    r"|^(?:train|val|valid|test|eval|data|dev)_?iter$",
    re.IGNORECASE,
)


def named(name: str, kind: str) -> bool:
    """Whether the conventions say a variable called `name` holds a `kind` object."""
    if kind == MODULE:
        return bool(MODEL_NAME.match(name) or LOSS_MODULE_NAME.match(name))
    if kind == SCHEDULER:
        return bool(SCHEDULER_NAME.search(name))
    if kind in (OPTIMIZER, SCALER):
        return bool(OPTIMIZER_NAME.search(name)) and not SCHEDULER_NAME.search(name)
    if kind == LOADER:
        return bool(LOADER_NAME.match(name))
    return False


class Objects:
    """Kinds of the objects one file's names hold (shared by every rule through the semantic model)."""

    def __init__(self, context: "Context") -> None:
        self.context = context
        self._classes: Optional[dict[str, cst.ClassDef]] = None
        self._class_kinds: dict[cst.ClassDef, Optional[str]] = {}
        self._self_attrs: dict[cst.ClassDef, dict[str, list[cst.BaseExpression]]] = {}
        self._stored: Optional[dict[str, list[cst.BaseExpression]]] = None
        self._kinds: CycleSafeMemo[cst.CSTNode, Optional[str]] = CycleSafeMemo(None, question_stack(context))

    # -- by evidence -----------------------------------------------------------------------------------
    def kind(self, expr: cst.BaseExpression) -> Optional[str]:
        """What `expr` holds by construction, annotation or assignment; None when nothing shows it."""
        return self._kinds.ask(expr, lambda e: self._kind(e, 0))  # `model = model.to(device)` cycles

    def _kind(self, expr: cst.BaseExpression, depth: int) -> Optional[str]:
        if depth > 6:
            return None
        context = self.context
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _SAME_OBJECT:
                inner = self._kind(func.value, depth + 1)
                if inner is not None:
                    return inner
            qual = context.qualname(expr)
            if qual is not None and (constructor_kind(qual) is not None or project.imported(context, func) is None):
                return constructor_kind(qual)  # (a class imported from a project module is read below)
            if isinstance(func, cst.Name):
                cls = self.classes().get(func.value)
                if cls is not None and _bound_once(context, func):
                    return self.class_kind(cls)
            from_project = project.imported(context, func)  # a class or factory of another project file
            if from_project is not None:
                module, name = from_project
                found_class = module.class_summary(name)
                if found_class is not None:
                    return found_class.kind
                found_function = module.function_summary(name)
                return found_function.returns if found_function is not None else None
            function = called_function(context, expr)  # build_model(cfg), self.make_optimizer()
            if function is not None and not is_generator(function):
                kinds = {self._kind(r.value, depth + 1) for r in returns_of(function) if r.value is not None}
                return kinds.pop() if len(kinds) == 1 else None
            return None
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name):
            return self._item_kind(expr.value, depth)  # `nets[name](x)`, `_cache[url]`
        if isinstance(expr, cst.Name):
            bindings = context.lookup(expr)
            if not bindings or len(bindings) != 1:
                return None
            binding = bindings[0]
            if binding.kind == "assign" and binding.value is not None:
                return self._kind(binding.value, depth + 1)
            if binding.kind == "param" and isinstance(binding.node, cst.Param):
                return self._param_kind(binding.node, depth)
            return None
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = context.enclosing(expr, cst.ClassDef)
            if cls is None:
                return None
            values = self.self_assignments(cls).get(expr.attr.value, [])
            kinds = {self._kind(v, depth + 1) for v in values if not _hands_back(context, v, expr)}
            return kinds.pop() if len(kinds) == 1 else None
        return None

    def _item_kind(self, name: cst.Name, depth: int) -> Optional[str]:
        """What the items of a container hold: a name bound once to a dict or list display (or `dict()`), whose
        written items and items stored later (`cache[key] = value`) all hold one kind."""
        bindings = self.context.lookup(name)
        if not bindings or len(bindings) != 1 or bindings[0].kind != "assign":
            return None
        container = bindings[0].value
        if isinstance(container, cst.Dict):
            items = [e.value for e in container.elements if isinstance(e, cst.DictElement)]
        elif isinstance(container, cst.List):
            items = [e.value for e in container.elements if isinstance(e, cst.Element)]
        elif isinstance(container, cst.Call) and not container.args and isinstance(container.func, cst.Name) and (
            container.func.value in ("dict", "list") and not self.context.lookup(container.func)
        ):
            items = []
        else:
            return None
        items.extend(self._stored_items().get(name.value, ()))
        kinds = {self._kind(item, depth + 1) for item in items}
        return kinds.pop() if len(kinds) == 1 else None

    def _stored_items(self) -> dict[str, list[cst.BaseExpression]]:
        """`name[key] = value` anywhere in the file: the values, by container name."""
        if self._stored is None:
            from torchlint.lint.walk import descendants

            self._stored = {}
            for node in descendants(self.context.module):
                if isinstance(node, cst.Assign) and len(node.targets) == 1:
                    target = node.targets[0].target
                    if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
                        self._stored.setdefault(target.value.value, []).append(node.value)
        return self._stored

    def _param_kind(self, param: cst.Param, depth: int) -> Optional[str]:
        if param.annotation is not None:
            annotation = param.annotation.annotation
            qual = self.context.qualname(annotation) if isinstance(annotation, (cst.Name, cst.Attribute)) else None
            if qual is not None:
                return base_kind(qual)
            return None
        if depth > 2:
            return None
        from torchlint.semantic.call_arguments import passed_for

        # what the callers pass (`run_epoch(net, loader)` where `net = Net()`), when they all agree
        passed = passed_for(self.context, param)
        kinds = {objects(there)._kind(arg, depth + 1) for there, arg in passed}
        return kinds.pop() if len(kinds) == 1 else None

    def classes(self) -> dict[str, cst.ClassDef]:
        """The file's classes by name (top level and nested; the first definition of a name wins)."""
        if self._classes is None:
            from torchlint.lint.walk import descendants

            self._classes = {}
            for node in descendants(self.context.module):
                if type(node) is cst.ClassDef:  # exact type: see `walk.is_a`
                    self._classes.setdefault(node.name.value, node)
        return self._classes

    def class_kind(self, cls: cst.ClassDef) -> Optional[str]:
        """What instances of a class of this file are, from its bases (through other classes of the file)."""
        if cls in self._class_kinds:
            return self._class_kinds[cls]
        self._class_kinds[cls] = None
        found = None
        for base in cls.bases:
            value = base.value
            qual = self.context.qualname(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
            if qual is not None:
                found = base_kind(qual)
            elif isinstance(value, cst.Name) and value.value in self.classes():
                found = self.class_kind(self.classes()[value.value])
            if found is not None:
                break
        self._class_kinds[cls] = found
        return found

    def is_iterable_dataset(self, expr: cst.BaseExpression) -> bool:
        """`expr` builds (or names) an `IterableDataset`: a class of this file that derives from one."""
        if isinstance(expr, cst.Name):
            bindings = self.context.lookup(expr)
            if bindings and len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
                expr = bindings[0].value
        if not isinstance(expr, cst.Call):
            return False
        qual = self.context.qualname(expr) or ""
        if qual.endswith("IterableDataset"):
            return True
        cls = self.classes().get(expr.func.value) if isinstance(expr.func, cst.Name) else None
        return cls is not None and self._derives_from_iterable(cls, set())

    def _derives_from_iterable(self, cls: cst.ClassDef, seen: set[str]) -> bool:
        seen.add(cls.name.value)
        for base in cls.bases:
            value = base.value
            qual = self.context.qualname(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
            if qual is not None and qual.endswith("IterableDataset"):
                return True
            if isinstance(value, cst.Name) and value.value in self.classes() and value.value not in seen:
                if self._derives_from_iterable(self.classes()[value.value], seen):
                    return True
        return False

    def is_module_class(self, cls: Optional[cst.ClassDef]) -> bool:
        """An `nn.Module` subclass: by its bases, or (unresolved bases) named like one or defining `forward`."""
        if cls is None:
            return False
        if self.class_kind(cls) == MODULE:
            return True
        for base in cls.bases:
            if not isinstance(base.value, (cst.Name, cst.Attribute)):
                continue
            name = self.context.qualname(base.value) or dotted(base.value) or ""
            if name.endswith(("Module", "Model")):  # pl.LightningModule, a base of another file
                return True
        if isinstance(cls.body, cst.IndentedBlock):
            return any(isinstance(s, cst.FunctionDef) and s.name.value == "forward" for s in cls.body.body)
        return False

    def self_assignments(self, cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression]]:
        """`self.<attr> = value` anywhere in the class's own methods, by attribute."""
        found = self._self_attrs.get(cls)
        if found is None:
            from torchlint.lint.walk import descendants

            found = self._self_attrs[cls] = {}
            for node in descendants(cls.body):
                if type(node) is cst.Assign:  # exact type: see `walk.is_a`
                    for target in node.targets:
                        for t, value in assigned_pairs(target.target, node.value):
                            if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                                found.setdefault(t.attr.value, []).append(value)
        return found

    # -- by evidence, else by name ---------------------------------------------------------------------
    def holds(self, expr: cst.BaseExpression, kind: str) -> bool:
        """`expr` holds a `kind` object: shown by its binding, or (nothing binds it) by its name."""
        found = self.kind(expr)
        if found is not None:
            return found == kind
        if self._bound_elsewhere(expr):
            return False
        name = last_name(expr)
        return name is not None and named(name, kind)

    def _bound_elsewhere(self, expr: cst.BaseExpression) -> bool:
        """The name is imported from a module, or bound once to a literal (`model = "resnet18"`): its
        spelling says nothing about what it holds."""
        if isinstance(expr, (cst.Name, cst.Attribute)) and self.context.qualname(expr) is not None:
            return True
        if isinstance(expr, cst.Name):
            bindings = self.context.lookup(expr)
            if bindings and len(bindings) == 1 and bindings[0].kind == "assign":
                return isinstance(bindings[0].value, _LITERALS)
        return False

def constructor_kind(qual: str) -> Optional[str]:
    if qual in _NOT_CONSTRUCTORS:
        return None
    for pattern, kind in _CONSTRUCTORS:
        if pattern.match(qual):
            return kind
    return None


def base_kind(qual: str) -> Optional[str]:
    if qual in _NOT_CONSTRUCTORS:
        return None
    if qual == "torch.Tensor":
        return None
    for pattern, kind in _BASES:
        if pattern.match(qual):
            return kind
    return None


def _bound_once(context: "Context", name: cst.Name) -> bool:
    """`name` refers to one class statement of this file (not rebound)."""
    bindings = context.lookup(name)
    return bool(bindings) and len(bindings) == 1 and isinstance(bindings[0].node, cst.ClassDef)


def assigned_pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """Target and value, each target of `self.a, self.b = a, b` with its own value."""
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
        if len(target.elements) == len(value.elements) and not any(
            isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)
        ):
            return [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
    return [(target, value)]


def _hands_back(context: "Context", value: cst.BaseExpression, held: cst.Attribute) -> bool:
    """`value` calls a function of this file that returns one of its parameters, and the call passes `held` for
    it (`self.target = self.soft_update(self.net, self.target, tau)` where the helper ends `return target`):
    assigning the result keeps the object the attribute held, so it says nothing new about its kind."""
    if not isinstance(value, cst.Call):
        return False
    function = called_function(context, value)
    if function is None or is_generator(function):
        return False
    returned = {r.value.value if isinstance(r.value, cst.Name) else None for r in returns_of(function)}
    if len(returned) != 1 or None in returned:
        return False
    name = returned.pop()
    positional = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if isinstance(value.func, cst.Attribute) and positional[:1] in (["self"], ["cls"]):
        positional = positional[1:]  # `self.helper(a)`: `a` fills the parameter after `self`
    for position, arg in enumerate(value.args):
        if arg.star:
            return False
        bound = arg.keyword.value if arg.keyword is not None else (positional[position] if position < len(positional) else None)
        if bound == name:
            return context.code(arg.value) == context.code(held)
    return False


def objects(context: "Context") -> Objects:
    """The file's one `Objects` (the semantic model hands out the same instance)."""
    return context.shared(Objects)
