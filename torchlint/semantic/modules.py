"""Modules: whether an expression is an `nn.Module` (a model, a layer, a loss module) rather than data, and
the name conventions that are the only evidence when nothing is imported (`net`, `self.encoder`,
`build_model(...)`).
"""

from __future__ import annotations

import re

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.semantic.objects import MODULE, named, objects

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

_BUILDER_WORDS = frozenset(
    {
        "build", "create", "get", "load", "make", "init", "setup", "define", "construct", "prepare", "wrap",
        "save", "copy", "to", "train", "freeze", "unwrap", "export", "convert", "register", "compile", "new",
        "instantiate", "restore", "print", "log", "summary", "count", "update", "fuse", "set", "reset",
    }
)

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def words(name: str) -> list[str]:
    """`evaluateModel_v2` -> ["evaluate", "model", "v", "2"] (lower case)."""
    return [w.lower() for w in _WORD.findall(name)]


def is_model_like(text: str) -> bool:
    """Whether a callee written as `text` (`model`, `self.net`, `ema_model`, `netG`) names a network."""
    last = text.rsplit(".", 1)[-1]
    if not last or (last[0].isupper() and not _upper_case_global(last)) or last.startswith("__"):
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


def _upper_case_global(name: str) -> bool:
    """`MODEL`, `SEG_NET`: a module global written in capitals (serving code loads its network into one), named
    like any other; not a one-letter `G`, nor a class (the callers leave out classes of the file)."""
    return len(name) >= 3 and name.isupper()


def names_a_network_plainly(text: str) -> bool:
    """A model-like name whose network word names nothing else (`model`, `q_net`, `policy_net`; not `decoder`,
    which may be a tokenizer's or a CTC decoder, nor `generator`)."""
    parts = [p for p in words(text.rsplit(".", 1)[-1]) if not p.isdigit()]
    return is_model_like(text) and not any(p in _AMBIGUOUS_MODEL_WORDS for p in parts)


def names_an_action(text: str) -> bool:
    """`set_model`, `get_model`, `load_net`: a callee named for what it does to a network, not a network."""
    parts = words(text.rsplit(".", 1)[-1])
    return bool(parts) and parts[0] in _BUILDER_WORDS and len(parts) > 1


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


def is_module_like_receiver(context: "Context", expr: cst.BaseExpression) -> bool:
    """`net`, `self.model`, `Net()`, `nn.Linear(4, 2)`, a name bound to `Net()`: a module, not data."""
    known = objects(context).kind(expr)
    if known is not None:
        return known == MODULE
    if isinstance(expr, cst.Call):
        name = last_name(expr.func)
        return name is not None and name[:1].isupper() and not name.isupper() and not name.endswith("Tensor")
    name = last_name(expr)
    if name is None:
        return False
    if named(name, MODULE):
        return True
    if isinstance(expr, cst.Name):
        value = context.assigned_value(expr)
        if value is not None and value is not expr:
            return isinstance(value, cst.Call) and is_module_like_receiver(context, value)
    return False
