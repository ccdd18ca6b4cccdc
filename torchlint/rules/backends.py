"""Precision and backends: redundant biases before BatchNorm, cuDNN autotuning, TF32 matmuls."""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Optional, Union

import libcst as cst

from torchlint.lint import hotloop
from torchlint.lint.calls import argument, has_star_args, positional, with_keyword
from torchlint.lint.context import UNKNOWN
from torchlint.lint.rule import Fix, FixSafety, InsertBefore, Replace, Rule
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
_STATEMENT_BLOCKS = (cst.IndentedBlock, cst.Module)


def _self_attr(node: cst.BaseExpression) -> Optional[str]:
    """`self.conv1` -> "conv1"."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _single_assign(stmt: cst.CSTNode) -> Optional[cst.Assign]:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        assign = stmt.body[0]
        if len(assign.targets) == 1:
            return assign
    return None


class BiasBeforeBatchNorm(Rule):
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
        "contain the bias, or whose initialisation code touches `layer.bias`, can keep it: `# noqa: TL701`."
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
        self._lists: dict[cst.CSTNode, dict[str, list[list[Optional[cst.BaseExpression]]]]] = {}
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
        for sequence in self._sequences(node):
            for first, second in zip(sequence, sequence[1:]):
                self._check_pair(first, second)

    def _sequences(self, call: cst.Call) -> Iterator[list[Optional[cst.BaseExpression]]]:
        items: list[Optional[cst.BaseExpression]] = []
        args = list(call.args)
        if len(args) == 1 and args[0].star == "" and args[0].keyword is None:
            ordered = self._ordered_dict_items(args[0].value)
            if ordered is not None:
                yield ordered
                return
        for arg in args:
            if arg.keyword is not None or arg.star == "**":
                items.append(None)
            elif arg.star == "*":
                value = arg.value
                if isinstance(value, (cst.List, cst.Tuple)):
                    items.append(None)
                    items.extend(e.value if isinstance(e, cst.Element) else None for e in value.elements)
                    items.append(None)
                elif isinstance(value, cst.Name):
                    items.append(None)
                    yield from self._built_lists(call, value.value)
                else:
                    items.append(None)
            else:
                items.append(arg.value)
        yield items

    def _ordered_dict_items(self, value: cst.BaseExpression) -> Optional[list[Optional[cst.BaseExpression]]]:
        """`OrderedDict([("conv", Conv2d(...)), ("bn", BatchNorm2d(...))])` -> the modules in order."""
        if not isinstance(value, cst.Call) or self.context.qualname(value) != "collections.OrderedDict":
            return None
        args = positional(value)
        if len(args) != 1 or not isinstance(args[0].value, (cst.List, cst.Tuple)):
            return None
        out: list[Optional[cst.BaseExpression]] = []
        for element in args[0].value.elements:
            pair = element.value
            if isinstance(pair, cst.Tuple) and len(pair.elements) == 2:
                out.append(pair.elements[1].value)
            else:
                out.append(None)
        return out

    def _built_lists(self, call: cst.Call, name: str) -> list[list[Optional[cst.BaseExpression]]]:
        """Runs of list building for `name` in the scope of `call` (`layers = [...]`, `+=`, `.extend`, `.append`)."""
        scope = self.context.enclosing_function(call) or self.context.module
        found = self._lists.get(scope)
        if found is None:
            found = self._lists[scope] = self._scan_lists(scope)
        return found.get(name, [])

    def _scan_lists(self, scope: cst.CSTNode) -> dict[str, list[list[Optional[cst.BaseExpression]]]]:
        runs: dict[str, list[list[Optional[cst.BaseExpression]]]] = {}
        blocks: Iterable[cst.CSTNode] = [scope] if isinstance(scope, cst.Module) else []
        nodes = descendants(scope)
        for node in [*blocks, *nodes]:
            if not isinstance(node, _STATEMENT_BLOCKS):
                continue
            current_name: Optional[str] = None
            current: list[Optional[cst.BaseExpression]] = []
            for stmt in node.body:
                added = self._list_addition(stmt)
                if added is None or added[0] != current_name:
                    if current_name is not None and len(current) > 1:
                        runs.setdefault(current_name, []).append(current)
                    current_name, current = (added[0], list(added[1])) if added else (None, [])
                else:
                    current.extend(added[1])
            if current_name is not None and len(current) > 1:
                runs.setdefault(current_name, []).append(current)
        return runs

    @staticmethod
    def _list_addition(stmt: cst.CSTNode) -> Optional[tuple[str, list[Optional[cst.BaseExpression]]]]:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        elements: Optional[cst.BaseExpression] = None
        target: Optional[cst.BaseExpression] = None
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target, elements = small.targets[0].target, small.value
        elif isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
            target, elements = small.target, small.value
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
            if isinstance(call.func, cst.Attribute) and len(call.args) == 1 and call.args[0].star == "":
                target = call.func.value
                if call.func.attr.value == "append":
                    if isinstance(target, cst.Name):
                        return target.value, [call.args[0].value]
                    return None
                if call.func.attr.value == "extend":
                    elements = call.args[0].value
        if not isinstance(target, cst.Name) or not isinstance(elements, (cst.List, cst.Tuple)):
            return None
        return target.value, [e.value if isinstance(e, cst.Element) and not isinstance(e, cst.StarredElement) else None for e in elements.elements]

    # -- forward() of a module -------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(False)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        builds_norm = self._classes.pop()
        if not builds_norm:
            return
        if self._classes:
            self._classes[-1] = True  # a nested class's BatchNorm may be the outer class's too
        assigned: dict[str, list[cst.BaseExpression]] = {}
        uses: dict[str, int] = {}
        targets: set[cst.CSTNode] = set()
        pairs: list[tuple[str, str]] = []
        for child in descendants(node.body):
            if isinstance(child, cst.Assign):
                for target in child.targets:
                    attr = _self_attr(target.target)
                    if attr is not None:
                        targets.add(target.target)
                        assigned.setdefault(attr, []).append(child.value)
            elif isinstance(child, cst.Attribute):
                attr = _self_attr(child)
                if attr is not None and child not in targets:
                    uses[attr] = uses.get(attr, 0) + 1
            elif isinstance(child, cst.Call):
                outer = _self_attr(child.func)
                args = child.args
                if outer is not None and len(args) == 1 and args[0].keyword is None and args[0].star == "":
                    inner = args[0].value
                    if isinstance(inner, cst.Call):
                        conv = _self_attr(inner.func)
                        if conv is not None:
                            pairs.append((conv, outer))
            elif isinstance(child, cst.IndentedBlock):
                pairs.extend(self._statement_pairs(child.body))
        if not pairs:
            return
        for conv, norm in pairs:
            if len(assigned.get(conv, ())) != 1 or len(assigned.get(norm, ())) != 1 or uses.get(conv) != 1:
                continue
            first, second = assigned[conv][0], assigned[norm][0]
            if isinstance(first, cst.Call) and isinstance(second, cst.Call):
                self._check_pair(first, second)

    @staticmethod
    def _statement_pairs(body: Iterable[cst.CSTNode]) -> list[tuple[str, str]]:
        """`x = self.conv(...)` directly followed by `x = self.bn(x)` (or `x = act(self.bn(x))`)."""
        pairs = []
        previous: Optional[tuple[str, str]] = None  # (variable, conv attribute)
        for stmt in body:
            assign = _single_assign(stmt)
            current = None
            if assign is not None and isinstance(assign.targets[0].target, cst.Name):
                variable = assign.targets[0].target.value
                value = assign.value
                if previous is not None and previous[0] == variable:
                    norm = _norm_call_on(value, variable)
                    if norm is not None:
                        pairs.append((previous[1], norm))
                if isinstance(value, cst.Call):
                    conv = _self_attr(value.func)
                    if conv is not None:
                        current = (variable, conv)
            previous = current
        return pairs


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


def _norm_call_on(value: cst.BaseExpression, variable: str) -> Optional[str]:
    """The attribute `X` when `value` uses `variable` exactly once, as the only argument of `self.X(...)`."""
    found: Optional[str] = None
    count = 0
    for node in [value, *descendants(value)]:
        if isinstance(node, cst.Name) and node.value == variable:
            count += 1
        if isinstance(node, cst.Call) and len(node.args) == 1:
            arg = node.args[0]
            if arg.keyword is None and arg.star == "" and isinstance(arg.value, cst.Name) and arg.value.value == variable:
                found = _self_attr(node.func)
    return found if count == 1 else None


# -- whole-script rules ------------------------------------------------------------------------------

_CONV_LAYER = re.compile(r"^torch\.nn\.(?:Lazy)?Conv(?:Transpose)?[123]d$")
_CONV_MODEL = re.compile(
    r"^torchvision\.models\.(?:\w+\.)?(?:resnet\d+|resnext\w+|wide_resnet\w+|vgg\d+(?:_bn)?|alexnet|densenet\d+|"
    r"mobilenet_v[23]\w*|efficientnet_\w+|regnet_\w+|convnext_\w+|shufflenet_v2\w*|squeezenet\w+|googlenet|"
    r"inception_v3|mnasnet\w+)$"
)
_MATMUL_LAYER = re.compile(
    r"^torch\.nn\.(?:Transformer\w*|MultiheadAttention|LSTM|GRU|RNN|LSTMCell|GRUCell|RNNCell|Bilinear)$"
    r"|^torch\.nn\.functional\.scaled_dot_product_attention$|^torch\.(?:matmul|bmm|mm|einsum|baddbmm|addmm)$"
)
_DEVICE_STRING = re.compile(r"^cuda(?::\d+)?$")
_BENCHMARK_SET = re.compile(r"cudnn\.benchmark|\bbenchmark\s*=|deterministic|cudnn\.enabled")
_PRECISION_SET = re.compile(
    r"allow_tf32|set_float32_matmul_precision|autocast|GradScaler|bfloat16|\bbf16\b|float16|\bfp16\b|\.half\(\)"
    r"|\bamp\b|mixed_precision|\bprecision\b"
)


class _TrainingScript(Rule):
    """Facts about a whole file: does it train a model on CUDA, as a script?"""

    def __init__(self, context) -> None:
        super().__init__(context)
        self.uses_cuda = False
        self.loop: Optional[Union[cst.For, cst.While]] = None
        self.is_script = False
        self.off = self._already_decided(context.source.text)

    def _already_decided(self, text: str) -> bool:
        raise NotImplementedError

    def visit_Call(self, node: cst.Call) -> None:
        if self.off:
            return
        func = node.func
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            if attr == "cuda" and self.context.qualname(func) is None:
                self.uses_cuda = True
            elif attr == "backward" and self.loop is None:
                loop = hotloop.hot_loop(self.context, node)
                if loop is not None and hotloop.is_training_loop(self.context, loop):
                    self.loop = loop
        self.facts(node)

    def facts(self, node: cst.Call) -> None:
        pass

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not self.off and not self.uses_cuda and "cuda" in node.value:
            value = self.context.literal(node)
            if isinstance(value, str) and _DEVICE_STRING.match(value):
                self.uses_cuda = True

    def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
        if not self.off and node.value.startswith("cuda:"):
            self.uses_cuda = True

    def visit_If(self, node: cst.If) -> None:
        test = node.test
        if isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == "__name__":
            self.is_script = True

    def training_script(self) -> bool:
        if self.off or self.loop is None or not self.uses_cuda:
            return False
        return self.is_script or self._runs_at_module_level()

    def _runs_at_module_level(self) -> bool:
        """A module-level loop or `parser.parse_args()`: the file is run, not imported."""
        for stmt in self.context.module.body:
            if isinstance(stmt, (cst.For, cst.While)):
                return True
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    value = getattr(small, "value", None)
                    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                        if value.func.attr.value in ("parse_args", "parse_known_args"):
                            return True
        return False

    def setting_fix(self, description: str, line: str) -> Fix:
        """Insert `line` at module level, after the leading docstring and imports (before the training loop)."""
        anchor: Optional[cst.CSTNode] = None
        body = self.context.module.body
        for index, stmt in enumerate(body):
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else None
            is_docstring = index == 0 and isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)
            if not (isinstance(small, (cst.Import, cst.ImportFrom)) or is_docstring):
                anchor = stmt
                break
        top = self._top_statement(self.loop) if self.loop is not None else None
        if anchor is None or (top is not None and body.index(top) < body.index(anchor)):
            anchor = top
        assert anchor is not None
        text = line + "\n"
        if isinstance(anchor, (cst.FunctionDef, cst.ClassDef)):
            text += "\n"
        return Fix(description, [InsertBefore(anchor, text)], safe=False, imports=("torch",))

    def _top_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        top = node
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.Module):
                return top
            top = ancestor
        return top

    def loop_anchor(self) -> cst.CSTNode:
        loop = self.loop
        assert loop is not None
        return loop.iter if isinstance(loop, cst.For) else loop.test


class CudnnBenchmarkOff(_TrainingScript):
    code = "TL702"
    name = "cudnn-benchmark-off"
    family = "Precision and backends"
    summary = (
        "A script that trains a convolutional network on CUDA and never sets `torch.backends.cudnn.benchmark` "
        "(reported once, at the training loop)."
    )
    message = (
        "This script trains a conv net on CUDA without cuDNN autotuning: set torch.backends.cudnn.benchmark = True "
        "once before training (when input sizes are fixed)"
    )
    explanation = (
        "For each convolution cuDNN offers several algorithms (implicit GEMM, FFT, Winograd, ...) whose speed "
        "depends on the shapes, the data type and the GPU. By default PyTorch picks one with cuDNN's heuristics. "
        "With `torch.backends.cudnn.benchmark = True` the first call with each new input shape times the "
        "candidates and caches the fastest, and every later step with the same shape uses it. With fixed-size "
        "inputs (a classifier on `RandomResizedCrop(224)` images) the one-off search is paid back within the "
        "first steps. The PyTorch performance tuning guide recommends it for convolutional networks; the gain "
        "depends on the layer shapes and the GPU (from nothing, where the heuristic already picks the fastest "
        "algorithm, to a large share of a layer's time where it does not). One published measurement: 15% "
        "shorter training time for ResNet-101 on a GTX 1060 (cnblogs.com/picassooo/p/16720249.html, citing "
        "cloud.tencent.com/developer/article/1668398)."
    )
    bad = (
        "import torch\nimport torchvision\n\n"
        "model = torchvision.models.resnet50().cuda()\n"
        "for images, labels in train_loader:\n"
        "    loss = criterion(model(images.cuda()), labels.cuda())\n"
        "    optimizer.zero_grad()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    good = (
        "import torch\nimport torchvision\n\n"
        "torch.backends.cudnn.benchmark = True\n"
        "model = torchvision.models.resnet50().cuda()\n"
        "for images, labels in train_loader:\n"
        "    ...\n"
    )
    false_positives = (
        "Reported only for scripts (an `if __name__ == \"__main__\":` guard, a module-level loop, or "
        "`parser.parse_args()` at module level) that build `nn.Conv*d` layers or a torchvision convolutional model, use CUDA, and call "
        "`.backward()` in a training loop; library modules are left alone (a global backend flag is the "
        "script's decision). Any mention of `cudnn.benchmark` (even `= False`, a deliberate choice), "
        "`deterministic` (`cudnn.deterministic = True`, `torch.use_deterministic_algorithms(True)`, "
        "`init_seeds(deterministic=True)`) or `cudnn.enabled` silences it. Wrong when input sizes vary from "
        "batch to batch (multi-scale detection, variable-length sequences): each new shape is benchmarked "
        "again, which can make training slower. Also wrong when the flag is set in another module the script "
        "imports."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Inserts `torch.backends.cudnn.benchmark = True` at module level after the imports. Unsafe: the algorithm cuDNN picks can differ between runs, so results are no longer bit-for-bit "
        "reproducible, and with input shapes that vary, repeated benchmarking can make training slower."
    )
    requires = ("backward",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.has_conv = False

    def _already_decided(self, text: str) -> bool:
        return bool(_BENCHMARK_SET.search(text))

    def facts(self, node: cst.Call) -> None:
        if self.has_conv:
            return
        qual = self.context.qualname(node)
        if qual is not None and (_CONV_LAYER.match(qual) or _CONV_MODEL.match(qual)):
            self.has_conv = True

    def leave_Module(self, node: cst.Module) -> None:
        if not self.has_conv or not self.training_script():
            return
        torch = self.context.local_name_for("torch")
        fix = self.setting_fix("Enable cuDNN autotuning before training", f"{torch}.backends.cudnn.benchmark = True")
        self.report(self.loop_anchor(), fix=fix)


class Tf32Off(_TrainingScript):
    code = "TL703"
    name = "tf32-off"
    family = "Precision and backends"
    summary = (
        "A CUDA training script whose float32 matmuls run at full FP32 precision: no TF32 "
        "(`torch.set_float32_matmul_precision(\"high\")`), no autocast, no bf16/fp16 (reported once, at the "
        "training loop)."
    )
    message = (
        "float32 matmuls in this CUDA training script do not use TF32 tensor cores: call "
        "torch.set_float32_matmul_precision(\"high\") once before training, or train under torch.autocast"
    )
    explanation = (
        "Since PyTorch 1.12, float32 matrix multiplications on CUDA run in full FP32 by default "
        "(`torch.backends.cuda.matmul.allow_tf32 = False`), while convolutions already use TF32 "
        "(`torch.backends.cudnn.allow_tf32 = True`). On Ampere and newer GPUs TF32 tensor cores are much faster "
        "than the FP32 units: NVIDIA's A100 datasheet lists 19.5 TFLOPS for FP32 and 156 TFLOPS for TF32 "
        "(8x, dense). `torch.set_float32_matmul_precision(\"high\")` lets Linear layers, attention and every "
        "other float32 matmul use them, keeping float32 storage and float32 accumulation; the inputs are "
        "rounded to a 10-bit mantissa. For models dominated by matmuls (Transformers, MLPs, RNNs) this is the "
        "cheapest speed-up there is short of mixed precision. On GPUs before Ampere the setting does nothing."
    )
    bad = (
        "import torch\n\n"
        "model = torch.nn.TransformerEncoder(layer, num_layers=6).cuda()\n"
        "for batch in train_loader:\n"
        "    loss = model(batch.cuda()).mean()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    good = (
        "import torch\n\n"
        "torch.set_float32_matmul_precision(\"high\")\n"
        "model = torch.nn.TransformerEncoder(layer, num_layers=6).cuda()\n"
        "for batch in train_loader:\n"
        "    ...\n"
    )
    false_positives = (
        "Off by default: TF32 trades matmul precision (10-bit mantissa inputs) for speed, PyTorch chose FP32 "
        "as the default for that reason, and the rule cannot see the GPU the script will run on. When enabled, "
        "it reports only scripts (an `if __name__ == \"__main__\":` guard, a module-level loop or `parse_args()`) that "
        "use CUDA, call `.backward()` in a training loop, and do matmul-heavy work (Transformer/attention/RNN "
        "layers, `torch.matmul`/`bmm`/`einsum`, or `nn.Linear` without convolutions). Any mention of "
        "`allow_tf32`, `set_float32_matmul_precision`, `autocast`, `GradScaler`, bf16/fp16/half, `amp`, "
        "`mixed_precision` or `precision` silences it. Wrong when the precision is chosen in a config file or "
        "another module, or when the results must match FP32 to the last bits."
    )
    fix_safety = FixSafety.UNSAFE
    fix_notes = (
        "Inserts `torch.set_float32_matmul_precision(\"high\")` at module level after the imports. Unsafe: float32 matmul inputs are rounded to TF32, which changes results (relative "
        "error around 1e-3 per product)."
    )
    default_enabled = False
    requires = ("backward",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.has_conv = False
        self.has_linear = False
        self.has_matmul = False

    def _already_decided(self, text: str) -> bool:
        return bool(_PRECISION_SET.search(text))

    def facts(self, node: cst.Call) -> None:
        if self.has_matmul:
            return
        qual = self.context.qualname(node)
        if qual is None:
            return
        if _MATMUL_LAYER.match(qual):
            self.has_matmul = True
        elif qual in ("torch.nn.Linear", "torch.nn.LazyLinear"):
            self.has_linear = True
        elif _CONV_LAYER.match(qual) or _CONV_MODEL.match(qual):
            self.has_conv = True

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.MatrixMultiply):
            self.has_matmul = True

    def leave_Module(self, node: cst.Module) -> None:
        heavy = self.has_matmul or (self.has_linear and not self.has_conv)
        if not heavy or not self.training_script():
            return
        torch = self.context.local_name_for("torch")
        fix = self.setting_fix("Let float32 matmuls use TF32", f'{torch}.set_float32_matmul_precision("high")')
        self.report(self.loop_anchor(), fix=fix)
