"""TL701 bias-before-batchnorm."""

from __future__ import annotations

from typing import Optional, Union

import libcst as cst

from torchlint.lint.calls import argument, has_star_args, with_keyword
from torchlint.lint.context import UNKNOWN
from torchlint.lint.rule import Fix, FixSafety, Replace, Rule
from torchlint.lint.walk import descendants

# qualname -> (kind, bias position, out-channels position); kind 1/2/3 for convolutions, "linear" for Linear.
_LAYERS: dict[str, tuple[Union[int, str], int, int]] = {}
for _dim in (1, 2, 3):
    _LAYERS[f"torch.nn.Conv{_dim}d"] = (_dim, 7, 1)
    _LAYERS[f"torch.nn.ConvTranspose{_dim}d"] = (_dim, 7, 1)
    _LAYERS[f"torch.nn.LazyConv{_dim}d"] = (_dim, 6, 0)
    _LAYERS[f"torch.nn.LazyConvTranspose{_dim}d"] = (_dim, 6, 0)
_LAYERS["torch.nn.Linear"] = ("linear", 2, 1)
_LAYERS["torch.nn.LazyLinear"] = ("linear", 1, 0)

# qualname -> the layer kind it normalises (None: SyncBatchNorm, any).
_NORMS: dict[str, Optional[Union[int, str]]] = {"torch.nn.SyncBatchNorm": None}
for _dim in (1, 2, 3):
    _NORMS[f"torch.nn.BatchNorm{_dim}d"] = _dim
    _NORMS[f"torch.nn.LazyBatchNorm{_dim}d"] = _dim

_SEQUENTIAL = "torch.nn.Sequential"

class BiasBeforeBatchnorm(Rule):
    code = "TL701"
    name = "bias-before-batchnorm"
    family = "Precision and backends"
    summary = (
        "A convolution or linear layer with a bias whose output goes straight into BatchNorm "
        "(`nn.Sequential(nn.Conv2d(...), nn.BatchNorm2d(...))`, or `self.bn(self.conv(x))` in `forward`)."
    )
    message = "This layer feeds BatchNorm, which subtracts the per-channel mean and cancels the bias: pass bias=False"
    explanation = (
        "BatchNorm subtracts the per-channel mean of its input, so a per-channel constant added just before it "
        "cancels out: in training the bias gets a zero gradient and never moves from its initial value, and in "
        "evaluation the running mean absorbs it. The model computes exactly the same function without it. "
        "The bias still costs work on every step: an extra pass over the layer's output to add it (when the "
        "backend does not fuse it), a reduction over the batch and spatial dimensions in backward to compute "
        "its (zero) gradient, and optimizer state and weight-decay updates for it. The saving is small: in a "
        "training step of a four-layer conv-BN-ReLU network (batch 16, 56x56, SGD with momentum), measured on a "
        "2-core CPU, dropping the biases made no measurable difference (repeated runs differed by up to 10% in either "
        "direction, within the noise of a shared machine). On a GPU the "
        "bias-gradient reduction is an extra memory-bound pass over each such layer's output gradient. Treat "
        "it as removing dead parameters and a little work, not as a large speed-up; it is why reference "
        "implementations (torchvision's ResNet, VGG-BN, MobileNet) build every convolution that precedes a "
        "BatchNorm with `bias=False`."
    )
    bad = (
        "import torch.nn as nn\n\n"
        "block = nn.Sequential(\n"
        "    nn.Conv2d(64, 128, 3, padding=1),\n"
        "    nn.BatchNorm2d(128),\n"
        "    nn.ReLU(inplace=True),\n"
        ")\n"
    )
    good = (
        "import torch.nn as nn\n\n"
        "block = nn.Sequential(\n"
        "    nn.Conv2d(64, 128, 3, padding=1, bias=False),\n"
        "    nn.BatchNorm2d(128),\n"
        "    nn.ReLU(inplace=True),\n"
        ")\n"
    )
    false_positives = (
        "Reported only when the layer's output provably goes to the BatchNorm and nowhere else: adjacent "
        "entries of `nn.Sequential(...)` (also through `*layers` built with list literals, `+=`, `extend` and "
        "`append` in the same function), `self.bn(self.conv(x))`, or `x = self.conv(x)` directly followed by "
        "`x = self.bn(x)`, with `self.conv` used nowhere else in the class. The dimensions must agree "
        "(`Conv2d`/`ConvTranspose2d` with `BatchNorm2d`, `Linear` with `BatchNorm1d`, any with `SyncBatchNorm`), "
        "and a channel count known to differ silences it. A model that must keep loading checkpoints that "
        "contain the bias, or whose initialisation code touches `layer.bias`, can keep it: `# noqa: TL701`. "
        "Test modules are not checked: a unit test's toy network is never trained. A tutorial cell that only "
        "builds and prints a network is still reported (whether it is trained cannot be told from the cell)."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Sets `bias=False`. Unsafe: the state_dict loses the `<layer>.bias` key, so existing checkpoints no "
        "longer load with `strict=True`, and code that reads or initialises `layer.bias` (for example "
        "`nn.init.zeros_(m.bias)` in an init loop without an `if m.bias is not None` guard) breaks."
    )
    requires = ("BatchNorm",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._reported: set[cst.CSTNode] = set()
        self._counts: dict[cst.CSTNode, dict[str, int]] = {}
        self._classes: list[bool] = []  # per enclosing class: does it construct a BatchNorm?

    # -- layer facts -----------------------------------------------------------------------------
    def _layer(self, node: Optional[cst.BaseExpression], *, only_use: bool = False) -> Optional[cst.Call]:
        """The `nn.Conv2d(...)`/`nn.Linear(...)`/BatchNorm call `node` is, following a single assignment.

        With `only_use`, a name must be used nowhere else in its scope (the layer's output would go elsewhere too).
        """
        if isinstance(node, cst.Call):
            return node
        if isinstance(node, cst.Name):
            value = self.context.assigned_value(node)
            if not isinstance(value, cst.Call):
                return None
            if only_use and self._name_count(node) != 2:  # the assignment and this use
                return None
            return value
        return None

    def _name_count(self, name: cst.Name) -> int:
        scope = self.context.enclosing_function(name) or self.context.module
        counts = self._counts.get(scope)
        if counts is None:
            counts = self._counts[scope] = {}
            for node in descendants(scope):
                if isinstance(node, cst.Name):
                    counts[node.value] = counts.get(node.value, 0) + 1
        return counts.get(name.value, 0)

    def _has_bias(self, call: cst.Call, position: int) -> bool:
        if has_star_args(call):
            return False
        if any(arg.star == "**" and not self._known_keys_without(arg.value, "bias") for arg in call.args):
            return False
        arg = argument(call, "bias", position)
        return arg is None or self.context.literal(arg.value) is True

    def _check_pair(self, first: Optional[cst.BaseExpression], second: Optional[cst.BaseExpression]) -> None:
        layer = self._layer(first, only_use=True)
        norm = self._layer(second)
        if layer is None or norm is None:
            return
        spec = _LAYERS.get(self.context.qualname(layer) or "")
        if spec is None:
            return
        normalises = _NORMS.get(self.context.qualname(norm) or "", False)
        if normalises is False:
            return
        kind, bias_position, out_position = spec
        if normalises is not None and normalises != (1 if kind == "linear" else kind):
            return
        if not self._has_bias(layer, bias_position):
            return
        if not self._features_agree(layer, norm, kind, out_position):
            return
        self._report(layer, bias_position)

    def _known_keys_without(self, value: cst.BaseExpression, key: str) -> bool:
        """`**dd` where `dd = {"device": device, "dtype": dtype}` (or `dict(device=...)`) has no `key`."""
        if isinstance(value, cst.Name):
            value = self.context.assigned_value(value)
        if isinstance(value, cst.Dict):
            keys = []
            for element in value.elements:
                if not isinstance(element, cst.DictElement):
                    return False
                keys.append(self.context.literal(element.key))
            return all(isinstance(k, str) for k in keys) and key not in keys
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
            return all(a.keyword is not None for a in value.args) and all(a.keyword.value != key for a in value.args)
        return False

    def _features_agree(self, layer: cst.Call, norm: cst.Call, kind: Union[int, str], out_position: int) -> bool:
        out = argument(layer, "out_features" if kind == "linear" else "out_channels", out_position)
        features = argument(norm, "num_features", 0)
        if out is None or features is None:
            return kind != "linear"  # a lazy layer: channels unknown; Linear needs proof (3-D inputs)
        if self.context.code(out.value) == self.context.code(features.value):
            return True
        a, b = self.context.literal(out.value), self.context.literal(features.value)
        if a is UNKNOWN or b is UNKNOWN:
            return kind != "linear"
        return a == b

    def _report(self, layer: cst.Call, bias_position: int) -> None:
        if self.semantic.is_test_module:
            return  # a unit test's toy network is never trained
        if layer in self._reported:
            return
        self._reported.add(layer)
        arg = argument(layer, "bias", bias_position)
        if arg is not None and arg.keyword is None:
            fixed = layer.with_changes(
                args=[a.with_changes(value=cst.Name("False")) if a is arg else a for a in layer.args]
            )
        else:
            fixed = _with_keyword_before_star(layer, "bias", "False")
        name = (self.context.qualname(layer) or "").rpartition(".")[2]
        message = (
            f"`{name}` feeds BatchNorm, which subtracts the per-channel mean and cancels the bias: "
            "pass bias=False"
        )
        self.report(layer, message, fix=Fix("Set bias=False", [Replace(layer, fixed)], safe=False))

    # -- nn.Sequential -----------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if "BatchNorm" in last and self._classes:
            self._classes[-1] = True  # this class builds a BatchNorm: worth analysing its forward()
        if last != "Sequential" or self.context.qualname(node) != _SEQUENTIAL:
            return
        for sequence in self.semantic.layer_order.sequence_items(node):
            for first, second in zip(sequence, sequence[1:]):
                self._check_pair(first, second)

    # -- forward() of a module -------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(False)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        builds_norm = self._classes.pop()
        if not builds_norm:
            return
        if self._classes:
            self._classes[-1] = True  # a nested class's BatchNorm may be the outer class's too
        for first, second in self.semantic.layer_order.forward_pairs(node):
            self._check_pair(first, second)
def _with_keyword_before_star(call: cst.Call, name: str, value: str) -> cst.Call:
    """`with_keyword`, but placed before a trailing `**options` (where a reader expects explicit arguments)."""
    first_star = next((i for i, arg in enumerate(call.args) if arg.star == "**"), None)
    if first_star is None:
        return with_keyword(call, name, value)
    before = with_keyword(call.with_changes(args=call.args[:first_star]), name, value).args
    added = before[-1]
    if not isinstance(added.comma, cst.Comma):
        added = added.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*before[:-1], added, *call.args[first_star:]])
