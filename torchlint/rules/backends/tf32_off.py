"""TL703 tf32-off."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.lint.rule import FixSafety
from torchlint.rules.backends._common import CONV_LAYER, CONV_MODEL, TrainingScript

_MATMUL_LAYER = re.compile(
    r"^torch\.nn\.(?:Transformer\w*|MultiheadAttention|LSTM|GRU|RNN|LSTMCell|GRUCell|RNNCell|Bilinear)$"
    r"|^torch\.nn\.functional\.scaled_dot_product_attention$|^torch\.(?:matmul|bmm|mm|einsum|baddbmm|addmm)$"
)

_PRECISION_SET = re.compile(
    r"allow_tf32|set_float32_matmul_precision|autocast|GradScaler|bfloat16|\bbf16\b|float16|\bfp16\b|\.half\(\)"
    r"|\bamp\b|mixed_precision|\bprecision\b"
)


class Tf32Off(TrainingScript):
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
        elif CONV_LAYER.match(qual) or CONV_MODEL.match(qual):
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
