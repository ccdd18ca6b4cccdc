"""Where each rewritten weight came from, so that an inference model can give the original state_dict() without
keeping a second copy of its weights, and can load a checkpoint of the original by redoing the folding.

Passes that build a layer from other tensors (BatchNorm folding, oneDNN packing, bf16 weights, a transposed weight
seen as a Linear) record an Origin on it: the ids of the original tensors it was computed from. When optimize()
finishes, the ids become state_dict keys of the original model (a Link per layer), and then:

- compact(): a packed layer drops its dense weight (the packed copy is all it needs), and the original tensors it
  was computed from are dropped from the kept original model when nothing else holds them; state_dict() computes
  them back (unpacked, and unfolded by the BatchNorm's scale for a folded layer: equal up to rounding);
- reload(): load_state_dict with the original's keys copies every tensor still held, then recomputes every linked
  layer from its originals with the same arithmetic as the passes, so loading a checkpoint into the optimized model
  gives what loading it into the original and optimizing again would.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_weights, fuse_linear_bn_weights

ORIGIN = "_torchlint_origin"  # plain attribute on a layer a pass built
LINKS = "_torchlint_links"  # plain attribute on the inference model: list[Link]
DERIVED = "_torchlint_derived"  # plain attribute on the inference model: original keys computed, not kept


@dataclass(frozen=True)
class Origin:
    weight: int  # id() of the original weight tensor
    bias: int | None  # id() of the original bias, None without one
    kind: str  # "conv", "conv_transposed" or "linear": how a BatchNorm folds into it
    transposed: bool = False  # the layer holds the original weight transposed (a Conv1D seen as a Linear)
    bn: tuple | None = None  # ids of the folded BatchNorm's weight, bias, running_mean, running_var (None if absent)
    eps: float = 0.0


def record(layer: nn.Module, origin: Origin) -> None:
    layer.__dict__[ORIGIN] = origin


def origin_of(layer: nn.Module) -> Origin:
    """What `layer` was computed from: its recorded Origin, or its own weight and bias."""
    recorded = layer.__dict__.get(ORIGIN)
    if recorded is not None:
        return recorded
    bias = getattr(layer, "bias", None)
    kind = "linear" if layer.__class__.__name__ in ("Linear", "FusedLinear") or isinstance(layer, nn.Linear) else (
        "conv_transposed" if getattr(layer, "transposed", False) else "conv")
    return Origin(id(layer.weight), id(bias) if bias is not None else None, kind)


def with_batchnorm(origin: Origin, bn) -> Origin:
    """`origin` after a BatchNorm (module or the namespace the folding pass reads) is folded into it."""
    ids = tuple(id(t) if t is not None else None for t in (bn.weight, bn.bias, bn.running_mean, bn.running_var))
    return dataclasses.replace(origin, bn=ids, eps=float(bn.eps))


@dataclass(frozen=True)
class Link:
    path: str  # the layer in the optimized model
    weight: str  # state_dict keys of the original model
    bias: str | None
    kind: str
    transposed: bool
    bn: tuple | None  # keys of the BatchNorm's weight, bias, running_mean, running_var
    eps: float


def link(root: nn.Module, source: nn.Module) -> list[Link] | None:
    """A Link for every layer of `root` that a pass computed from the original's tensors; None when a layer records
    tensors that are not the original's (then the model cannot reload a checkpoint)."""
    keys: dict[int, str] = {}
    for key, tensor in source.state_dict(keep_vars=True).items():
        keys.setdefault(id(tensor), key)
    links = []
    for path, module in root.named_modules():
        origin = module.__dict__.get(ORIGIN)
        if origin is None:
            continue
        bn = None
        if origin.bn is not None:
            bn = tuple(keys.get(i) if i is not None else None for i in origin.bn)
            if any(i is not None and k is None for i, k in zip(origin.bn, bn)):
                return None
        if origin.weight not in keys or (origin.bias is not None and origin.bias not in keys):
            return None
        links.append(Link(path, keys[origin.weight], keys.get(origin.bias) if origin.bias is not None else None,
                          origin.kind, origin.transposed, bn, origin.eps))
    return links


def folded(link: Link, weight: torch.Tensor, bias: torch.Tensor | None, bn: list) -> tuple:
    """The weight and bias of the layer, computed from the original tensors as the passes compute them."""
    if link.transposed:
        weight = weight.t()
    if link.bn is None:
        return weight, bias
    gamma, beta, mean, var = bn
    if link.kind == "linear":
        gamma = gamma if gamma is not None else torch.ones_like(mean)
        beta = beta if beta is not None else torch.zeros_like(mean)
        return fuse_linear_bn_weights(weight, bias, mean, var, link.eps, gamma, beta)
    return fuse_conv_bn_weights(weight, bias, mean, var, link.eps, gamma, beta,
                                transpose=link.kind == "conv_transposed")


def unfolded(link: Link, weight: torch.Tensor, bias: torch.Tensor | None, bn: list) -> tuple:
    """The original weight and bias from the layer's (the inverse of `folded`, up to rounding)."""
    if link.bn is not None:
        gamma, beta, mean, var = bn
        scale = (gamma if gamma is not None else torch.ones_like(mean)) * torch.rsqrt(var + link.eps)
        shift = (beta if beta is not None else torch.zeros_like(mean)) - mean * scale
        weight = weight / scale.reshape(-1, *([1] * (weight.dim() - 1)))
        bias = (bias - shift) / scale if link.bias is not None else None
    if link.transposed:
        weight = weight.t()
    return weight, bias


def scale_is_invertible(link: Link, source_state: dict) -> bool:
    if link.bn is None:
        return True
    gamma = source_state[link.bn[0]] if link.bn[0] is not None else None
    return gamma is None or bool((gamma != 0).all())
