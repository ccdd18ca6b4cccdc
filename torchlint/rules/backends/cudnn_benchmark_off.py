"""TL702 cudnn-benchmark-off."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.lint.rule import FixSafety
from torchlint.rules.backends._common import CONV_LAYER, CONV_MODEL, TrainingScript

_BENCHMARK_SET = re.compile(r"cudnn\.benchmark|\bbenchmark\s*=|deterministic|cudnn\.enabled")


class CudnnBenchmarkOff(TrainingScript):
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
        if qual is not None and (CONV_LAYER.match(qual) or CONV_MODEL.match(qual)):
            self.has_conv = True

    def leave_Module(self, node: cst.Module) -> None:
        if not self.has_conv or not self.training_script():
            return
        torch = self.context.local_name_for("torch")
        fix = self.setting_fix("Enable cuDNN autotuning before training", f"{torch}.backends.cudnn.benchmark = True")
        self.report(self.loop_anchor(), fix=fix)
