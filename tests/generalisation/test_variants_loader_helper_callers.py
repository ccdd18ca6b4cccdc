"""TL101: a helper's loader over its parameter is judged by what every caller passes, wherever the callers are.

Silent: an evaluation helper (an inception score) builds `DataLoader(imgs, batch_size=...)` over its parameter,
and its only caller, in another file, passes a list of generated samples it built in memory, also after
trimming it (`imgs = imgs[:n]` reads the list bound before) and also when it imports the helper from the
package that re-exports it (`from metrics import inception_score`, where metrics/__init__.py imports it from
its own module). Near miss stays reported: the caller passes a dataset that reads image files."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 12

HELPER = """
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader


def inception_score(imgs, device, batch_size=32):
    loader = DataLoader(imgs, batch_size=batch_size)  $expect
    net = torch.hub.load("pytorch/vision", "inception_v3").to(device).eval()
    scores = []
    with torch.no_grad():
        for batch in loader:
            scores.append(F.softmax(net(batch.to(device)), dim=1).cpu())
    return torch.cat(scores).mean()
"""

RE_EXPORT = """
from metrics.inception import inception_score

__all__ = [inception_score]
"""

EVALUATE = """
import torch
$imports


class Evaluator:
    def __init__(self, generator, n, device):
        self.generator = generator
        self.n = n
        self.device = device

    def score(self):
        self.generator.eval()
        $samples
        return $call(imgs, self.device)
"""

IN_MEMORY = (
    """imgs = []
while len(imgs) < self.n:
    with torch.no_grad():
        samples = self.generator(torch.randn(64, 128, device=self.device))
    imgs.extend(s.cpu().numpy() for s in samples)
imgs = imgs[: self.n]""",
    """imgs = []
for _ in range(self.n // 64):
    with torch.no_grad():
        imgs += [s.cpu() for s in self.generator(torch.randn(64, 128, device=self.device))]""",
    """imgs = [s.cpu() for s in self.generator(torch.randn(self.n, 128, device=self.device)).detach()]
imgs = imgs[: self.n]""",
)

FROM_FILES = ("""imgs = ImageFolder("samples", transform=ToTensor())""",)

IMPORTS = (
    "from metrics import inception_score",
    "from metrics.inception import inception_score",
    "import metrics",
)
CALLS = {"from metrics import inception_score": "inception_score", "from metrics.inception import inception_score": "inception_score"}

FILES = {"metrics/__init__.py": RE_EXPORT, "metrics/inception.py": HELPER, "evaluate.py": EVALUATE}


def _shapes(samples: tuple[str, ...], expect: str, extra_import: str) -> list[Shape]:
    return [
        Shape(
            f"{'files' if expect else 'memory'}-{i}",
            FILES,
            {
                "imports": (imports + extra_import,),
                "call": (CALLS.get(imports, "metrics.inception_score"),),
                "samples": samples,
                "expect": (expect,),
            },
            ("TL101",),
        )
        for i, imports in enumerate(IMPORTS)
    ]


SHAPES = _shapes(IN_MEMORY, "", "") + _shapes(
    FROM_FILES, "# expect: TL101", "\nfrom torchvision.datasets import ImageFolder\nfrom torchvision.transforms import ToTensor"
)


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_a_helper_loader_follows_its_callers(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
