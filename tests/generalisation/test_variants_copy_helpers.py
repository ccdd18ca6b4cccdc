"""Family D: batches of a pinned loader copied to the GPU through a helper (`batch = to_device(batch, device)`,
`move_to(batch, device)`, a recursive mover of lists and dicts), of this file or of another, without
`non_blocking=True`. A helper of this file is reported at its own copy; one of another file at the call that
hands it the batch (the batch is this file's). Near misses stay silent: the helper's copy passes
`non_blocking=True` (literally, or a flag it is given), or the loader is not pinned."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 12
SELECT = ("TL103",)

HELPERS = """
import torch


def $mover(data, device$flag_param):
    if isinstance(data, (list, tuple)):
        return [$mover(x, device$flag_arg) for x in data]
    if isinstance(data, dict):
        return {k: $mover(v, device$flag_arg) for k, v in data.items()}
    return data.to(device$flag)$inner
"""

TRAIN = """
import torch
from torch.utils.data import DataLoader
$import


def train(model, dataset, optimizer):
    device = torch.device("cuda")
    model.to(device)
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=$pin)
    for batch in loader:
        $move
        loss = model(*batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

SLOTS = {
    "mover": ("to_device", "move_to", "send"),
    "flag_param": ("",),
    "flag_arg": ("",),
    "flag": ("",),
    "inner": ("",),
    "pin": ("True",),
    "import": ("from helpers import $mover", "import helpers"),
}

OTHER_FILE = Shape(
    "a helper of another file copies a pinned batch without non_blocking",
    {"helpers.py": HELPERS, "train.py": TRAIN},
    {
        **SLOTS,
        "import": ("from helpers import $mover",),
        "move": ("batch = $mover(batch, device)  # expect: TL103", "x = $mover(batch, device)  # expect: TL103\nbatch = x"),
    },
    SELECT,
)

MODULE_ATTRIBUTE = Shape(
    "a helper of another file called as module.helper",
    {"helpers.py": HELPERS, "train.py": TRAIN},
    {**SLOTS, "import": ("import helpers",), "move": ("batch = helpers.$mover(batch, device)  # expect: TL103",)},
    SELECT,
)

SAME_FILE = Shape(
    "a helper of the same file copies a pinned batch without non_blocking",
    {"train.py": TRAIN + HELPERS.replace("import torch\n", "").replace("$inner", "  # expect: TL103")},
    {**SLOTS, "import": ("",), "move": ("batch = $mover(batch, device)",)},
    SELECT,
)

NON_BLOCKING = Shape(
    "the helper's copy passes non_blocking, or the loader is not pinned",
    {"helpers.py": HELPERS, "train.py": TRAIN},
    {
        **SLOTS,
        "import": ("from helpers import $mover",),
        "flag_param": (", non_blocking=True",),
        "flag_arg": (", non_blocking",),
        "flag": (", non_blocking=non_blocking", ", non_blocking=True"),
        "move": ("batch = $mover(batch, device)",),
    },
    SELECT,
)

UNPINNED = Shape(
    "the helper copies batches of an unpinned loader",
    {"helpers.py": HELPERS, "train.py": TRAIN},
    {**SLOTS, "import": ("from helpers import $mover",), "pin": ("False",), "move": ("batch = $mover(batch, device)",)},
    SELECT,
)


@pytest.mark.parametrize(
    "shape", [OTHER_FILE, MODULE_ATTRIBUTE, SAME_FILE, NON_BLOCKING, UNPINNED], ids=lambda s: s.name
)
def test_every_spelling(shape: Shape) -> None:
    report = differing(shape, LIMIT)
    assert report is None, report
