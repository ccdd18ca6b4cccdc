"""The memory a model's tensors take: what optimize() promises to keep near the original's (one copy of the
weights) and what benchmarks/memory.py reports."""

from __future__ import annotations

import torch
from torch import nn


def tensor_bytes(model: nn.Module) -> int:
    """Bytes held by `model`'s tensors, each storage counted once: parameters, buffers, oneDNN-packed weights
    and, for a model optimize() returned, the original tensors it keeps for state_dict() (those it computes back
    instead live on the meta device and take nothing)."""
    from .inference import SOURCE_ATTRIBUTE

    seen: set[int] = set()
    total = 0
    held = list(model.parameters()) + list(model.buffers())
    source = model.__dict__.get(SOURCE_ATTRIBUTE)
    if source is not None:
        held += list(source.state_dict(keep_vars=True).values())
    held += [getattr(m, "_packed", None) for m in model.modules()]
    for tensor in held:
        if not isinstance(tensor, torch.Tensor) or tensor.is_meta:
            continue
        if tensor.is_mkldnn:  # an opaque oneDNN tensor: no storage to share
            total += tensor.numel() * tensor.element_size()
            continue
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total
