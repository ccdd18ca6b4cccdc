"""What a model optimized in eval mode is: an inference model, and it says so instead of computing something else.

BatchNorm is folded into the weights, dropout is gone and the traced graphs took the eval-mode branches, so the
model neither trains nor follows `.train()`. Its class becomes a subclass of its own class (isinstance still
holds) that:

- refuses `.train()` and a forward in training mode, and a forward that would build a graph for its parameters
  (all frozen by optimize(); re-enabling requires_grad raises at the next forward). Gradients with respect to the
  inputs are right: fused layers compute with plain torch ops when an input requires grad;
- keeps the original model's `state_dict()`: keys and values of the model as it was before optimization (the
  tensors that were folded or packed are computed back from the optimized layers, see origins.py);
  `load_state_dict` takes such a checkpoint and recomputes the optimized layers (it raises, saying how to
  re-optimize, after a user's own pass whose tensors it cannot recompute);
- converts those original tensors too on `.to()`, `.double()`, `.half()`, `.cuda()`;
- survives deepcopy, pickling and torch.save; `torch.jit.script` raises and points to `torch.jit.trace`;
- runs the original model's code for a call that a graph captured by torch.export does not cover (its input
  guards fail: a size export fixed or excluded, a branch taken on a size), under the same autocast as the graph.
"""

from __future__ import annotations

import torch
from torch import nn

from . import origins
from .modules import AutocastForward

SOURCE_ATTRIBUTE = "_torchlint_source"
# Plain attributes that fx's GraphModule drops when it is copied or unpickled, carried over by hand.
PRESERVED = (SOURCE_ATTRIBUTE, "torchlint_report", origins.LINKS, origins.DERIVED)

_RETRAIN = ("optimize the original model in train() mode for training, or train the original and call "
            "torchlint.optimize(model.eval(), ...) again")
MODE_MESSAGE = ("this model was optimized by torchlint.optimize() in eval mode, for inference (BatchNorm folded, "
                "dropout removed, eval-mode branches fixed): it cannot run in training mode; " + _RETRAIN)
GRAD_MESSAGE = ("this model was optimized by torchlint.optimize() for inference: its parameters are folded and "
                "packed, so gradients for them would not be the original model's. Run it under torch.no_grad() or "
                "torch.inference_mode() with parameters frozen (gradients for inputs are supported); " + _RETRAIN)
LOAD_MESSAGE = ("load_state_dict on a model optimized by torchlint.optimize() for inference: its weights are "
                "derived (BatchNorm folded, packed) from the original's. Load the checkpoint into the original model "
                "and call torchlint.optimize() again")
SCRIPT_MESSAGE = ("torch.jit.script cannot compile a model optimized by torchlint.optimize() (its fused layers call "
                  "oneDNN with packed weights): use torch.jit.trace on it, or script the original model")


class InferenceModel:
    """Mixed in front of the optimized model's own class; see the module docstring."""

    _torchlint_base: type

    def __call__(self, *args, **kwargs):
        if self.training:
            raise RuntimeError(MODE_MESSAGE)
        if torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters()):
            raise RuntimeError(GRAD_MESSAGE)
        try:
            return super().__call__(*args, **kwargs)
        except AssertionError as error:
            # A graph captured with torch.export checks its inputs against the sizes export assumed (another
            # batch size where the code unrolled a loop over the batch, a single token...) before computing
            # anything: such a call runs the original model's code instead.
            if not str(error).startswith("Guard failed"):
                raise
            _restore_originals(self)
            return _run_original(self, args, kwargs)

    def train(self, mode: bool = True):
        if mode:
            raise RuntimeError(MODE_MESSAGE)
        return super().train(False)

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        result = source_of(self).state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        for key, value in _derived_originals(self).items():
            result[prefix + key] = value
        return result

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Load a checkpoint of the original model (its keys): every tensor kept is copied, and every folded or
        packed layer is computed again from the loaded values, as optimize() computed it."""
        links = self.__dict__.get(origins.LINKS)
        if links is None:
            raise RuntimeError(LOAD_MESSAGE)
        own = source_of(self).state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        problems = [f"size mismatch for {k}: the checkpoint has {tuple(v.shape)}, the model {tuple(own[k].shape)}"
                    for k, v in state_dict.items() if k in own and tuple(v.shape) != tuple(own[k].shape)]
        if strict:
            problems += [f"missing key {k!r}" for k in missing] + [f"unexpected key {k!r}" for k in unexpected]
        if problems:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: " + "; ".join(problems))
        current = {k: v for k, v in self.state_dict().items() if k not in state_dict}

        def value(key):
            return state_dict[key] if key in state_dict else current[key]

        with torch.no_grad():
            for key, target in own.items():
                if key in state_dict and not target.is_meta:
                    target.copy_(state_dict[key])
            for link in links:
                layer = self.get_submodule(link.path)
                bn = [value(k) if k is not None else None for k in link.bn] if link.bn else None
                weight, bias = origins.folded(link, value(link.weight),
                                              value(link.bias) if link.bias is not None else None, bn)
                if hasattr(layer, "set_weight"):
                    layer.set_weight(weight)
                else:
                    layer.weight.copy_(weight)
                if bias is not None and layer.bias is not None:
                    layer.bias.copy_(bias)
        return nn.modules.module._IncompatibleKeys(missing, unexpected)

    def _apply(self, fn, recurse: bool = True):
        super()._apply(fn, recurse)
        source_of(self)._apply(fn, recurse)
        return self

    def __prepare_scriptable__(self):
        raise RuntimeError(SCRIPT_MESSAGE)

    # The mixed class is made at run time, so pickle and deepcopy see the model's own class and the mixin is put
    # back on the result.
    def __reduce_ex__(self, protocol):
        with _as_base(self):
            reduced = self.__reduce_ex__(protocol)
        extras = {k: self.__dict__[k] for k in PRESERVED if k in self.__dict__}
        build, args = reduced[0], reduced[1]
        if args and isinstance(args[0], dict) and SOURCE_ATTRIBUTE in args[0]:
            # A GraphModule pickles its __dict__ and would register the source as a submodule on loading.
            args = ({k: v for k, v in args[0].items() if k not in PRESERVED},) + tuple(args[1:])
        return (_remake, (build, args, extras)) + tuple(reduced[2:])

    def __deepcopy__(self, memo):
        import copy

        with _as_base(self):
            new = copy.deepcopy(self, memo)
        for key in PRESERVED:
            if key in self.__dict__ and key not in new.__dict__:
                new.__dict__[key] = copy.deepcopy(self.__dict__[key], memo)
        return make_inference_model(new, None)


class _as_base:
    def __init__(self, model: nn.Module) -> None:
        self.model, self.cls = model, type(model)

    def __enter__(self):
        self.model.__class__ = self.cls._torchlint_base

    def __exit__(self, *exc):
        self.model.__class__ = self.cls


def _remake(build, args, extras):
    model = build(*args)
    model.__dict__.update(extras)
    return make_inference_model(model, None)


def _run_original(model: nn.Module, args: tuple, kwargs: dict):
    """The original model's code, under the optimized model's autocast when it runs under one: the fallback keeps
    the dtype optimize() was asked for (in float32 it would be slower than the eager autocast it replaces)."""
    if isinstance(model, AutocastForward):
        return model.run(source_of(model), args, kwargs)
    return source_of(model)(*args, **kwargs)


def source_of(model: nn.Module) -> nn.Module:
    return model.__dict__[SOURCE_ATTRIBUTE]


def compact(model: nn.Module) -> None:
    """Keep one copy of the weights: packed layers drop their dense weight, and the kept original drops the
    tensors that state_dict() can compute back from the optimized layers. (A graph captured by torch.export runs
    the original for calls outside its guards: the first such call puts the dropped tensors back.)"""
    for module in model.modules():
        if hasattr(module, "compact"):
            module.compact()
    links = model.__dict__.get(origins.LINKS)
    if links is None:
        return
    source = source_of(model)
    own = source.state_dict(keep_vars=True)
    held = {t.untyped_storage().data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    derived = {}
    for i, link in enumerate(links):
        layer = model.get_submodule(link.path)
        if (link.kind == "conv_transposed" and link.bn) or not origins.scale_is_invertible(link, own):
            continue
        names = [("weight", link.weight)] + ([("bias", link.bias)] if link.bn and link.bias else [])
        for name, key in names:
            tensor = own[key]
            stored = layer._stored() if hasattr(layer, "_stored") else layer.weight
            # A float32 original of a layer stored in bfloat16 is dropped too: state_dict() then gives the
            # bfloat16 values in float32 (1.5x the weights' memory otherwise, for values the model never uses).
            if (key in derived or tensor.is_meta or not (tensor.is_floating_point() and stored.is_floating_point())
                    or tensor.untyped_storage().data_ptr() in held):
                continue
            derived[key] = (i, name)
            _drop(source, key, tensor)
    model.__dict__[origins.DERIVED] = derived


def _drop(source: nn.Module, key: str, tensor: torch.Tensor) -> None:
    """Replace the kept original `key` by a tensor on the meta device: same shape and dtype, no memory."""
    _put(source, key, torch.empty(tensor.shape, dtype=tensor.dtype, device="meta"))


def _put(source: nn.Module, key: str, tensor: torch.Tensor) -> None:
    path, _, name = key.rpartition(".")
    owner = source.get_submodule(path) if path else source
    if name in owner._parameters:
        owner._parameters[name] = nn.Parameter(tensor, requires_grad=False)
    else:
        owner._buffers[name] = tensor


def _restore_originals(model: nn.Module) -> None:
    """Put back the tensors compact() dropped from the kept original, so that it can run."""
    values = _derived_originals(model)
    for key, value in values.items():
        _put(source_of(model), key, value.contiguous())
    model.__dict__[origins.DERIVED] = {}


def _derived_originals(model: nn.Module) -> dict:
    """The original tensors compact() dropped, computed from the optimized layers."""
    derived = model.__dict__.get(origins.DERIVED)
    if not derived:
        return {}
    links = model.__dict__[origins.LINKS]
    own = source_of(model).state_dict()
    result = {}
    with torch.no_grad():
        for key, (i, name) in derived.items():
            link = links[i]
            layer = model.get_submodule(link.path)
            bn = [own[k] if k is not None else None for k in link.bn] if link.bn else None
            weight, bias = origins.unfolded(link, layer.weight.detach(), layer.bias, bn)
            value = weight if name == "weight" else bias
            result[key] = value.to(own[key].dtype)  # the original's dtype (a float32 original of a bf16 layer)
    return result


def make_inference_model(model: nn.Module, source: nn.Module | None) -> nn.Module:
    """Turn `model` (optimized in eval mode) into an InferenceModel whose state_dict() is `source`'s (None: keep the
    one it has)."""
    if not isinstance(model, InferenceModel):
        base = type(model)
        model.__class__ = type(base.__name__, (InferenceModel, base), {"_torchlint_base": base,
                                                                       "__module__": base.__module__})
    if source is not None:
        object.__setattr__(model, SOURCE_ATTRIBUTE, source)  # a plain attribute, not a submodule
        for param in model.parameters():
            param.requires_grad_(False)
    return model


def is_inference_model(model: nn.Module) -> bool:
    return isinstance(model, InferenceModel)
