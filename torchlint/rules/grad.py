"""Autograd and inference: forward passes that build a graph nobody uses, evaluation in training mode."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

import libcst as cst

from torchlint.lint.calls import keyword, positional
from torchlint.lint.context import UNKNOWN, Context
from torchlint.lint.names import dotted
from torchlint.lint.files import is_test_file
from torchlint.lint.rule import Fix, FixSafety, InsertBefore, Replace, Rule
from torchlint.lint.walk import scope_nodes, semantic_children

FAMILY = "Autograd and inference"

# Context managers / decorators that turn autograd off (set_grad_enabled with any argument: a value that
# cannot be decided is the train/eval switch `set_grad_enabled(phase == "train")`, which we leave alone).
GRAD_OFF = frozenset({"torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled"})
GRAD_ON = frozenset({"torch.enable_grad"})
_GRAD_WORDS = frozenset({"no_grad", "inference_mode", "set_grad_enabled", "enable_grad"})

# Function names that mark an evaluation / prediction entry point, split into words.
STRONG_EVAL_WORDS = frozenset(
    {
        "eval", "evaluate", "evaluation", "evaluating", "validate", "validation", "validating", "val", "valid",
        "test", "testing", "predict", "prediction", "predictions", "pred", "preds", "infer", "inference",
        "inferencing",
    }
)
# Weaker words: a sampler or generator also names RL action sampling and model methods; need a loop.
WEAK_EVAL_WORDS = frozenset({"sample", "sampling", "generate", "generation", "translate", "decode_greedy", "beam"})
LOADER_WORDS = frozenset({"val", "valid", "validation", "test", "testing", "eval", "dev", "holdout"})

# Framework hooks that run under no_grad / in eval mode already (Lightning, MMEngine, ...).
_HOOK_SUFFIXES = ("_step", "_step_end", "_epoch_end", "_batch_end")
# Last words of a callee that name a network.
_MODEL_WORDS = frozenset(
    {
        "model", "models", "net", "nets", "network", "classifier", "encoder", "decoder", "generator",
        "discriminator", "backbone", "teacher", "student", "unet", "vae", "autoencoder", "detector", "segmenter",
        "ema", "transformer", "cnn", "rnn", "lstm", "gru", "mlp", "resnet", "vgg", "bert", "gpt", "llm", "lm",
    }
)
# Network words that also name other things (a random-number or code generator, a tokenizer's decoder, a JSON
# encoder, an exponential moving average, a data transformer): on an owner that is not a network they need more
# evidence.
_AMBIGUOUS_MODEL_WORDS = frozenset(
    {"generator", "encoder", "decoder", "ema", "transformer", "lm", "llm", "teacher", "student", "detector",
     "segmenter"}
)
# Words of a generate_* / sample_* function name that say it builds text or code, not samples from a network.
_SOURCE_WORDS = frozenset({"string", "str", "repro", "source", "stub", "template", "docstring", "header"})
_BUILDER_WORDS = frozenset(
    {
        "build", "create", "get", "load", "make", "init", "setup", "define", "construct", "prepare", "wrap",
        "save", "copy", "to", "train", "freeze", "unwrap", "export", "convert", "register", "compile", "new",
        "instantiate", "restore", "print", "log", "summary", "count", "update", "fuse",
    }
)
# Method names on a module that are not forward passes.
_FORWARD_METHODS = re.compile(r"^forward(_\w+)?$")
_HOST_METHODS = frozenset({"item", "tolist", "numpy", "cpu"})
_TRAIN_STEP_OWNERS = re.compile(r"optim|opt\b|^opt|scaler|sched", re.IGNORECASE)

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def words(name: str) -> list[str]:
    """`evaluateModel_v2` -> ["evaluate", "model", "v", "2"] (lower case)."""
    return [w.lower() for w in _WORD.findall(name)]


def is_model_like(text: str) -> bool:
    """Whether a callee written as `text` (`model`, `self.net`, `ema_model`, `netG`) names a network."""
    last = text.rsplit(".", 1)[-1]
    if not last or last[0].isupper() or last.startswith("__"):
        return False  # a class (constructing it) or a dunder
    parts = words(last)
    if not parts or parts[0] in _BUILDER_WORDS:
        return False
    candidates = [p for p in parts if not p.isdigit()]
    if not candidates:
        return False
    tail = candidates[-1]
    if tail in _MODEL_WORDS or tail.endswith("net"):
        return True
    # netG, netD, model_ema, model_a, net_1: the network word first, a short tag after
    head = candidates[0]
    return (head in _MODEL_WORDS or head.endswith("net")) and all(len(p) <= 3 for p in candidates[1:])


def is_network_callee(text: str) -> bool:
    """Whether a model-like callee (`is_model_like`) is a network by its owner too: a plain name (`netG`), an
    attribute of `self` (`self.generator`) or of a network (`net.encoder`, `self.model.decoder`), or an
    attribute that can only name a network (`trainer.model`); not `writer.generator` or `tokenizer.decoder`."""
    owner, _, attr = text.rpartition(".")
    if not owner or owner in ("self", "cls") or is_model_like(owner):
        return True
    parts = [p for p in words(attr) if not p.isdigit()]
    return bool(parts) and not any(p in _AMBIGUOUS_MODEL_WORDS for p in parts)


def eval_name_strength(name: str) -> int:
    """2: an evaluation entry point by name; 1: a sampler/generator; 0: neither."""
    ws = words(name)
    if any(w in STRONG_EVAL_WORDS for w in ws):
        return 2
    if any(w in WEAK_EVAL_WORDS for w in ws):
        return 1
    return 0


# ---------------------------------------------------------------------------------------------------------------
# Per-file facts shared by the rules of this family: one walk of the file, on demand.


@dataclass
class CallFact:
    node: cst.Call
    callee: Optional[str]  # dotted text of the callee, None when not a Name/Attribute chain
    order: int
    covered: bool  # under a grad-off context inside its scope (or after set_grad_enabled(False))
    loops: tuple[cst.CSTNode, ...]  # enclosing loops (For/While/comprehension) inside the scope, outermost first
    withs: tuple[cst.With, ...]  # enclosing grad-off With statements inside the scope


@dataclass
class ScopeFacts:
    """What one function (or the module's top-level code) does, not counting nested functions and classes."""

    node: Union[cst.FunctionDef, cst.Module]
    name: str
    cls: Optional[cst.ClassDef]
    parent: Optional["ScopeFacts"]
    decorated_grad_off: Optional[cst.Decorator] = None
    decorated_other_grad: bool = False  # enable_grad, jit, or an unknown decorator about grad
    calls: list[CallFact] = field(default_factory=list)
    grad_off: list[int] = field(default_factory=list)  # orders of grad-off constructs (with items, calls)
    grad_off_withs: list[cst.With] = field(default_factory=list)
    set_grad_false: list[int] = field(default_factory=list)  # orders of bare set_grad_enabled(False) calls
    training: list[int] = field(default_factory=list)  # orders of backward/step/autograd.grad/requires_grad
    host: bool = False  # .item()/.cpu()/.numpy()/.tolist()
    evals: list[tuple[cst.Call, str, int]] = field(default_factory=list)  # T.eval() / T.train(False)
    trains: list[tuple[cst.Call, str, int]] = field(default_factory=list)  # T.train() / T.train(True)
    mode_unknown: list[tuple[cst.Call, str, int]] = field(default_factory=list)  # T.train(flag)
    loops: list[tuple[cst.CSTNode, int, int, tuple]] = field(default_factory=list)  # (loop, start, end, iter text)
    yields: bool = False
    end: int = 0
    start: int = 0
    is_async: bool = False

    @property
    def is_method(self) -> bool:
        return self.cls is not None


class FileFacts:
    """Per-file facts, filled in by `FactsCollector` during the engine's single walk of the file."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.scopes: list[ScopeFacts] = []
        self.by_node: dict[cst.CSTNode, ScopeFacts] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.parents = context.parents  # complete once the walk is over
        self.orders: dict[cst.CSTNode, int] = {}
        self.is_test_file = is_test_file(context.source.path, context.source.text)
        text = context.source.text
        self.imports_test_framework = "import pytest" in text or "import unittest" in text or "from unittest" in text
        self.frozen: set[str] = set()  # modules whose parameters are frozen somewhere in the file
        self._covered: Optional[set[str]] = None
        # walk state
        self.counter = 0
        top = ScopeFacts(context.module, "<module>", None, None)
        self.scopes.append(top)
        self.by_node[context.module] = top
        self.scope_stack: list[ScopeFacts] = [top]
        self.class_stack: list[Optional[cst.ClassDef]] = [None]
        self.withs: list[tuple[ScopeFacts, cst.With]] = []
        self.loops: list[tuple[ScopeFacts, cst.CSTNode]] = []

    @property
    def covered_names(self) -> set[str]:
        if self._covered is None:
            self._covered = self._covered_names()
        return self._covered

    def is_frozen(self, target: str) -> bool:
        """`target`'s parameters get requires_grad False somewhere (then no graph is built anyway)."""
        last = target.rsplit(".", 1)[-1]
        return target in self.frozen or last in {f.rsplit(".", 1)[-1] for f in self.frozen}

    # -- collection (called from the engine walk) --------------------------------------------------------------
    def tick(self, node: cst.CSTNode) -> int:
        self.counter += 1
        self.orders[node] = self.counter
        return self.counter

    @property
    def scope(self) -> ScopeFacts:
        return self.scope_stack[-1]

    def _covered_now(self) -> bool:
        scope = self.scope
        return bool(self.withs) and self.withs[-1][0] is scope

    def _state(self) -> tuple[bool, tuple, tuple]:
        scope = self.scope
        loops = tuple(loop for owner, loop in self.loops if owner is scope)
        withs = tuple(w for owner, w in self.withs if owner is scope)
        return bool(withs), loops, withs

    def enter_body(self, func: cst.FunctionDef) -> None:
        order = self.tick(func.body)
        scope = ScopeFacts(func, func.name.value, self.class_stack[-1], self.scope, start=order)
        scope.is_async = func.asynchronous is not None
        self.scopes.append(scope)
        self.by_node[func] = scope
        self._decorators(func, scope)
        self.scope_stack.append(scope)
        self.class_stack.append(None)

    def leave_body(self) -> None:
        self.scope.end = self.counter
        self.scope_stack.pop()
        self.class_stack.pop()

    def enter_class(self, node: cst.ClassDef) -> None:
        self.tick(node)
        self.classes.setdefault(node.name.value, node)

    def enter_class_body(self, node: cst.ClassDef) -> None:
        self.class_stack.append(node)

    def leave_class_body(self) -> None:
        self.class_stack.pop()

    def enter_with(self, node: cst.With) -> None:
        order = self.tick(node)
        if any(self._grad_item(item.item) for item in node.items):
            self.scope.grad_off.append(order)
            self.scope.grad_off_withs.append(node)
            self.withs.append((self.scope, node))

    def leave_with(self, node: cst.With) -> None:
        if self.withs and self.withs[-1][1] is node:
            self.withs.pop()

    def enter_loop(self, node: cst.CSTNode) -> None:
        order = self.tick(node)
        self.scope.loops.append((node, order, order, ()))
        self.loops.append((self.scope, node))
        if isinstance(node, cst.For) and isinstance(node.iter, cst.Call):
            owner = node.iter.func
            if isinstance(owner, cst.Attribute) and owner.attr.value in ("parameters", "named_parameters"):
                body = self.context.code(node.body)
                if re.search(r"requires_grad(_\(\s*False|\s*=\s*False)", body):
                    self.frozen.add(_strip_mode_calls(self.context.code(owner.value)))

    def leave_loop(self, node: cst.CSTNode) -> None:
        if self.loops and self.loops[-1][1] is node:
            self.loops.pop()
        scope = self.scope
        for i in range(len(scope.loops) - 1, -1, -1):
            entry = scope.loops[i]
            if entry[0] is node:
                scope.loops[i] = (entry[0], entry[1], self.counter, entry[3])
                break

    def enter_attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in ("requires_grad", "grad", "retain_grad", "register_hook"):
            self.scope.training.append(self.tick(node))

    def enter_yield(self, node: cst.CSTNode) -> None:
        self.scope.yields = True

    def enter_call(self, node: cst.Call) -> None:
        order = self.tick(node)
        covered, loops, withs = self._state()
        self._call(node, self.scope, order, covered, loops, withs, self.context.qualname)

    def finish(self) -> None:
        self.scopes[0].end = self.counter

    def _grad_item(self, expr: cst.BaseExpression) -> bool:
        """`torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(...)` (resolved or by spelling)."""
        if not isinstance(expr, cst.Call):
            return False
        name = self.context.qualname(expr)
        if name in GRAD_OFF:
            if name == "torch.inference_mode" and expr.args and self.context.literal(expr.args[0].value) is False:
                return False
            return True
        text = dotted(expr.func) if isinstance(expr.func, (cst.Name, cst.Attribute)) else None
        return bool(text) and name is None and text.rsplit(".", 1)[-1] in _GRAD_WORDS - {"enable_grad"}

    def _decorators(self, node: cst.FunctionDef, scope: ScopeFacts) -> None:
        for decorator in node.decorators:
            expr = decorator.decorator
            target = expr.func if isinstance(expr, cst.Call) else expr
            name = self.context.qualname(target)
            text = dotted(target) if isinstance(target, (cst.Name, cst.Attribute)) else self.context.code(target)
            if name in GRAD_OFF or (name is None and text and text.rsplit(".", 1)[-1] in ("no_grad", "inference_mode")):
                if name == "torch.set_grad_enabled" or (isinstance(expr, cst.Call) and expr.args and
                                                          self.context.literal(expr.args[0].value) is False):
                    scope.decorated_other_grad = True
                else:
                    scope.decorated_grad_off = decorator
            elif (name or "").startswith("torch.jit") or name in GRAD_ON:
                scope.decorated_other_grad = True
            elif text and re.search(r"grad|inference|jit", text):
                scope.decorated_other_grad = True

    def _call(self, node: cst.Call, scope: ScopeFacts, order: int, covered: bool, loops: tuple, withs: tuple,
              qualname) -> None:
        func = node.func
        callee = dotted(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        last = callee.rsplit(".", 1)[-1] if callee else (func.attr.value if isinstance(func, cst.Attribute) else None)
        if scope.set_grad_false and not covered:
            covered = True
        scope.calls.append(CallFact(node, callee, order, covered, loops, withs))
        if last is None:
            return
        if last in ("backward", "manual_backward") or last.endswith("_backward"):
            scope.training.append(order)
        elif last == "step" and isinstance(func, cst.Attribute):
            owner = self.context.code(func.value)
            if _TRAIN_STEP_OWNERS.search(owner):
                scope.training.append(order)
        elif last in ("zero_grad", "requires_grad_", "clip_grad_norm_", "clip_grad_value_"):
            scope.training.append(order)
        elif last in ("grad", "vjp", "jvp", "jacobian", "hessian", "functional_call") and callee:
            name = qualname(func) or ""
            if name.startswith("torch.autograd") or name.startswith("torch.func"):
                scope.training.append(order)
        elif last in _HOST_METHODS and isinstance(func, cst.Attribute):
            scope.host = True
        elif last == "enable_grad":
            scope.training.append(order)  # grad deliberately on
        elif last in ("set_grad_enabled", "no_grad", "inference_mode"):
            parent = self.parents.get(node)
            if not isinstance(parent, (cst.WithItem, cst.Decorator)):  # those are recorded with the With / def
                scope.grad_off.append(order)
                if last == "set_grad_enabled" and node.args and self.context.literal(node.args[0].value) is False:
                    scope.set_grad_false.append(order)
        if last == "requires_grad_" and isinstance(func, cst.Attribute):
            if node.args and self.context.literal(node.args[0].value) is False:
                self.frozen.add(_strip_mode_calls(self.context.code(func.value)))
        if isinstance(func, cst.Attribute) and last in ("eval", "train"):
            target = self.context.code(func.value)
            args = node.args
            if last == "eval" and not args:
                scope.evals.append((node, target, order))
            elif last == "train":
                if not args:
                    scope.trains.append((node, target, order))
                else:
                    value = self.context.literal(args[0].value)
                    if value is False:
                        scope.evals.append((node, target, order))
                    elif value is True:
                        scope.trains.append((node, target, order))
                    else:
                        scope.mode_unknown.append((node, target, order))

    # -- callers -----------------------------------------------------------------------------------------------
    def _covered_names(self) -> set[str]:
        """Names of functions called somewhere in the file under a grad-off context (to a fixpoint)."""
        covered: set[str] = set()
        for scope in self.scopes:
            for call in scope.calls:
                # torch.no_grad()(fn)
                if isinstance(call.node.func, cst.Call) and self._grad_item(call.node.func):
                    for arg in call.node.args:
                        if isinstance(arg.value, cst.Name):
                            covered.add(arg.value.value)
        changed = True
        while changed:
            changed = False
            for scope in self.scopes:
                scope_off = scope.decorated_grad_off is not None or (
                    isinstance(scope.node, cst.FunctionDef) and scope.name in covered
                )
                for call in scope.calls:
                    if not call.callee:
                        continue
                    if call.covered or scope_off:
                        name = call.callee.rsplit(".", 1)[-1]
                        if name not in covered:
                            covered.add(name)
                            changed = True
        return covered

    def callers(self, name: str) -> list[tuple[ScopeFacts, CallFact]]:
        found = []
        for scope in self.scopes:
            for call in scope.calls:
                if call.callee and call.callee.rsplit(".", 1)[-1] == name and call.node.func is not None:
                    if isinstance(scope.node, cst.FunctionDef) and scope.node.name.value == name:
                        continue  # recursion
                    found.append((scope, call))
        return found

    def is_grad_free(self, scope: ScopeFacts) -> bool:
        """Autograd is off for the whole function: decorated, or called under no_grad somewhere in the file."""
        return scope.decorated_grad_off is not None or scope.name in self.covered_names

    def framework_hook(self, scope: ScopeFacts) -> bool:
        """A method the framework calls with grad off / in eval mode already (Lightning, MMEngine, ...)."""
        if not scope.is_method:
            return False
        name = scope.name
        return name.endswith(_HOOK_SUFFIXES) or name.startswith("on_") or name in ("forward", "__call__")

    def is_test_case(self, scope: ScopeFacts) -> bool:
        if self.is_test_file:
            return True
        if scope.name.startswith("test") and self.imports_test_framework:
            return True
        cls = scope.cls
        if cls is not None and self.imports_test_framework and any(
            "TestCase" in (dotted(b.value) or "") for b in cls.bases
        ):
            return True
        return False

    def is_module_class(self, cls: Optional[cst.ClassDef]) -> bool:
        """A subclass of nn.Module (resolved, or a base named like one, or a class with a `forward` method)."""
        if cls is None:
            return False
        for base in cls.bases:
            name = self.context.qualname(base.value) or dotted(base.value) or ""
            if name.startswith("torch.nn.") or name.endswith("Module") or name.endswith("Model"):
                return True
        if isinstance(cls.body, cst.IndentedBlock):
            return any(isinstance(s, cst.FunctionDef) and s.name.value == "forward" for s in cls.body.body)
        return False

    def top_statement_in(self, node: cst.CSTNode, block: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The statement directly in `block` (an IndentedBlock or the Module) that contains `node`."""
        current = node
        while current is not None:
            parent = self.parents.get(current)
            if parent is block:
                return current
            current = parent
        return None

    def block_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The IndentedBlock or Module whose statement list holds the statement around `node`."""
        current = node
        while current is not None:
            parent = self.parents.get(current)
            if isinstance(parent, (cst.IndentedBlock, cst.Module)) and isinstance(
                current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
            ):
                return parent
            current = parent
        return None

    def indent_of(self, node: cst.CSTNode) -> str:
        """The indentation of the statement `node` (its enclosing blocks' indents)."""
        default = self.context.module.default_indent
        parts = []
        current = self.parents.get(node)
        while current is not None:
            if isinstance(current, cst.IndentedBlock):
                parts.append(current.indent if current.indent is not None else default)
            current = self.parents.get(current)
        return "".join(reversed(parts))


_COMPS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_TL301_GATE = re.compile(r"\.eval\(\s*\)|\.train\(|def\s+\w*(?i:eval|val|test|pred|infer|sampl|generat|translat)")
_IMPORTS_TORCH = re.compile(r"^[ \t]*(import|from)[ \t]+torch(vision|audio|text)?\b", re.MULTILINE)
_OTHER_FRAMEWORK = re.compile(
    r"^[ \t]*(import|from)[ \t]+(paddle|tensorflow|keras|jax|flax|mindspore|oneflow|jittor|mxnet|megengine|cupy)\b",
    re.MULTILINE,
)
_COMMENTS = re.compile(r"^[ \t]*#.*$|#[^'\"\n]*$", re.MULTILINE)


def uses_torch(text: str) -> bool:
    """Whether the file is PyTorch code: it imports torch, or (snippets, `from utils import *`) imports no
    other framework and uses `torch.` in its code or moves values to the GPU with `.cuda()`."""
    if _IMPORTS_TORCH.search(text):
        return True
    if _OTHER_FRAMEWORK.search(text):
        return False  # a Paddle / TensorFlow / ... script, whatever its comments or strings say about torch
    code = _COMMENTS.sub("", text)
    return bool(re.search(r"(?<![\w.])torch\.\w", code)) or ".cuda(" in code


# Methods that return the module itself (`model.eval().to(device)`).
_MODE_CHAIN = frozenset({"eval", "train", "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "requires_grad_"})


def _strip_mode_calls(text: str) -> str:
    """`model.eval().to(device)` -> `model` (calls that return the module itself)."""
    while True:
        new = re.sub(r"\.(eval|train|to|cuda|cpu|float|half|requires_grad_)\([^()]*\)$", "", text)
        if new == text:
            return text
        text = new


def file_facts(context: Context) -> Optional[FileFacts]:
    """The facts collected for this file during the walk (None when no rule of the family collected them)."""
    return getattr(context, "_grad_file_facts", None)


class FactsCollector(Rule):
    """Base of the rules that share `FileFacts`: the first such rule whose text gate passes collects them."""

    def gate(self, text: str) -> bool:
        return True

    def visit_Module(self, node: cst.Module) -> None:
        self._collecting = False
        if getattr(self.context, "_grad_file_facts", None) is not None:
            return
        if not self.gate(self.context.source.text):
            return
        self.context._grad_file_facts = FileFacts(self.context)  # type: ignore[attr-defined]
        self._collecting = True
        self._facts = self.context._grad_file_facts  # type: ignore[attr-defined]

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if self._collecting:
            parent = self.context.parents.get(node)
            if type(parent) is cst.FunctionDef:
                self._facts.enter_body(parent)
            elif type(parent) is cst.ClassDef:
                self._facts.enter_class_body(parent)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if self._collecting:
            parent = self.context.parents.get(node)
            if type(parent) is cst.FunctionDef:
                self._facts.leave_body()
            elif type(parent) is cst.ClassDef:
                self._facts.leave_class_body()

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.visit_IndentedBlock(node)  # type: ignore[arg-type]

    def leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.leave_IndentedBlock(node)  # type: ignore[arg-type]

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self._collecting:
            self._facts.enter_class(node)

    def visit_With(self, node: cst.With) -> None:
        if self._collecting:
            self._facts.enter_with(node)

    def leave_With(self, node: cst.With) -> None:
        if self._collecting:
            self._facts.leave_with(node)

    def visit_For(self, node: cst.For) -> None:
        if self._collecting:
            self._facts.enter_loop(node)

    def leave_For(self, node: cst.For) -> None:
        if self._collecting:
            self._facts.leave_loop(node)

    visit_While = visit_For  # type: ignore[assignment]
    leave_While = leave_For  # type: ignore[assignment]
    visit_ListComp = visit_For  # type: ignore[assignment]
    leave_ListComp = leave_For  # type: ignore[assignment]
    visit_SetComp = visit_For  # type: ignore[assignment]
    leave_SetComp = leave_For  # type: ignore[assignment]
    visit_DictComp = visit_For  # type: ignore[assignment]
    leave_DictComp = leave_For  # type: ignore[assignment]
    visit_GeneratorExp = visit_For  # type: ignore[assignment]
    leave_GeneratorExp = leave_For  # type: ignore[assignment]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._collecting:
            self._facts.enter_attribute(node)

    def visit_Yield(self, node: cst.Yield) -> None:
        if self._collecting:
            self._facts.enter_yield(node)

    def visit_Call(self, node: cst.Call) -> None:
        if self._collecting:
            self._facts.enter_call(node)

    def leave_Module(self, node: cst.Module) -> None:
        facts = file_facts(self.context)
        if facts is not None and self.gate(self.context.source.text):
            facts.finish()  # the walk is over: every rule sees complete facts
            self.check(facts)

    def check(self, facts: FileFacts) -> None:
        raise NotImplementedError


def forward_calls(scope: ScopeFacts, target: str) -> Iterator[CallFact]:
    """Calls `target(...)`, `target.forward(...)`, `target.forward_features(...)` in `scope`."""
    for call in scope.calls:
        callee = call.callee
        if callee is None:
            continue
        if callee == target:
            yield call
        elif callee.startswith(target + ".") and _FORWARD_METHODS.match(callee[len(target) + 1:]):
            yield call


def has_multiline_string(node: cst.CSTNode, context: Context) -> bool:
    for child in _descendants(node):
        if isinstance(child, (cst.SimpleString, cst.FormattedString)) and "\n" in context.code(child):
            return True
    return False


def _descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = list(semantic_children(node))
    while stack:
        current = stack.pop()
        yield current
        stack.extend(semantic_children(current))


def wrap_statements(statements: list[cst.CSTNode], context: Context, torch_name: str) -> Optional[list[Replace]]:
    """Replacements that put consecutive `statements` (same block) under `with torch.no_grad():`."""
    if not statements or any(has_multiline_string(s, context) for s in statements):
        return None
    indent = context.module.default_indent
    changes = []
    for i, stmt in enumerate(statements):
        code = context.code(stmt.with_changes(leading_lines=()))
        code = code.rstrip("\r\n")
        lines = code.split("\n")
        body = "\n".join((indent + line) if line.strip() else line for line in lines)
        if i == 0:
            body = f"with {torch_name}.no_grad():\n" + body
        changes.append(Replace(stmt, body))
    return changes


# ---------------------------------------------------------------------------------------------------------------


class InferenceWithoutNoGrad(FactsCollector):
    code = "TL301"
    name = "inference-without-no-grad"
    family = FAMILY
    summary = (
        "Evaluation or prediction code (a function that calls `model.eval()` and then runs the model, or an "
        "`evaluate`/`validate`/`test`/`predict`-style function that runs it in a loop) with autograd still on."
    )
    message = (
        "Forward passes run with autograd on, recording a graph that is never used: decorate the function with "
        "@torch.no_grad() (or wrap the forward passes in `with torch.no_grad():`)"
    )
    explanation = (
        "Outside `torch.no_grad()` / `torch.inference_mode()`, every forward pass records the autograd graph and "
        "keeps the activations each operation needs for a backward pass that never comes. Evaluation then runs "
        "slower and holds far more memory, which also caps the batch size. Measured on a 2-core CPU with plain-torch "
        "models in eval mode: a ResNet-50-like network at batch 16 ran 2.6x slower with grad on than under "
        "`torch.no_grad()` (0.39x the speed), and peak memory grew from 98 MB to 338 MB (3.4x) for a "
        "ResNet-18-like network and from 208 MB to 1,314 MB (6.3x) for the ResNet-50-like one.\n\n"
        "The rule reports a function that puts a module in eval mode (a `model.eval()` or `model.train(False)` "
        "statement, or `model = model.eval().to(device)`; not `torch.jit.freeze(f.eval())`, whose result is "
        "another object) and then calls it, or a function named as an evaluation entry point (`evaluate`, "
        "`validate`, `test`, `predict`, `infer`, and, with a loop, `sample`/`generate`) that calls a network in a "
        "loop or turns its outputs into Python values, when the function has no no-grad context, no "
        "`@torch.no_grad()` decorator, "
        "no backward pass or optimizer step, and no caller in the same file that runs it under no-grad. In a "
        "function that also trains, it reports a `model.eval()` followed by an evaluation loop that runs the "
        "model before the next `model.train()`, or a `model.eval()` after the backward pass or optimizer step "
        "followed by a forward pass that no backward pass follows (a full-batch validation pass every epoch, "
        "as in graph networks); at module level (scripts, notebooks), a `model.eval()` followed "
        "by calls of the model. Files are checked when they use PyTorch: they import it, write `torch.` (a "
        "snippet, or torch brought in by a star import), or call `.cuda()` without importing another framework."
    )
    bad = (
        "def evaluate(model, loader):\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    for images, labels in loader:\n"
        "        correct += (model(images).argmax(1) == labels).sum().item()\n"
        "    return correct / len(loader.dataset)\n"
    )
    good = (
        "@torch.no_grad()\n"
        "def evaluate(model, loader):\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    for images, labels in loader:\n"
        "        correct += (model(images).argmax(1) == labels).sum().item()\n"
        "    return correct / len(loader.dataset)\n"
    )
    false_positives = (
        "Code that needs gradients without calling `.backward()` itself (saliency maps or adversarial examples "
        "computed by a helper, outputs returned to a caller in another file that trains on them), and functions "
        "that a caller in another file already runs under `torch.no_grad()`. The rule stays silent for Lightning "
        "/ MMEngine hooks (`validation_step`, `test_step`, `predict_step`, ...), which the framework already runs "
        "without grad, for Hugging Face `model.generate(...)` (grad is off inside), for functions that mention "
        "`requires_grad`, `.grad`, `torch.enable_grad` or `torch.autograd.grad`, and for tests. A network found by "
        "its name must look like one by its owner too: `netG(z)`, `self.generator(z)` and `net.encoder(x)` count, "
        "`writer.generator(...)` and `tokenizer.decoder(...)` do not, nor do `generate_*_string`-style functions "
        "that build source text."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Adds `@torch.no_grad()` right above the `def` (below the other decorators), or for an evaluation loop "
        "or a validation forward pass inside a training function (where a decorator would turn off the "
        "training step too) or a module-level script wraps the statements that run the model in "
        "`with torch.no_grad():` (no fix when those statements also train), adding `import torch` when needed. Unsafe: tensors returned by the function "
        "no longer carry gradients, which breaks a caller that backpropagates through them."
    )
    requires = ("torch", ".cuda(")

    def gate(self, text: str) -> bool:
        # an eval-mode switch or an evaluation-like function name; else nothing to analyse
        return bool(_TL301_GATE.search(text)) and uses_torch(text)

    def check(self, facts: FileFacts) -> None:
        if facts.is_test_file:
            return
        torch_name = self.context.local_name_for("torch")
        for scope in facts.scopes:
            if isinstance(scope.node, cst.Module):
                self._module_level(facts, scope, torch_name)
            else:
                self._function(facts, scope, torch_name)

    # -- functions -------------------------------------------------------------------------------------------
    def _function(self, facts: FileFacts, scope: ScopeFacts, torch_name: str) -> None:
        if scope.decorated_grad_off is not None or scope.decorated_other_grad or facts.framework_hook(scope):
            return
        if facts.is_test_case(scope) or scope.name in facts.covered_names:
            return
        if scope.training:
            self._segments(facts, scope, torch_name)
            return
        if scope.mode_unknown:
            return
        evaluated = [e for e in self._eval_forwards(facts, scope) if not facts.is_frozen(e[1])]
        named = None if evaluated else self._named_entry_point(facts, scope)
        if not evaluated and not named:
            return
        fix = self._decorator_fix(facts, scope, torch_name)
        what = f"`{evaluated[0][1]}`" if evaluated else f"`{named}`"
        message = (
            f"`{scope.name}` runs {what} with autograd on, recording a graph nobody uses (up to 2.6x slower, "
            f"3-6x the memory): decorate it with @{torch_name}.no_grad()"
        )
        self.report(scope.node.name, message, fix=fix)  # type: ignore[union-attr]

    def _mode_evals(self, facts: FileFacts, scope: ScopeFacts) -> list[tuple[cst.Call, str, int]]:
        """The `.eval()` / `.train(False)` calls of `scope` that put a module in eval mode for the code that
        follows: a statement (`model.eval()`, `model.cuda().eval()`) or a chain assigned back to the module's
        name (`model = model.eval().to(device)`), with the module's name. Not `.eval()` inside the argument of
        another call (`f = torch.jit.freeze(f.eval())`): the name then holds a different object."""
        found = []
        for call_node, target, order in scope.evals:
            current: cst.CSTNode = call_node
            while True:
                parent = facts.parents.get(current)
                if isinstance(parent, cst.Attribute) and parent.value is current and parent.attr.value in _MODE_CHAIN:
                    outer = facts.parents.get(parent)
                    if isinstance(outer, cst.Call) and outer.func is parent:
                        current = outer
                        continue
                break
            parent = facts.parents.get(current)
            module = _strip_mode_calls(target)
            if isinstance(parent, cst.Expr) and parent.value is current:
                found.append((call_node, module, order))
            elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is current:
                targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
                if all(self.context.code(t) == module for t in targets):
                    found.append((call_node, module, order))
        return found

    def _eval_forwards(self, facts: FileFacts, scope: ScopeFacts) -> list[tuple[CallFact, str]]:
        """Forward calls of a module after its `.eval()` in the same function (not re-enabled by `.train()`)."""
        found = []
        for call_node, target, order in self._mode_evals(facts, scope):
            trains = [o for _, t, o in scope.trains if t == target and o > order]
            stop = min(trains) if trains else scope.end + 1
            for call in forward_calls(scope, target):
                if order < call.order < stop and not call.covered:
                    found.append((call, target))
        return found

    def _named_entry_point(self, facts: FileFacts, scope: ScopeFacts) -> Optional[str]:
        """The network an evaluation entry point (by name) runs with grad on, or None."""
        strength = eval_name_strength(scope.name)
        if not strength:
            return None
        if scope.is_method and facts.is_module_class(scope.cls):
            return None  # part of a model: its caller decides about grad
        func = scope.node
        assert isinstance(func, cst.FunctionDef)
        if strength == 1 and any(w in _SOURCE_WORDS for w in words(scope.name)):
            return None  # `generate_repro_string`: builds text or code
        defined = {s.name for s in facts.scopes}
        evals = None
        for call in scope.calls:
            callee = call.callee
            if not callee or call.covered:
                continue
            base = callee[: -len(".forward")] if callee.endswith(".forward") else callee
            if base == "self" or not is_model_like(base) or base.rsplit(".", 1)[-1] in defined:
                continue
            if not is_network_callee(base):
                continue  # `writer.generator(...)`, `tokenizer.decoder(...)`
            if self.context.qualname(call.node.func) is not None or facts.is_frozen(base):
                continue  # an imported function (a model constructor), not a forward pass
            if _callable_default(self.context, func, base.split(".")[0]):
                continue
            if call.loops:
                return base
            if strength == 2:
                if evals is None:
                    evals = bool(self._mode_evals(facts, scope))
                if scope.host or evals:
                    return base
        return None

    def _decorator_fix(self, facts: FileFacts, scope: ScopeFacts, torch_name: str) -> Optional[Fix]:
        func = scope.node
        assert isinstance(func, cst.FunctionDef)
        if scope.is_async:
            return None
        decorator = f"@{torch_name}.no_grad()"
        if func.decorators:
            last = func.decorators[-1].decorator
            indent = facts.indent_of(func)
            newline = self.context.source.newline
            change = Replace(last, f"{self.context.code(last)}{newline}{indent}{decorator}")
        else:
            change = InsertBefore(func, decorator)  # type: ignore[assignment]
        return Fix(f"Decorate `{scope.name}` with {decorator}", [change], safe=False, imports=("torch",))

    # -- an evaluation loop inside a training function ------------------------------------------------------
    def _segments(self, facts: FileFacts, scope: ScopeFacts, torch_name: str) -> None:
        for call_node, target, order in self._mode_evals(facts, scope):
            trains = [o for _, t, o in scope.trains if t == target and o > order]
            stop = min(trains) if trains else scope.end + 1
            if any(order < o < stop for o in scope.training) or any(order < o < stop for o in scope.grad_off):
                continue
            if any(order < o < stop for _, _, o in scope.mode_unknown):
                continue
            loops = []
            single = []
            for call in forward_calls(scope, target):
                if not (order < call.order < stop) or call.covered:
                    continue
                outer = [loop for loop in call.loops if facts.orders[loop] > order]
                if not outer:
                    single.append(call)
                    continue
                loops.append(outer[0])
            if not loops:
                if single and self._stepped_before(scope, order) and not facts.is_frozen(target):
                    # `loss.backward(); optimizer.step(); model.eval(); out = model(val_x)`: a validation
                    # forward pass after the training step that no backward pass follows
                    message = (
                        f"`{target}` is put in eval mode after the training step and then run with autograd on, "
                        f"recording a graph nobody uses (up to 2.6x slower, 3-6x the memory): run the validation "
                        f"forward pass under `with {torch_name}.no_grad():`"
                    )
                    fix = self._wrap_fix(facts, scope, single, torch_name, single[0].node) or self._wrap_fix(
                        facts, scope, single, torch_name, call_node
                    )
                    self.report(call_node, message, fix=fix)
                continue
            statements = []
            for loop in loops:
                stmt = self._statement_of(facts, loop)
                if stmt is not None and stmt not in statements:
                    statements.append(stmt)
            fix = None
            if statements:
                changes: list[Replace] = []
                for stmt in statements:
                    wrapped = wrap_statements([stmt], self.context, torch_name)
                    if wrapped is None:
                        changes = []
                        break
                    changes.extend(wrapped)
                if changes:
                    fix = Fix("Wrap the evaluation loop in `with torch.no_grad():`", changes, safe=False,
                              imports=("torch",))
            message = (
                f"`{target}` is put in eval mode and then run in a loop with autograd on, recording a graph nobody "
                f"uses (up to 2.6x slower, 3-6x the memory): wrap the evaluation loop in "
                f"`with {torch_name}.no_grad():`"
            )
            self.report(call_node, message, fix=fix)

    def _stepped_before(self, scope: ScopeFacts, order: int) -> bool:
        """A backward pass or an optimizer step runs before `order` in the function."""
        for call in scope.calls:
            if call.order >= order:
                break
            func = call.node.func
            if not isinstance(func, cst.Attribute):
                continue
            last = func.attr.value
            if last == "backward" or (last == "step" and _TRAIN_STEP_OWNERS.search(self.context.code(func.value))):
                return True
        return False

    def _statement_of(self, facts: FileFacts, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        current: Optional[cst.CSTNode] = node
        while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            current = facts.parents.get(current)
        return current

    # -- module level ----------------------------------------------------------------------------------------
    def _module_level(self, facts: FileFacts, scope: ScopeFacts, torch_name: str) -> None:
        for call_node, target, order in self._mode_evals(facts, scope):
            trains = [o for _, t, o in scope.trains if t == target and o > order]
            stop = min(trains) if trains else scope.end + 1
            if any(order < o < stop for o in scope.training) or any(order < o < stop for o in scope.grad_off):
                continue
            if any(order < o < stop for _, _, o in scope.mode_unknown):
                continue
            forwards = [c for c in forward_calls(scope, target) if order < c.order < stop and not c.covered]
            if not forwards:
                continue
            message = (
                f"`{target}` is put in eval mode and then run with autograd on, recording a graph nobody uses "
                f"(up to 2.6x slower, 3-6x the memory): run it under `with {torch_name}.no_grad():`"
            )
            self.report(call_node, message, fix=self._wrap_fix(facts, scope, forwards, torch_name, call_node))

    def _wrap_fix(self, facts: FileFacts, scope: ScopeFacts, forwards: list[CallFact], torch_name: str,
                  anchor: cst.CSTNode) -> Optional[Fix]:
        """Wrap the statements of `anchor`'s block from the first to the last forward pass in
        `with torch.no_grad():`, unless they also train or switch grad themselves."""
        block = facts.block_of(anchor)
        if block is None:
            return None
        body = list(block.body)
        indices = []
        for call in forwards:
            stmt = facts.top_statement_in(call.node, block)
            if stmt is None:
                return None
            indices.append(body.index(stmt))
        first, last = min(indices), max(indices)
        statements = body[first : last + 1]
        if any(isinstance(s, (cst.FunctionDef, cst.ClassDef)) for s in statements):
            return None
        inside = [facts.orders[n] for s in statements for n in (s, *_descendants(s)) if n in facts.orders]
        if inside:
            low, high = min(inside), max(inside)
            if any(low <= o <= high for o in (*scope.training, *scope.grad_off)):
                return None
        changes = wrap_statements(statements, self.context, torch_name)
        if not changes:
            return None
        return Fix("Run the forward passes under `with torch.no_grad():`", changes, safe=False, imports=("torch",))


# ---------------------------------------------------------------------------------------------------------------


def _callable_default(context: Context, func: cst.FunctionDef, name: str) -> bool:
    """`name` is a parameter whose default is a function (`decoder=decode_tokens`): not a network."""
    for param in (*func.params.params, *func.params.kwonly_params, *func.params.posonly_params):
        if param.name.value == name:
            return param.default is not None and isinstance(param.default, (cst.Name, cst.Attribute)) and (
                context.code(param.default) != "None"
            )
    return False


def _loader_like(text: str) -> bool:
    if not text:
        return False
    lowered = re.sub(r"[\"'\[\]().]", " ", text)
    return any(w in LOADER_WORDS for w in words(lowered))


class InferenceWithoutEval(FactsCollector):
    code = "TL306"
    name = "inference-without-eval"
    family = FAMILY
    summary = (
        "Evaluation under `torch.no_grad()` (an `evaluate`/`validate`/`test`-style function, or a loop over a "
        "validation/test loader) that never puts the network in eval mode."
    )
    message = (
        "The network is evaluated without `model.eval()`: dropout stays active and batch norm uses (and updates) "
        "batch statistics; call model.eval() before the evaluation loop"
    )
    explanation = (
        "`torch.no_grad()` turns off autograd but does not change the module's mode. A model left in training "
        "mode keeps dropout active (random, wrong predictions) and batch norm normalises with the statistics of "
        "each evaluation batch and updates its running averages with evaluation data, so the reported metrics "
        "are wrong and the model itself drifts. Dropout in training mode also costs a random mask per layer "
        "(an extra pass over every activation). `model.eval()` costs nothing; pair it with `model.train()` "
        "before training resumes.\n\n"
        "The rule reports a function whose name marks it as evaluation, or a no-grad loop over a loader named "
        "`val`/`valid`/`test`/`eval`/`dev`, that calls a network under no-grad and never calls `.eval()` or "
        "`.train(...)`, when the network comes from outside the function (a parameter, `self.model`, a global) "
        "and the callers of the function in the same file do not call `.eval()` either."
    )
    bad = (
        "def test(model, loader):\n"
        "    correct = 0\n"
        "    with torch.no_grad():\n"
        "        for x, y in loader:\n"
        "            correct += (model(x).argmax(1) == y).sum().item()\n"
        "    return correct\n\n"
        "for epoch in range(10):\n"
        "    train(model, train_loader)  # calls model.train()\n"
        "    test(model, test_loader)\n"
    )
    good = (
        "def test(model, loader):\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    with torch.no_grad():\n"
        "        for x, y in loader:\n"
        "            correct += (model(x).argmax(1) == y).sum().item()\n"
        "    return correct\n"
    )
    false_positives = (
        "A model without dropout or batch norm behaves the same in both modes (the finding is then about "
        "hygiene only), and Monte-Carlo dropout deliberately evaluates in training mode. The rule stays silent "
        "when the function calls `.train(...)` itself, when the network is built inside the function, when the "
        "function has no caller in the file (the caller elsewhere may call `.eval()`), when any caller calls "
        "`.eval()`, and for framework hooks (Lightning's `validation_step` runs in eval mode already)."
    )
    fix_safety = FixSafety.NONE
    requires = ("no_grad", "inference_mode", "set_grad_enabled")

    def gate(self, text: str) -> bool:
        return "no_grad" in text or "inference_mode" in text or "set_grad_enabled" in text

    def check(self, facts: FileFacts) -> None:
        if facts.is_test_file:
            return
        module_scope = facts.scopes[0]
        module_evals = {t for _, t, _ in module_scope.evals}
        for scope in facts.scopes[1:]:
            if facts.framework_hook(scope) or facts.is_test_case(scope) or scope.decorated_other_grad:
                continue
            if scope.is_method and facts.is_module_class(scope.cls):
                continue
            if scope.evals or scope.mode_unknown:
                continue
            self._check(facts, scope, module_evals)

    def _check(self, facts: FileFacts, scope: ScopeFacts, module_evals: set[str]) -> None:
        strength = eval_name_strength(scope.name)
        training = bool(scope.training)
        if training and scope.trains:
            candidates = [c for c in self._forwards(facts, scope) if self._in_eval_loop(facts, scope, c)]
            if not candidates:
                return
        else:
            if scope.trains or training:
                return
            forwards = self._forwards(facts, scope)
            if strength != 2:
                forwards = [c for c in forwards if self._in_eval_loop(facts, scope, c)]
            candidates = forwards
            if not candidates:
                return
        targets = {self._base(c.callee) for c in candidates}
        if targets & module_evals:
            return
        # Where does the network come from? Only report one that reaches the function from outside.
        for target in targets:
            root = target.split(".")[0]
            if root == "self":
                if self._class_evals(facts, scope, target):
                    return
                continue
            if self._bound_locally(scope, root):
                return
        if training:
            # The function itself switched the network to training mode before the no-grad loop.
            first = candidates[0]
            base = self._base(first.callee)
            if not any(t == base and o < first.order for _, t, o in scope.trains):
                return
            with_node = first.withs[-1] if first.withs else None
            where = with_node.items[0].item if with_node is not None else first.node
            self.report(
                where,
                f"Validation loop runs `{base}` under no-grad while it is still in training mode (after "
                f"`{base}.train()`): dropout and batch norm behave as in training; call {base}.eval() before the "
                f"loop and {base}.train() after it",
            )
            return
        callers = facts.callers(scope.name)
        if not callers:
            return
        for caller, _ in callers:
            if caller.evals or caller.mode_unknown or facts.framework_hook(caller):
                return
            if caller.node is not facts.scopes[0].node and caller.name in ("__init__",):
                return
        target = self._base(candidates[0].callee)
        self.report(
            scope.node.name,  # type: ignore[union-attr]
            f"`{scope.name}` evaluates `{target}` without `{target}.eval()` (nor does any caller in this file): "
            f"dropout and batch norm stay in training mode; call {target}.eval() first",
        )

    @staticmethod
    def _base(callee: Optional[str]) -> str:
        callee = callee or ""
        return callee[: -len(".forward")] if callee.endswith(".forward") else callee

    def _forwards(self, facts: FileFacts, scope: ScopeFacts) -> list[CallFact]:
        covered_scope = facts.is_grad_free(scope)
        defined = {s.name for s in facts.scopes}
        out = []
        for call in scope.calls:
            if not call.callee or not (call.covered or covered_scope):
                continue
            base = self._base(call.callee)
            if base == "self":
                continue
            if not is_model_like(base) or base.rsplit(".", 1)[-1] in defined:
                continue
            if self.context.qualname(call.node.func) is not None:
                continue
            out.append(call)
        return out

    def _in_eval_loop(self, facts: FileFacts, scope: ScopeFacts, call: CallFact) -> bool:
        for loop in call.loops:
            if isinstance(loop, cst.For) and _loader_like(self.context.code(loop.iter)):
                return True
        return False

    def _bound_locally(self, scope: ScopeFacts, root: str) -> bool:
        func = scope.node
        if not isinstance(func, cst.FunctionDef):
            return True
        bindings = self.context.bindings(func).get(root)
        if not bindings:
            return False  # a global
        return any(b.kind != "param" for b in bindings)

    def _class_evals(self, facts: FileFacts, scope: ScopeFacts, target: str) -> bool:
        """Another method of the class calls `.eval()` on the network (or on self)."""
        for other in facts.scopes:
            if other.cls is scope.cls and other is not scope:
                if other.evals or other.mode_unknown:
                    return True
        return False


# ---------------------------------------------------------------------------------------------------------------


class PreferInferenceMode(FactsCollector):
    code = "TL307"
    name = "prefer-inference-mode"
    family = FAMILY
    summary = (
        "`torch.no_grad()` around pure inference whose results leave the function only as Python values, where "
        "`torch.inference_mode()` is a drop-in replacement."
    )
    message = (
        "Pure inference under torch.no_grad(): torch.inference_mode() also skips version counters and view "
        "tracking; use it when the outputs never reach autograd"
    )
    explanation = (
        "`torch.inference_mode()` is `no_grad` plus less bookkeeping: tensors created inside it carry no version "
        "counter and no view metadata. The PyTorch documentation recommends it for code that never needs the "
        "results in autograd. The gain is small and mostly visible with many small operations (Python overhead "
        "per op); on a 2-core CPU with convolutional networks at batch 16 no difference was measurable, which is "
        "why the rule is off by default.\n\n"
        "The rule reports a `with torch.no_grad():` block or `@torch.no_grad()` decorator in an evaluation "
        "function (by name, or one that calls `.eval()`) that does not train, yields nothing, stores nothing on "
        "`self`, and returns nothing or only Python numbers (values built from `.item()`, `.tolist()`, "
        "`float()`, ...). The block must run a network (a call of the model, or a helper it is handed to): a "
        "`no_grad` block that only prepares inputs is left alone."
    )
    bad = (
        "def evaluate(model, loader):\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    with torch.no_grad():\n"
        "        for x, y in loader:\n"
        "            correct += (model(x).argmax(1) == y).sum().item()\n"
        "    return correct\n"
    )
    good = (
        "def evaluate(model, loader):\n"
        "    model.eval()\n"
        "    correct = 0\n"
        "    with torch.inference_mode():\n"
        "        for x, y in loader:\n"
        "            correct += (model(x).argmax(1) == y).sum().item()\n"
        "    return correct\n"
    )
    false_positives = (
        "Tensors created under inference mode cannot be saved for backward or updated in place outside it. "
        "A function that hands outputs to another object (a metric, a cache, a list passed in) may let them "
        "reach autograd later; the rule only checks returns, `yield` and assignments to attributes."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Replaces `torch.no_grad` with `torch.inference_mode`. Unsafe: an inference tensor that escapes through "
        "a path the rule cannot see (an object's state, a list passed in) raises an error if it is later used in "
        "autograd or updated in place."
    )
    default_enabled = False
    requires = ("no_grad",)

    _HOST_CALLS = frozenset({"float", "int", "round", "len", "str", "bool", "format", "abs", "max", "min", "sum"})
    _HOST_ATTRS = frozenset({"item", "tolist", "size", "numel", "dim", "format"})

    def gate(self, text: str) -> bool:
        return "no_grad" in text

    def check(self, facts: FileFacts) -> None:
        if facts.is_test_file:
            return
        for scope in facts.scopes[1:]:
            if scope.training or scope.yields or facts.framework_hook(scope) or scope.decorated_other_grad:
                continue
            if not (eval_name_strength(scope.name) == 2 or scope.evals):
                continue
            sites = self._no_grad_sites(scope)
            if not sites or not self._pure(scope):
                continue
            torch_name = self.context.local_name_for("torch")
            for call in sites:
                fix = Fix(
                    "Use torch.inference_mode()",
                    [Replace(call.func, f"{torch_name}.inference_mode")],
                    safe=False,
                    imports=("torch",),
                )
                self.report(call, fix=fix)

    def _no_grad_sites(self, scope: ScopeFacts) -> list[cst.Call]:
        sites = []
        decorator = scope.decorated_grad_off
        if decorator is not None:
            expr = decorator.decorator
            if not isinstance(expr, cst.Call):
                return []  # bare @torch.no_grad: leave it
            if self.context.qualname(expr) == "torch.no_grad" and any(self._runs_network(c) for c in scope.calls):
                sites.append(expr)
        for with_node in scope.grad_off_withs:
            if not any(any(w is with_node for w in call.withs) and self._runs_network(call) for call in scope.calls):
                continue  # no forward pass inside (`with torch.no_grad(): x = Variable(x)`): nothing to infer
            for item in with_node.items:
                if isinstance(item.item, cst.Call) and self.context.qualname(item.item) == "torch.no_grad":
                    sites.append(item.item)
        if len(scope.grad_off) != len(scope.grad_off_withs) and decorator is None:
            return []  # a grad-off construct the rule does not understand (set_grad_enabled calls, ...)
        return sites

    def _runs_network(self, call: CallFact) -> bool:
        """A forward pass: a call of a network (`model(x)`, `self.net.forward(x)`), or a call that is handed
        one (`accuracy(model, loader)`)."""
        if call.callee is not None:
            base = call.callee[: -len(".forward")] if call.callee.endswith(".forward") else call.callee
            if is_model_like(base) and self.context.qualname(call.node.func) is None:
                return True
        for arg in call.node.args:
            value = arg.value
            if isinstance(value, (cst.Name, cst.Attribute)) and is_model_like(dotted(value) or ""):
                return True
        return False

    def _pure(self, scope: ScopeFacts) -> bool:
        func = scope.node
        assert isinstance(func, cst.FunctionDef)
        returns: list[Optional[cst.BaseExpression]] = []
        for child in scope_nodes(func.body):
            if isinstance(child, cst.Return):
                returns.append(child.value)
            elif isinstance(child, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                targets = [t.target for t in child.targets] if isinstance(child, cst.Assign) else [child.target]
                for target in targets:
                    if isinstance(target, (cst.Attribute, cst.Subscript)):
                        root = target
                        while isinstance(root, (cst.Attribute, cst.Subscript)):
                            root = root.value
                        if not (isinstance(root, cst.Name) and self._local(func, root.value)):
                            return False
            elif isinstance(child, (cst.Global, cst.Nonlocal)):
                return False
        return all(value is None or self._host(func, value, 0) for value in returns)

    def _local(self, func: cst.FunctionDef, name: str) -> bool:
        bindings = self.context.bindings(func).get(name)
        return bool(bindings) and all(b.kind == "assign" for b in bindings)

    def _host(self, func: cst.FunctionDef, expr: cst.BaseExpression, depth: int) -> bool:
        if depth > 6:
            return False
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return True
        if isinstance(expr, cst.Name):
            if expr.value in ("None", "True", "False"):
                return True
            bindings = self.context.bindings(func).get(expr.value)
            if not bindings:
                return False
            for binding in bindings:
                node = binding.node
                if binding.kind == "assign" and binding.value is not None:
                    if not self._host(func, binding.value, depth + 1):
                        return False
                elif isinstance(node, cst.AugAssign):
                    if not self._host(func, node.value, depth + 1):
                        return False
                elif isinstance(node, cst.Assign) and isinstance(node.value, cst.Tuple):
                    # `a, b = 0, 0`: every element must be a host value
                    if not all(self._host(func, e.value, depth + 1) for e in node.value.elements):
                        return False
                else:
                    return False
            return True
        if isinstance(expr, cst.BinaryOperation):
            return self._host(func, expr.left, depth + 1) and self._host(func, expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self._host(func, expr.expression, depth + 1)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return all(self._host(func, e.value, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            return all(isinstance(e, cst.DictElement) and self._host(func, e.value, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.Call):
            f = expr.func
            if isinstance(f, cst.Attribute) and f.attr.value in self._HOST_ATTRS:
                return True
            if isinstance(f, cst.Name) and f.value in self._HOST_CALLS and self.context.qualname(f) is None:
                return all(self._host(func, a.value, depth + 1) for a in expr.args) or f.value in ("float", "int", "len", "str", "round", "bool")
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("shape",):
            return True
        if isinstance(expr, cst.Subscript):
            return self._host(func, expr.value, depth + 1) if isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape" else False
        return False


__all__ = [
    "FactsCollector", "FileFacts", "ScopeFacts", "CallFact", "file_facts", "is_model_like", "is_network_callee",
    "words", "eval_name_strength", "forward_calls", "GRAD_OFF",
]
