"""The one vocabulary of devices: which strings name one and which variable names hold one."""

from __future__ import annotations

import re
from typing import Optional

ACCELERATORS = ("cuda", "mps", "xpu", "hpu", "npu", "xla")
_ACCELERATOR_STRING = re.compile(r"^(cuda|mps|xpu|hpu|npu|xla)(?::\d+)?$|^(cuda|mps|xpu|hpu|npu|xla):")
# Variable names that hold a device (or a device index) by convention: `device`, `args.device`, `dev`,
# `gpu_id`, `rank`, `local_rank`, `cuda`.
_DEVICE_NAME = re.compile(r"device|^(?:\w+_)?(?:dev|gpu|gpus|gpu_ids?|cuda|rank)(?:_id|_type)?$", re.IGNORECASE)
_DEVICE_LIST_NAME = re.compile(r"^(?:\w+_)?(?:devices|gpus)$")


def accelerator_in(value: str) -> Optional[str]:
    """The accelerator a device string names (`"cuda:0"` -> "cuda"), None for "cpu" or anything else."""
    match = _ACCELERATOR_STRING.match(value)
    return (match.group(1) or match.group(2)) if match else None


def is_device_string(value: str) -> bool:
    """`"cuda"`, `"cuda:1"`, `"cpu"`, `"mps"`, `"gpu"`: a string that names a device."""
    lower = value.lower()
    return accelerator_in(lower) is not None or lower.split(":")[0] in ("cpu", "gpu", "tpu")


def is_device_name(name: str) -> bool:
    """A variable named like one that holds a device."""
    return bool(_DEVICE_NAME.search(name))


def is_device_list_name(name: str) -> bool:
    """`devices`, `gpus`, `args.gpus`: a list of devices (an element is one)."""
    return bool(_DEVICE_LIST_NAME.match(name))
