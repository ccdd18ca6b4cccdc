"""Shared helpers for the optimizer tests."""

from __future__ import annotations

import copy

import torch
from torch import fx, nn

from torchlint.optimizer.passes import PassContext
from torchlint.optimizer.report import Report


def randomize_batchnorm(model: nn.Module, seed: int = 0) -> nn.Module:
    """Give every BatchNorm non-trivial statistics and affine parameters, as after training."""
    generator = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            with torch.no_grad():
                if m.running_mean is not None:
                    m.running_mean.copy_(torch.rand(n, generator=generator) * 0.4 - 0.2)
                    m.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
                if m.weight is not None:
                    m.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                    m.bias.copy_(torch.rand(n, generator=generator) * 0.4 - 0.2)
    return model


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return ((a - b).abs().max() / a.abs().max()).item()


def run_pass(pass_fn, model: nn.Module, example=None, training=None, device_type="cpu"):
    """Trace `model`, optionally record shapes from `example`, run one pass; return (graph module, report)."""
    from torch.fx.passes.shape_prop import ShapeProp

    from torchlint.optimizer.trace import trace

    gm = trace(copy.deepcopy(model))
    if example is not None:
        with torch.no_grad():
            ShapeProp(gm).propagate(example)
    report = Report()
    ctx = PassContext(report, pass_fn.__name__, model.training if training is None else training, device_type)
    result = pass_fn(gm, ctx)
    return result.graph_module, report


def count_modules(gm: nn.Module, kind) -> int:
    return sum(isinstance(m, kind) for m in gm.modules())


def node_targets(gm: fx.GraphModule) -> list:
    return [n.target for n in gm.graph.nodes]


def state_of(model: nn.Module) -> dict:
    """Everything a caller could notice about a model: structure, tensors (values and identity), mode flags."""
    return {
        "repr": repr(model),
        "training": [m.training for m in model.modules()],
        "tensors": {k: (v.clone(), v.stride(), v.dtype) for k, v in model.state_dict(keep_vars=True).items()},
        "ids": {k: id(v) for k, v in model.state_dict(keep_vars=True).items()},
    }


def assert_same_state(before: dict, after: dict) -> None:
    assert before["repr"] == after["repr"]
    assert before["training"] == after["training"]
    assert before["ids"] == after["ids"]
    assert before["tensors"].keys() == after["tensors"].keys()
    for key, (value, stride, dtype) in before["tensors"].items():
        new_value, new_stride, new_dtype = after["tensors"][key]
        assert torch.equal(value, new_value), key
        assert stride == new_stride and dtype == new_dtype, key
