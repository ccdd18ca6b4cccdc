"""Modules that the optimizer puts into models: oneDNN fused convolution and linear layers, and the autocast wrapper.

The fused layers keep their dense `weight` and `bias` as parameters and hold a oneDNN-packed copy of the weight,
built at optimize time and rebuilt after a copy, a `.to()` or a weight change. Once optimize() is done, compact()
drops the dense weight: the packed copy is the only one (unpacked on demand, exactly, for the plain path). A
convolution whose packed weight runs far slower than the dense one on the example input keeps it dense (see
FusedConv2d.choose_packing); a packed one is packed for the example's input shape and again for each other input
shape it meets (FusedConv2d.weight_for). The packed oneDNN call has no autograd and covers float32/bfloat16 on
CPU; anywhere else (an input that requires grad, float64/float16, another device, torch.jit.trace, torch.compile)
the same computation runs as plain torch ops on the dense weight.
"""

from __future__ import annotations

import time

import torch
from torch import nn
import torch.nn.functional as F

from .structures import map_tensors

_mkldnn = torch.ops.mkldnn
_PACKED_DTYPES = (torch.float32, torch.bfloat16)
_SHAPES_KEPT = 4  # packings of a convolution's weight for input shapes other than the example's

# oneDNN post-op name -> the same activation in torch, for the plain path.
_ACTIVATIONS = {
    "none": lambda x, scalars, algorithm: x,
    "relu": lambda x, scalars, algorithm: F.relu(x),
    "hardtanh": lambda x, scalars, algorithm: F.hardtanh(x, *scalars),
    "leaky_relu": lambda x, scalars, algorithm: F.leaky_relu(x, *scalars),
    "gelu": lambda x, scalars, algorithm: F.gelu(x, approximate=algorithm or "none"),
    "swish": lambda x, scalars, algorithm: F.silu(x),
    "hardswish": lambda x, scalars, algorithm: F.hardswish(x),
    "hardsigmoid": lambda x, scalars, algorithm: F.hardsigmoid(x),
    "sigmoid": lambda x, scalars, algorithm: torch.sigmoid(x),
    "tanh": lambda x, scalars, algorithm: torch.tanh(x),
}


def _plain_path(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether to compute with plain torch ops instead of the packed oneDNN call."""
    return (
        weight.dtype not in _PACKED_DTYPES
        or weight.device.type != "cpu"
        or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
        or torch.jit.is_tracing()
        or torch.compiler.is_compiling()
    )


def _unpacked(packed: torch.Tensor) -> torch.Tensor:
    """The dense weight of a packed one. torch.jit.trace cannot record a packed tensor: it records the dense
    weight as a constant instead."""
    if not torch.jit.is_tracing():
        return packed.to_dense()
    state = torch._C._get_tracing_state()
    torch._C._set_tracing_state(None)
    try:
        return packed.to_dense()
    finally:
        torch._C._set_tracing_state(state)


def _seconds(call) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


@torch._dynamo.disable
def _eager(layer, *args):
    return layer._forward(*args)


class _Packed(nn.Module):
    """Common part: the weight/bias parameters, the packed-weight cache and the fused activation."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, activation: tuple) -> None:
        super().__init__()
        # Shared with the layer it replaces, not copied: an unfolded layer's weight is also the original model's.
        self.weight = nn.Parameter(weight.detach(), requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)
        # (oneDNN post-op name, scalars, algorithm), e.g. ("relu", [], "") or ("hardtanh", [0.0, 6.0], "")
        self.attr, self.scalars, self.algorithm = activation
        self._packed = None
        self._packed_key = None
        self.compacted = False
        # Once compacted: (dtype, packed weight, bias) as the packed call takes them, so that a call on an input of
        # that dtype skips the general path's checks (about 10 us a call: a tenth of a small layer's time).
        self._ready = None

    def compact(self) -> None:
        """Keep the packed weight only (float32/bfloat16 on CPU); `weight` becomes its unpacked value, computed
        when read."""
        if self.compacted or self.weight.dtype not in _PACKED_DTYPES or self.weight.device.type != "cpu":
            return
        self.packed_weight()
        del self._parameters["weight"]
        self.compacted = True
        self._make_ready()

    def _expand(self) -> None:
        """Back to a dense weight parameter (before a conversion that packing does not cover, or a copy)."""
        if self.compacted:
            dense = self._packed.to_dense()
            self.compacted = False
            self.weight = nn.Parameter(dense, requires_grad=False)
            self._packed, self._packed_key, self._ready = None, None, None

    def _make_ready(self) -> None:
        bias, dtype = self.bias, self._packed.dtype
        self._ready = (dtype, self._packed, bias) if bias is None or bias.dtype == dtype else None

    def _ready_call(self, x) -> tuple | None:
        """(input, packed weight, bias) for the packed call when this call can take the cached weight and bias as
        they are: a plain floating-point tensor that needs no gradient, outside tracing and compiling; the input is
        cast to the packed dtype, as the general path does. Values copied into the bias in place are seen; a bias
        parameter assigned since is cached anew."""
        ready = self._ready
        if (
            ready is None
            or type(x) is not torch.Tensor
            or x.requires_grad
            or torch.jit.is_tracing()
            or torch.compiler.is_compiling()
        ):
            return None
        if self._parameters.get("bias") is not ready[2]:
            self._make_ready()
            ready = self._ready
            if ready is None:
                return None
        if x.dtype != ready[0]:
            if not x.is_floating_point():
                return None
            x = x.to(ready[0])
        return x, ready[1], ready[2]

    def __getattr__(self, name: str):
        if name == "weight" and self.__dict__.get("compacted"):
            return _unpacked(self._packed)
        return super().__getattr__(name)

    def forward(self, *args):
        if self.compacted and torch.compiler.is_compiling():
            # torch.compile cannot trace a packed tensor: the layer runs eagerly (a graph break), packed.
            return _eager(self, *args)
        return self._forward(*args)

    def set_weight(self, weight: torch.Tensor) -> None:
        """Replace the weight's values (a reloaded checkpoint), keeping its dtype; repacked."""
        with torch.no_grad():
            if self.compacted:
                self._packed = self._pack(weight.to(self._packed.dtype).contiguous())
                self._make_ready()
            else:
                self.weight.copy_(weight)

    def _apply(self, fn, recurse: bool = True):
        if self.compacted:
            self._expand()
            super()._apply(fn, recurse)
            self.compact()
            return self
        return super()._apply(fn, recurse)

    def packed_weight(self) -> torch.Tensor:
        if self.compacted:
            return self._packed
        key = (id(self.weight), self.weight._version, self.weight.dtype, self.weight.device)
        if self._packed_key != key:
            with torch.no_grad():
                self._packed = self._pack(self.weight)
            self._packed_key = key
        return self._packed

    def _pack(self, weight: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _input(self, x: torch.Tensor) -> torch.Tensor:
        # After weights are cast to bfloat16 once, inputs follow the weights (as autocast would, minus the re-cast).
        dtype = self._stored().dtype
        return x if x.dtype == dtype else x.to(dtype)

    def _bias(self):
        dtype = self._stored().dtype
        if self.bias is None or self.bias.dtype == dtype:
            return self.bias
        return self.bias.to(dtype)

    def _stored(self) -> torch.Tensor:
        """The weight as stored (packed once compacted): its dtype and device, without unpacking it."""
        return self._packed if self.compacted else self.weight

    def __getstate__(self):
        # oneDNN-packed tensors cannot be copied or pickled; they are rebuilt on the next call (a compacted layer
        # travels with its dense weight and compacts again on arrival).
        state = self.__dict__.copy()
        if self.compacted:
            state["_parameters"] = {**self._parameters, "weight": nn.Parameter(self._packed.to_dense(),
                                                                               requires_grad=False)}
            state["compacted"] = "again"
        state["_packed"] = None
        state["_packed_key"] = None
        state["_ready"] = None
        return state

    def __setstate__(self, state):
        again = state.get("compacted") == "again"
        super().__setstate__({"_ready": None, **state, "compacted": False})
        if again:
            self.compact()

    def _activation(self, y: torch.Tensor) -> torch.Tensor:
        return _ACTIVATIONS[self.attr](y, self.scalars, self.algorithm)

    def extra_repr(self) -> str:
        return f"activation={self.attr!r}, scalars={self.scalars}"


class FusedConv2d(_Packed):
    """Conv2d (+ BatchNorm already folded) + optional residual add + activation, as one oneDNN call."""

    def __init__(self, conv: nn.Conv2d, activation=("none", [], ""), padding=None) -> None:
        super().__init__(conv.weight, conv.bias, activation)
        self.padding = list(padding if padding is not None else conv.padding)
        self.stride = list(conv.stride)
        self.dilation = list(conv.dilation)
        self.groups = conv.groups
        self.out_channels = conv.out_channels
        self.kernel_size = tuple(conv.kernel_size)
        # Set when a following `+ other` was fused: then forward takes (x, other) and only relu may follow.
        self.binary = False
        # Whether the weight is reordered for oneDNN (else the fused call takes it dense, channels_last).
        self.packed = True
        # The input shape the stored packed weight is laid out for (the example's), and packings for other shapes:
        # (the stored packed weight they were made from, {shape: packed weight}), the most recent last.
        self.example_shape = None
        self._by_shape = (None, {})

    def _pack(self, weight, shape=None):
        if not self.packed:
            return weight.detach().contiguous(memory_format=torch.channels_last)  # a tensor, not the Parameter
        hint = shape if shape is not None else self.example_shape
        if hint is not None and not (len(hint) == 4 and all(type(size) is int for size in hint)):
            hint = None  # a symbolic size (a graph captured by torch.export): packed for no particular shape
        return _mkldnn._reorder_convolution_weight(
            weight, self.padding, self.stride, self.dilation, self.groups, None if hint is None else list(hint)
        )

    def __getstate__(self):
        return {**super().__getstate__(), "_by_shape": (None, {})}

    def __setstate__(self, state):
        super().__setstate__({"example_shape": None, **state, "_by_shape": (None, {})})

    def weight_for(self, x: torch.Tensor) -> torch.Tensor:
        """The packed weight laid out for `x`'s shape. oneDNN lays a packed weight out for one input shape, and a
        layout chosen for one shape can run a hundred times slower on another: a 1x1 convolution from 512 to 2048
        channels (bfloat16) took 0.5 ms on a 1x512x7x7 input with its weight packed for that shape, 250 ms on a
        1x512x8x10 input with the same packing, and 0.8 ms packed for 1x512x8x10; packing for no shape was as slow.
        So each other input shape gets a packing of its own (a reorder of the weight, about one call's time), and
        the last few are kept."""
        packed = self.packed_weight()
        shape = x.shape
        if not self.packed or self.example_shape is None or shape == self.example_shape:
            return packed
        made_from, packs = self._by_shape
        if made_from is not packed:  # the weight changed since: those packings are stale
            packs = {}
            self._by_shape = (packed, packs)
        found = packs.get(shape)
        if found is None:
            with torch.no_grad():
                found = self._pack(self.weight, shape)
            if len(packs) >= _SHAPES_KEPT:
                del packs[next(iter(packs))]
            packs[shape] = found
        return found

    def choose_packing(self, shape) -> None:
        """Keep the weight unpacked where packing it loses on an input of `shape` (the example's).

        oneDNN picks the packed weight's layout without knowing the input, and for some layers that layout is
        far slower than giving it the dense weight: a 1x1 convolution from 1024 to 512 channels on a 14x14 map
        measured 36 ms packed against 3.4 ms dense (float32) and 64 ms against 2.0 ms (bfloat16), when packing
        wins elsewhere (0.9 ms against 1.8 ms for 64 to 256 channels on 56x56). Both run on any input shape.
        Packing stays unless it is more than 1.1 times slower, each timed as the best of four calls (a bound of 1.5
        kept layers packed that lose: fcn_resnet50 at batch 8 ran 1.43x eager with it and 1.58x with 1.1)."""
        if shape is None or len(shape) != 4 or self.compacted:
            return
        self.example_shape = torch.Size(shape)
        with torch.no_grad():
            x = torch.randn(*shape, dtype=self.weight.dtype).contiguous(memory_format=torch.channels_last)
            other = torch.randn(*self._output_size(x), dtype=x.dtype).contiguous(memory_format=torch.channels_last)
            best = {}
            for packed in (True, False):
                self.packed, self._packed_key = packed, None
                best[packed] = min(_seconds(lambda: self._forward(x, other if self.binary else None))
                                   for _ in range(4))
        self.packed, self._packed_key = best[True] <= 1.1 * best[False], None
        self.packed_weight()

    def _output_size(self, x: torch.Tensor) -> list[int]:
        size = [x.shape[0], self.out_channels]
        for i, (length, k) in enumerate(zip(x.shape[2:], self.kernel_size)):
            span = self.dilation[i] * (k - 1) + 1
            size.append((length + 2 * self.padding[i] - span) // self.stride[i] + 1)
        return size

    def forward(self, x, other=None):
        call = self._ready_call(x) if other is None else None
        if call is not None:
            x, _, bias = call
            return _mkldnn._convolution_pointwise(
                x, self.weight_for(x), bias, self.padding, self.stride, self.dilation, self.groups,
                self.attr, self.scalars, self.algorithm,
            )
        return super().forward(x, other)

    def _forward(self, x: torch.Tensor, other: torch.Tensor | None = None) -> torch.Tensor:
        x = self._input(x)
        if _plain_path(x, self._stored()):
            y = F.conv2d(x, self.weight, self._bias(), self.stride, self.padding, self.dilation, self.groups)
            return self._activation(y if other is None else y + other)
        args = (self.weight_for(x), self._bias(), self.padding, self.stride, self.dilation, self.groups)
        if other is None:
            return _mkldnn._convolution_pointwise(x, *args, self.attr, self.scalars, self.algorithm)
        if isinstance(other, torch.Tensor) and other.dtype == x.dtype and list(other.shape) == self._output_size(x):
            unary = None if self.attr == "none" else self.attr
            return _mkldnn._convolution_pointwise.binary(x, other, *args, "add", None, unary, [], "")
        # A broadcasting or mixed-dtype residual: the fused kernel does not cover it, compute it in steps.
        y = _mkldnn._convolution_pointwise(x, *args, "none", [], "") + other
        return torch.relu_(y) if self.attr == "relu" else y

    def extra_repr(self) -> str:
        return (
            f"{self.weight.shape[1] * self.groups}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, groups={self.groups}, "
            f"residual_add={self.binary}, packed={self.packed}, " + super().extra_repr()
        )


class FusedLinear(_Packed):
    """Linear (+ BatchNorm1d already folded) + optional activation, as one oneDNN call with a packed weight."""

    def __init__(self, linear: nn.Linear, activation=("none", [], "")) -> None:
        super().__init__(linear.weight, linear.bias, activation)
        self.in_features = linear.in_features
        self.out_features = linear.out_features

    def _pack(self, weight):
        return _mkldnn._reorder_linear_weight(weight, None)

    def forward(self, x):
        call = self._ready_call(x) if x.dim() >= 2 else None  # the oneDNN kernel wants a batch dimension
        if call is not None:
            return _mkldnn._linear_pointwise(*call, self.attr, self.scalars, self.algorithm)
        return super().forward(x)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._input(x)
        if _plain_path(x, self._stored()):
            return self._activation(F.linear(x, self.weight, self._bias()))
        if x.dim() < 2:  # the oneDNN kernel wants a batch dimension
            return self._forward(x.unsqueeze(0)).squeeze(0)
        return _mkldnn._linear_pointwise(
            x, self.packed_weight(), self._bias(), self.attr, self.scalars, self.algorithm
        )

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, " + super().extra_repr()


class AutocastForward(nn.Module):
    """Runs the wrapped module under `torch.autocast`. Outputs come back as autocast leaves them (a linear layer's
    in bfloat16), as from eager code under torch.autocast: casting GPT-2's 8x128x50257 logits back to float32
    cost a sixth of its forward. `output_dtype` casts low-precision floating outputs to it."""

    def __init__(self, module: nn.Module, device_type: str, dtype: torch.dtype, output_dtype=None):
        super().__init__()
        self.module = module
        self.device_type = device_type
        self.dtype = dtype
        self.output_dtype = output_dtype

    def forward(self, *args, **kwargs):
        return self.run(self.module, args, kwargs)

    def run(self, module: nn.Module, args: tuple, kwargs: dict):
        """`module` called as this wrapper calls its own: under autocast, outputs cast back as asked."""
        with torch.autocast(self.device_type, dtype=self.dtype):
            out = module(*args, **kwargs)
        return map_tensors(self._cast_back, out)

    def _cast_back(self, value):
        if self.output_dtype is not None and isinstance(value, torch.Tensor) and value.dtype in (torch.bfloat16, torch.float16):
            return value.to(self.output_dtype)
        return value

    def state_dict(self, *args, **kwargs):
        # The wrapper adds no state of its own: keep the wrapped model's keys (no "module." prefix).
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self.module.load_state_dict(state_dict, strict=strict, assign=assign)

    def extra_repr(self) -> str:
        return f"device_type={self.device_type!r}, dtype={self.dtype}"


OPTIMIZER_MODULES = (FusedConv2d, FusedLinear, AutocastForward)
