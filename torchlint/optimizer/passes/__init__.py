"""The optimizer's passes, in the order they run. Each lives in its own module."""

from __future__ import annotations

from .autocast import autocast
from .base import Pass, PassContext, PassResult
from .batchnorm import fold_batchnorm
from .cast_weights import cast_weights
from .channels_last import channels_last
from .dropout import remove_dropout
from .inplace import inplace_activations
from .onednn import fuse_onednn

PASSES: dict[str, Pass] = {
    p.name: p
    for p in (
        Pass("remove_dropout", remove_dropout, "drop Dropout and Identity (no-ops in eval)", eval_only=True),
        Pass("fold_batchnorm", fold_batchnorm, "fold BatchNorm into the preceding conv/linear", eval_only=True),
        Pass("channels_last", channels_last, "run 2-D convolutions in channels_last memory format"),
        Pass("onednn_fusion", fuse_onednn, "conv/linear + add + activation as one oneDNN call, weights packed once",
             eval_only=True, cpu_only=True),
        Pass("inplace_activations", inplace_activations, "activations overwrite inputs nothing else uses"),
        Pass("autocast", autocast, "run the forward under torch.autocast", whole_model=True, edits_modules=False),
        Pass("cast_weights", cast_weights, "store conv/linear weights in the autocast dtype once",
             eval_only=True, whole_model=True),
    )
}
# Run by default; the mixed-precision passes run only when autocast is asked for.
DEFAULT = ["remove_dropout", "fold_batchnorm", "channels_last", "onednn_fusion", "inplace_activations"]
MIXED_PRECISION = ["autocast", "cast_weights"]

__all__ = ["PASSES", "DEFAULT", "MIXED_PRECISION", "Pass", "PassContext", "PassResult"]
