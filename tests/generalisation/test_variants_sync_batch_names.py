"""Family E: an evaluation helper whose iterable says nothing (`def evaluate(model, iterator)`, called from
another file) is still a loop over batches when what each trip hands the model comes from the trip's item
through local names (`x, y = batch`, `x = batch.text.cuda()`, either branch of `if cuda:`). Its per-batch
copies to the host are found however the binding is spelt; near misses stay silent."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 10  # spellings per shape: the first is the base, the rest drawn at random
SELECT = ("TL201", "TL202", "TL204", "TL207")

HEADER = (
    "for $b in $data:",
    "for i, $b in enumerate($data):",
    "for $b in tqdm($data, desc='eval'):",
    "for i, $b in enumerate(tqdm($data)):",
)

# what the trip hands the model, bound from its item (the model's input is always `x`)
BIND = (
    "x, y = $b\nx = x.to(device)",
    "x = $b[0].to(device)",
    "x = $b.text.cuda()",
    "x = $b['image'].to(device, non_blocking=True)",
    "if torch.cuda.is_available():\n    x = $b.text.cuda()\nelse:\n    x = $b.text",
    "inputs, labels = $b\nx = inputs.to(device)",
    "inputs = $b[0]\nx = inputs.float().to(device)",
)

GATHER = (
    "$acc.append($out.argmax(1).cpu().numpy())  # expect: TL201",
    "$acc.extend(torch.max($out.cpu().data, 1)[1].numpy())  # expect: TL201",
    "$acc.append($out.softmax(-1).cpu())  # expect: TL201",
    "$acc.extend($out.argmax(dim=1).tolist())  # expect: TL201",
)

SLOTS = {
    "header": HEADER,
    "bind": BIND,
    "gather": GATHER,
    "b": ("batch", "data", "item", "sample_batch"),
    "data": ("iterator", "data", "batches", "val_iter"),
    "out": ("y_pred", "logits", "out"),
    "acc": ("all_preds", "preds", "outputs"),
    "fn": ("evaluate_model", "predict", "run_eval"),
}

IMPORTS = "import numpy as np\nimport torch\nfrom tqdm import tqdm\n\ndevice = torch.device('cuda')\n"

HELPER = IMPORTS + '''

def $fn(model, $data):
    model.eval()
    $acc = []
    with torch.no_grad():
        $header
            $bind
            $out = model(x)
            $gather
    return $acc
'''

METHOD = IMPORTS + '''

class Evaluator:
    def __init__(self, model):
        self.model = model.to(device)

    def $fn(self, $data):
        self.model.eval()
        $acc = []
        with torch.no_grad():
            $header
                $bind
                $out = self.model(x)
                $gather
        return $acc
'''

CALLER = """
import torch
from torch.utils.data import DataLoader

from evaluation import $fn

model = torch.nn.Linear(784, 10).cuda()
val_loader = DataLoader(val_set, batch_size=256, num_workers=4, pin_memory=True)
print($fn(model, val_loader))
"""

METHOD_CALLER = """
import torch
from torch.utils.data import DataLoader

from evaluation import Evaluator

evaluator = Evaluator(torch.nn.Linear(784, 10))
val_loader = DataLoader(val_set, batch_size=256, num_workers=4, pin_memory=True)
print(evaluator.$fn(val_loader))
"""

POSITIVE = [
    Shape("eval-helper-batch-names/other-file", {"evaluation.py": HELPER, "main.py": CALLER}, SLOTS, SELECT),
    Shape("eval-helper-batch-names/uncalled", {"evaluation.py": HELPER}, SLOTS, SELECT),
    Shape("eval-helper-batch-names/method", {"evaluation.py": METHOD, "main.py": METHOD_CALLER}, SLOTS, SELECT),
]

# ---- near misses: the same loops where nothing reaches the device, or the model feeds itself -----------

NEAR_SLOTS = {
    **SLOTS,
    "near": (
        # statistics of the host batches: no model runs on what the trip reads
        "x = $b[0]\nstats.append(x.mean().cpu())",
        # the items are host tensors the helper never moves: model and data stay on the host
        "x = $b[0].float()\n$out = cpu_model(x)\n$acc.append($out.argmax(1).numpy())",
        # NumPy values read on the host
        "x = np.asarray($b[0])\n$acc.append(float(x.mean()))",
    ),
}

NEAR = IMPORTS + '''

cpu_model = torch.nn.Linear(784, 10)


def $fn(model, $data):
    model.eval()
    $acc, stats = [], []
    with torch.no_grad():
        $header
            $near
    return $acc, stats
'''

SHAPES = POSITIVE + [Shape("eval-helper-batch-names/near-miss", {"evaluation.py": NEAR}, NEAR_SLOTS, SELECT)]


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_batch_reached_through_local_names_is_judged_however_written(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
