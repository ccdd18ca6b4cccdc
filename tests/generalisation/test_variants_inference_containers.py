"""Family B, networks taken out of a container, whatever they are called: an ensemble's members in a list or a
dict (written as a display, a comprehension or filled by `append`), an `nn.ModuleList` / `nn.ModuleDict`, run as
`self.members[i](x)`, `for m in members: m(x)` or `sum(m(x) for m in members)` in an evaluation loop whose
results end on the host. Near misses stay silent: the same loop whose outputs feed the loss, a container of
loss modules, a loop over the layers of one network inside its own `forward` (or over its flows by index, inside
its own sampling method), a container of plain functions."""

from __future__ import annotations

import pytest

from tests.generalisation.test_variants_inference import params
from tests.generalisation.variants import Shape, differing

SELECT = ("TL301", "TL305")
MARK = "# expect: TL301"

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.fc1 = nn.Linear(8, width)
        self.fc2 = nn.Linear(width, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
"""

# where the members are kept (self.$box), and how one step runs them ($run sets `out`)
HOLD = (
    "self.$box = [Net() for _ in range(3)]",
    "self.$box = [Net(8), Net(16), Net(32)]",
    "self.$box = nn.ModuleList([Net() for _ in range(3)])",
    "self.$box = {'small': Net(8), 'large': Net(32)}",
    "self.$box = nn.ModuleDict({'small': Net(8), 'large': Net(32)})",
)
RUN = (
    "out = sum($member(x) for $member in $items)",
    "outs = [$member(x) for $member in $items]\nout = torch.stack(outs).mean(0)",
    "out = 0\nfor $member in $items:\n    out = out + $member(x)",
)
ITEMS = ("self.$box.values()",)  # (a dict's members; a list's are `self.$box`, below)

ENSEMBLE = """

class Ensemble:
    def __init__(self):
        $hold
        self.device = torch.device("cuda")

    def $fname(self, loader):  $mark
        hits = 0
        for x, y in loader:
            x, y = x.to(self.device), y.to(self.device)
            $run
            hits += (out.argmax(1) == y).sum().item()
        return hits
"""

SLOTS = {
    "box": ("members", "experts", "pool"),
    "member": ("m", "expert", "f"),
    "fname": ("score", "hit_count", "tally"),
    "run": RUN,
    "mark": (MARK,),
}
LIST_SLOTS = {**SLOTS, "hold": HOLD[:3], "items": ("self.$box",)}
DICT_SLOTS = {**SLOTS, "hold": HOLD[3:], "items": ITEMS}

# an item taken by key or index, and a module-level list filled by `append`
INDEXED = """

class Heads:
    def __init__(self):
        $hold
        self.device = torch.device("cuda")

    def $fname(self, loader, key):  $mark
        hits = 0
        for x, y in loader:
            out = self.$box[key](x.to(self.device))
            hits += (out.argmax(1) == y.to(self.device)).sum().item()
        return hits
"""
INDEXED_SLOTS = {**SLOTS, "hold": (HOLD[1], HOLD[2], HOLD[3], HOLD[4]), "run": ("",)}

APPENDED = """

$box = []
for path in ("a.pt", "b.pt"):
    net = Net().cuda()
    net.load_state_dict(torch.load(path))
    $box.append(net)


def $fname(loader):  $mark
    hits = 0
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        $run
        hits += (out.argmax(1) == y).sum().item()
    return hits
"""
APPENDED_SLOTS = {**SLOTS, "items": ("$box",)}

SHAPES = [
    Shape(name="ensemble/list", files={"main.py": HEAD + ENSEMBLE}, slots=LIST_SLOTS, select=SELECT),
    Shape(name="ensemble/dict", files={"main.py": HEAD + ENSEMBLE}, slots=DICT_SLOTS, select=SELECT),
    Shape(name="ensemble/indexed", files={"main.py": HEAD + INDEXED}, slots=INDEXED_SLOTS, select=SELECT),
    Shape(name="ensemble/appended", files={"main.py": HEAD + APPENDED}, slots=APPENDED_SLOTS, select=SELECT),
]

# -- near misses ------------------------------------------------------------------------------------------
# the members' outputs feed the loss of a training step
TRAINED = """

class Ensemble:
    def __init__(self):
        $hold
        self.device = torch.device("cuda")
        self.optimizer = torch.optim.SGD([p for m in $items for p in m.parameters()], lr=0.1)

    def $fname(self, loader):
        for x, y in loader:
            x, y = x.to(self.device), y.to(self.device)
            $run
            loss = F.cross_entropy(out, y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
"""

# a container of losses, or of plain functions, called the same way
NOT_NETWORKS = """

def smooth(x):
    return x.clamp(0, 1)


class Scores:
    def __init__(self):
        self.$box = $things
        self.device = torch.device("cuda")

    def $fname(self, loader, net):
        total = 0
        for x, y in loader:
            x, y = x.to(self.device), y.to(self.device)
            with torch.no_grad():
                pred = net(x)
            $run
            total += out.sum().item()
        return total
"""
THINGS = ("[nn.MSELoss(), nn.L1Loss()]", "[smooth, torch.sigmoid]", "{'mse': nn.MSELoss(), 'l1': nn.SmoothL1Loss()}")
NOT_NETWORK_RUN = (
    "out = sum($member(pred.float(), y.float()) for $member in self.$box)",
    "out = 0\nfor $member in self.$box:\n    out = out + $member(pred).mean()",
)

# a loop over the layers of one network, inside its own forward, called by a training step
LAYERS = """

class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        $layers

    def forward(self, x):
        for $member in self.$box:
            x = torch.relu($member(x))
        return x


def train(loader, epochs=10):
    net = Deep().cuda()
    optimizer = torch.optim.Adam(net.parameters())
    for epoch in range(epochs):
        for x, y in loader:
            loss = F.mse_loss(net(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""
LAYER_HOLDS = (
    "self.$box = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])",
    "self.$box = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))",
)

# a model's own sampling method that runs its flows one by one, picked out by index (one pass, layer by layer),
# and hands back detached values to callers out of sight
FLOWS = """

class Flow(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        $layers

    def $fname(self, n):
        z = torch.cuda.FloatTensor(n, 8).normal_()
        $walk
        return z.data
"""
WALKS = (
    "for k in reversed(range(len(self.$box))):\n    z = torch.tanh(self.$box[k](z))",
    "for k in range(len(self.$box)):\n    z = self.$box[k](z) + z",
)

NEAR_SHAPES = [
    Shape(name="flows-by-index-of-one-network", files={"main.py": HEAD + FLOWS},
          slots={"box": SLOTS["box"], "layers": LAYER_HOLDS[:1], "walk": WALKS, "fname": ("infer", "sample", "decode")},
          select=SELECT),
    Shape(name="ensemble-trained/list", files={"main.py": HEAD + TRAINED},
          slots={**LIST_SLOTS, "mark": ("",)}, select=SELECT),
    Shape(name="container-of-losses-or-functions", files={"main.py": HEAD + NOT_NETWORKS},
          slots={**SLOTS, "things": THINGS, "run": NOT_NETWORK_RUN, "mark": ("",)}, select=SELECT),
    Shape(name="layers-of-one-network", files={"main.py": HEAD + LAYERS},
          slots={"box": SLOTS["box"], "member": ("layer", "block", "m"), "layers": LAYER_HOLDS}, select=SELECT),
]

LIMIT = 12
XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("shape", params(SHAPES + NEAR_SHAPES, XFAIL))
def test_networks_taken_from_containers_are_found_however_written(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
