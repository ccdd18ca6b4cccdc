"""Family A near misses written many ways: loops that look like per-sample loops but are not (layers, heads,
time steps that carry a state, greedy decoding, work of varying size per sample, a handful of fixed items,
micro-batches, a demo run once) stay silent whatever the names, the loop header or where the loop lives."""

from __future__ import annotations

import pytest

from tests.generalisation.test_variants_per_sample import (
    HELPER,
    HELPER_CALLERS,
    HELPER_MAIN,
    IMPORTS,
    LOSS_CLASS,
    LOSS_CLASS_MAIN,
    NAMES,
    NETS,
    REPLAY_AGENT,
    REPLAY_MAIN,
    SELECT,
    WALK_FRAMES,
)
from tests.generalisation.variants import Shape, check

# -- inside a module's forward: layers, heads, time steps, sizes per sample -------------------------------------
MODULE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class $Cls(nn.Module):
    def __init__(self, width=64, depth=4, classes=10):
        super().__init__()
        self.$stack = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.$heads = nn.ModuleList([nn.Linear(width, classes) for _ in range(3)])
        self.$cell = nn.GRUCell(width, width)
        self.$proj = nn.Linear(width, classes)

    def forward(self, $x, lengths=None):
        $near_miss
"""

NEAR_MISS_FORWARD = (
    # layers, by iteration and by index
    "for $layer in self.$stack:\n    $x = F.relu($layer($x))\nreturn self.$proj($x)",
    "for i in range(len(self.$stack)):\n    $x = self.$stack[i]($x)\nreturn self.$proj($x)",
    # heads
    "return torch.cat([$layer($x) for $layer in self.$heads], dim=1)",
    "outs = []\nfor $layer in self.$heads:\n    outs.append($layer($x))\nreturn torch.stack(outs, dim=1)",
    # time steps carrying a hidden state ($x is batch x time x width)
    "h = $x.new_zeros($x.size(0), $x.size(2))\nouts = []\nfor t in range($x.size(1)):\n    h = self.$cell($x[:, t], h)\n    outs.append(self.$proj(h))\nreturn torch.stack(outs, dim=1)",
    "h = $x.new_zeros($x.size(0), $x.size(2))\nfor step in $x.unbind(1):\n    h = self.$cell(step, h)\nreturn self.$proj(h)",
    "seq_len = $x.shape[1]\nh = torch.zeros($x.size(0), $x.size(2), device=$x.device)\nfor t in range(seq_len):\n    h = self.$cell($x[:, t, :], h)\nreturn self.$proj(h)",
    # each sample to its own length: pieces of different sizes
    "pooled = []\nfor i in range($x.size(0)):\n    pooled.append(self.$proj($x[i, : lengths[i]]).mean(dim=0))\nreturn torch.stack(pooled)",
    # micro-batches bound peak memory by design
    "outs = []\nfor start in range(0, $x.size(0), 16):\n    outs.append(self.$proj($x[start:start + 16]))\nreturn torch.cat(outs)",
)

MODULE_MAIN = (
    IMPORTS
    + """from models import $Cls

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
$model = $Cls().to(device)
$loader = DataLoader(TensorDataset(torch.randn(512, 12, 64), torch.randint(0, 10, (512,))), batch_size=32, num_workers=4)
$optimizer = torch.optim.Adam($model.parameters(), lr=1e-3)
for epoch in range(10):
    for $x, $y in $loader:
        $x, $y = $x.to(device), $y.to(device)
        $loss = $model($x).logsumexp(dim=-1).mean()
        $optimizer.zero_grad()
        $loss.backward()
        $optimizer.step()
"""
)

MODULE_SLOTS = {
    "near_miss": NEAR_MISS_FORWARD,
    "Cls": ("Net", "Encoder", "Model", "Thing"),
    "stack": ("layers", "blocks", "stages", "a"),
    "heads": ("heads", "classifiers", "outs", "b"),
    "cell": ("cell", "rnn", "gru", "c"),
    "proj": ("proj", "fc", "head", "d"),
    "layer": ("layer", "block", "m", "f"),
    **NAMES,
}

# -- in a training or evaluation step: decoding, per-image detections, a few fixed items --------------------------
STEP_MISS = (
    # greedy decoding: each step feeds the last token back
    "tokens = $x[:, :1]\nfor _ in range(16):\n    logits = $model(tokens)\n    nxt = logits[:, -1].argmax(dim=-1, keepdim=True)\n    tokens = torch.cat([tokens, nxt], dim=1)\nresults.append(tokens)",
    # the same step at a few fixed scales (a handful of items, each a whole batch)
    "for scale in (0.5, 1.0, 2.0):\n    results.append($model(F.interpolate($x, scale_factor=scale)).mean())",
    # per-image predictions of different lengths: keep each image's confident classes
    "probs = $model($x).softmax(dim=-1)\nfor i in range(probs.size(0)):\n    results.append(torch.nonzero(probs[i] > 0.2).flatten())",
    # per-sample losses computed once for the batch, then their values logged
    "per_sample = F.cross_entropy($model($x).flatten(1), $y, reduction=\"none\")\nresults.append(per_sample.detach())",
    # a loop over the two halves of a paired batch, each half a batch
    "for half in ($x[: len($x) // 2], $x[len($x) // 2 :]):\n    results.append($model(half))",
    # rows kept by a filter that reads nothing back (a mask does it, but no sync per row)
    "scores = $model($x)\nresults.append([row for row in scores if row[0] > 0])",
    # rows mapped to host values only after one copy
    "scores = $model($x).cpu()\nresults.extend(map(lambda row: int(row.argmax()), scores))",
    # a map doing tensor work per piece
    "results.extend(map(lambda part: part.mean(), $model($x).chunk(4)))",
)

STEP_MAIN = (
    IMPORTS
    + """
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
$model = nn.Sequential(nn.Flatten(1), nn.LazyLinear(10)).to(device)
$loader = DataLoader(TensorDataset(torch.randn(512, 3, 32, 32), torch.randint(0, 10, (512,))), batch_size=32, num_workers=4)


def run($model, $loader):
    results = []
    $model.eval()
    with torch.no_grad():
        for $x, $y in $loader:
            $x, $y = $x.to(device), $y.to(device)
            $step_miss
    return results


for epoch in range(10):
    run($model, $loader)
"""
)

# -- a demo run once: module-level code outside any loop, in a script nothing imports ---------------------------
DEMO = (
    IMPORTS
    + """
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
$model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)).to(device).eval()
$criterion = nn.CrossEntropyLoss()
$x, $y = torch.randn(8, 3, 32, 32, device=device), torch.randint(0, 10, (8,), device=device)
with torch.no_grad():
    $out = $model($x)
$demo
"""
)

DEMO_LOOPS = (
    "for i in range($x.size(0)):\n    print(i, $criterion($out[i], $y[i]).item())",
    "losses = torch.stack([$criterion(o, t) for o, t in zip($out, $y)])\nprint(losses)",
    "shown = [$model($x[i : i + 1]).argmax().item() for i in range(len($x))]\nprint(shown)",
)

# -- what a model hands back that is not a batch: feature levels, deep supervision, detections per image ----------
PYRAMID = """
import torch
import torch.nn as nn


class $Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.down = nn.Conv2d(16, 16, 3, stride=2, padding=1)

    def forward(self, x):
        c1 = self.stem(x)
        c2 = self.down(c1)
        return [c1, c2]
"""

OUTPUTS_MISS = (
    # the levels of a feature pyramid, one head call per level
    "$feats = $net($x)\nouts = []\nfor $f in $feats:\n    outs.append($head($f).flatten(2))\nresults.append(torch.cat(outs, dim=2))",
    # deep supervision: every output of the model against the whole batch of labels
    "$feats = $net($x)\ntotal = 0\nfor k, $f in enumerate($feats):\n    total = total + F.mse_loss($head($f).mean(dim=(2, 3)), $y.float()[:, None].expand(-1, 4))\nresults.append(total)",
    # detections per image: records of different lengths, read by key
    "dets = $detector($x)\nfor $f in dets:\n    results.append($f[\"boxes\"][$f[\"scores\"] > 0.5])",
)

OUTPUTS_MAIN = (
    IMPORTS
    + """from backbones import $Backbone

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
$net = $Backbone().to(device)
$head = nn.Conv2d(16, 4, 1).to(device)
$detector = torchvision.models.detection.fasterrcnn_resnet50_fpn(weights=None).to(device).eval()
$loader = DataLoader(TensorDataset(torch.randn(256, 3, 64, 64), torch.randint(0, 4, (256,))), batch_size=8, num_workers=4)


def run($net, $head, $detector, $loader):
    results = []
    with torch.no_grad():
        for $x, $y in $loader:
            $x, $y = $x.to(device), $y.to(device)
            $outputs_miss
    return results


for epoch in range(10):
    run($net, $head, $detector, $loader)
"""
)

# -- builtins over host values, one read back, tensor work per piece, a constructor that stays on the host -------
WALK_MISS = (
    "$longest = max($lengths.tolist())",
    "$longest = int(max($lengths.cpu()))",
    "$longest = max(len(s) for s in $x.unbind(0))",
    "sizes = [int(v) for v in $lengths.tolist()]\n$longest = sorted(sizes)[-1]",
    "left, right = map(lambda t: t.transpose(0, 1), $x.chunk(2, dim=1))\n$longest = left.size(0)",
    "$longest = max($x.size(1), 4)",
    "HostLong = torch.LongTensor\nids = torch.cat([HostLong([i, i + 1]) for i in range(8)]).to(device)\n$longest = ids.numel()",
)

WALK_SLOTS = {"walk": WALK_MISS, "model": ("model", "rnn", "m"), "optimizer": ("optimizer", "opt"),
              "loader": ("loader", "batches"), "x": ("x", "tokens", "a_"), "lengths": ("lengths", "lens", "b_"),
              "longest": ("longest", "max_len", "t_"), "loss": ("loss", "objective"), "step": ("train_step", "g")}

# -- a loss that works anchor by anchor but keeps pieces of different sizes, or a helper of varying size ----------
ANCHOR_MISS = (
    # the positives of each anchor kept whole: one piece per anchor, each its own length
    "d = torch.cdist($p, $p)\nsame = $t[:, None] == $t[None, :]\nkept = []\nfor i in range($p.size(0)):\n    kept.append(d[i][same[i]])\nreturn torch.cat(kept).mean()",
    "d = torch.cdist($p, $p)\nranked = []\nfor i in range(len($p)):\n    ranked.append(d[i][$t == $t[i]].sort()[0])\nreturn torch.cat(ranked).mean()",
    "d = torch.cdist($p, $p)\nkept = []\nfor i in range($p.size(0)):\n    pos = d[i][$t == $t[i]]\n    kept.append(pos.sort(descending=True)[0])\nreturn torch.cat(kept).mean()",
    "d = torch.cdist($p, $p)\nkept = []\nfor i in range($p.size(0)):\n    pos = d[i][$t == $t[i]]\n    kept.append(pos * 2)\nreturn torch.cat(kept).mean()",
    # a helper defined in the loss whose result differs in size per sample
    "def hits(a):\n    return a.nonzero()[:, 0].float()\n\nreturn torch.cat([hits(a) for a in $p.size(0) * [$p.sum(0)]]).mean()",
    "def hits(a, b):\n    return torch.nonzero(a > b).flatten().float()\n\nfound = []\nfor i in range($p.size(0)):\n    found.append(hits($p[i], 0.5))\nreturn torch.cat(found).sum()",
)

# deep supervision: the loss is handed a list of outputs, each against the whole batch of labels
LIST_LOSS_MAIN = LOSS_CLASS_MAIN.replace("$criterion($model($x), $y)", "$criterion([$model($x), $model($x.flip(3))], $y)")

LIST_LOSS = (
    "total = 0\nfor $f in $p:\n    total = total + F.cross_entropy($f, $t)\nreturn total / len($p) + 0.01 * torch.stack($p).pow(2).mean()",
    "return torch.stack([F.cross_entropy($f, $t) for $f in $p]).mean() + 0 * torch.cat($p).sum()",
)

ANCHOR_MISS_SLOTS = {"helper": ("triplet_loss", "hard_mining", "h"), "Loss": ("DeepLoss", "Objective", "L"),
                     "ann": ("", ": torch.Tensor"), "p": ("emb", "inputs", "a_", "u"), "t": ("targets", "labels", "b_"),
                     "f": ("f", "o", "out", "level"), **NAMES}

# -- transitions one at a time on purpose: a few picked to show, or one optimiser step per transition -----------
REPLAY_MISS = (
    "shown = []\nfor s, a, r, s2, d in random.sample(self.$memory, 4):\n    shown.append(self.$q(torch.tensor(s, device=device).unsqueeze(0)).argmax().item())\nprint(shown)",
    "for s, a, r, s2, d in $mb:\n    q = self.$q(torch.tensor(s, device=device).unsqueeze(0))[0, a]\n    step_loss = (q - r) ** 2\n    self.optimizer.zero_grad()\n    step_loss.backward()\n    self.optimizer.step()",
)

# -- a state carried through the loop's work, or weights trained per element (meta-learning tasks) ---------------
CARRIED_MISS = (
    # annealed sampling: each noise level refines the same images the model reads
    "for k, level in enumerate($levels):\n    $x = $x + 0.01 * level * $model($x) + torch.randn_like($x) * level",
    "for k, level in enumerate($levels):\n    grad = $model($x)\n    $x = $x + level * grad - 0.5 * level * $x",
    # one task per element: its own weights adapted by hand, then run
    "for i in range($x.size(0)):\n    weights = dict($model.named_parameters())\n    inner = F.mse_loss(torch.func.functional_call($model, weights, ($x[i],)), $x[i])\n    grads = torch.autograd.grad(inner, list(weights.values()))\n    fast = {k: w - 0.01 * g for (k, w), g in zip(weights.items(), grads)}\n    outer = outer + F.mse_loss(torch.func.functional_call($model, fast, ($x[i],)), $x[i])",
)

CARRIED_MAIN = """
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def $refine($model, $x, $levels):
    $levels = $levels.to($x.device)
    outer = 0
    $carried
    return $x, outer


$model = nn.Linear(16, 16).to(device)
for epoch in range(100):
    $refine($model, torch.randn(8, 16, device=device), torch.linspace(1.0, 0.01, 10, device=device))
"""

# -- a handful of samples picked by hand for a printout, made a tensor only after the loop ------------------------
PICKED_MAIN = (
    IMPORTS
    + """from nets import Net

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def $show($model, $xs):
    $picked = $pick
    $shown = []
    for $s in $picked:
        $shown.append($model($s.unsqueeze(0).to(device)).argmax().item())
    $picked = torch.stack($picked)
    print($shown, $picked.shape)


$model = Net().to(device)
$xs = torch.randn(64, 3, 32, 32)
for epoch in range(10):
    $show($model, $xs)
"""
)

PICK = ("[$xs[0], $xs[3], $xs[7]]", "list($xs[:4])", "[$xs[i] for i in (1, 5, 9)]")

SHAPES = [
    Shape(name="near-miss-outputs/function", files={"backbones.py": PYRAMID, "main.py": OUTPUTS_MAIN},
          slots={"outputs_miss": OUTPUTS_MISS, "Backbone": ("Backbone", "Pyramid", "Features", "Thing"),
                 "net": ("backbone", "net", "m", "encoder", "a"), "head": ("head", "fc", "proj", "b"),
                 "detector": ("detector", "model", "det", "c"), "feats": ("feats", "outputs", "z", "levels"),
                 "f": ("f", "o", "out", "item"), **NAMES},
          select=SELECT),
    Shape(name="near-miss-forward/other_file", files={"models.py": MODULE, "main.py": MODULE_MAIN},
          slots=MODULE_SLOTS, select=SELECT),
    Shape(name="near-miss-step/function", files={"main.py": STEP_MAIN},
          slots={"step_miss": STEP_MISS, **NAMES}, select=SELECT),
    Shape(name="near-miss-demo/script", files={"main.py": DEMO}, slots={"demo": DEMO_LOOPS, **NAMES}, select=SELECT),
    Shape(name="near-miss-anchor/function", files={"nets.py": NETS, "helpers.py": HELPER, "main.py": HELPER_MAIN + HELPER_CALLERS["step"]},
          slots={"helper_body": ANCHOR_MISS, **ANCHOR_MISS_SLOTS}, select=SELECT),
    Shape(name="near-miss-anchor/list_of_outputs", files={"nets.py": NETS, "losses.py": LOSS_CLASS, "main.py": LIST_LOSS_MAIN},
          slots={"helper_body": LIST_LOSS, **ANCHOR_MISS_SLOTS}, select=SELECT),
    Shape(name="near-miss-replay/method", files={"agent.py": REPLAY_AGENT.replace("        self.optimizer.zero_grad()\n        loss.backward()\n        self.optimizer.step()\n", ""), "main.py": REPLAY_MAIN},
          slots={"replay_loop": REPLAY_MISS, "draw": ("$mb = random.sample(self.$memory, self.$bs)",), "Agent": ("DQNAgent", "A"),
                 "q": ("q_net", "model", "f"), "q_target": ("target_net", "g"), "memory": ("memory", "buffer", "m"),
                 "bs": ("batch_size", "bs"), "mb": ("minibatch", "batch", "xs")}, select=SELECT),
    Shape(name="near-miss-carried/function", files={"main.py": CARRIED_MAIN},
          slots={"carried": CARRIED_MISS, "refine": ("refine", "anneal", "adapt", "f"), "model": ("model", "scorenet", "net", "m"),
                 "x": ("x", "x_mod", "images", "a_"), "levels": ("sigmas", "levels", "noise_levels", "b_")}, select=SELECT),
    Shape(name="near-miss-picked/function", files={"nets.py": NETS, "main.py": PICKED_MAIN},
          slots={"pick": PICK, "show": ("show", "preview", "f"), "model": ("model", "net", "m"), "xs": ("xs", "test_x", "a_"),
                 "picked": ("picked", "samples", "chosen"), "shown": ("shown", "preds", "out"), "s": ("s", "img", "x")},
          select=SELECT),
] + [Shape(name=f"near-miss-walk/{frame}", files=files, slots=WALK_SLOTS, select=SELECT) for frame, files in WALK_FRAMES.items()]

LIMIT = 24

# Shapes that still draw a finding on some spelling, and why.
XFAIL: dict[str, str] = {}


@pytest.mark.parametrize(
    "shape",
    [pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=XFAIL[s.name])) if s.name in XFAIL else s for s in SHAPES],
    ids=lambda s: s.name,
)
def test_near_misses_stay_silent_however_written(shape: Shape) -> None:
    failures = [report for choice in shape.choices(limit=LIMIT) if (report := check(shape, choice))]
    assert not failures, f"{len(failures)} of {LIMIT} variants differ; first:\n{failures[0]}"
