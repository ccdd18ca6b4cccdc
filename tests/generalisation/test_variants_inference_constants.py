"""Family B: a network held in an upper-case module global (`MODEL`, `NET`, `SEG_MODEL`), as serving code and
scripts write it, is a network like `model`: an evaluation helper that runs it with autograd on for every
request or every file is reported, however the global is named, loaded and called. Near misses: the helper
runs under no-grad, the output is trained on, or the upper-case name is a class of the file (`VGG(4)` builds
a network, it runs none)."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

SELECT = ("TL301", "TL305")

HEAD = """
import glob
import torch
import torch.nn as nn
import torch.nn.functional as F
from flask import Flask, request, jsonify

app = Flask(__name__)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
$GLOBAL = None


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc(x)


def encode(text):
    codes = [float(ord(c) % 7) for c in text[:16]]
    return torch.tensor([codes + [0.0] * (16 - len(codes))]).to(DEVICE)
"""

HELPER = (
    """
def $fname(text):  $mark
    $out = $GLOBAL(encode(text))
    return torch.sigmoid($out).cpu().detach().numpy()[0][0]
""",
    """
def $fname(text):  $mark
    ids = encode(text)
    $out = $GLOBAL.forward(ids)
    return $out.softmax(1).argmax(1).item()
""",
    """
def $fname(text):  $mark
    $out = $GLOBAL(ids=encode(text))
    return $out.tolist()
""",
)

LOAD = (
    "$GLOBAL = Net()\n$GLOBAL.load_state_dict(torch.load('model.bin'))\n$GLOBAL.to(DEVICE)\n$GLOBAL.eval()",
    "$GLOBAL = Net().to(DEVICE).eval()",
    "$GLOBAL = torch.load('model.pt', map_location=DEVICE, weights_only=False)",
)

FRAMES = {
    "route": """
$helper


@app.route("/predict")
def predict():
    return jsonify({"score": str($fname(request.args.get("sentence")))})


if __name__ == "__main__":
    $load
    app.run(host="127.0.0.1", port=9999)
""",
    "loop": """
$helper


if __name__ == "__main__":
    $load
    for path in glob.glob("reviews/*.txt"):
        print(path, $fname(open(path).read()))
""",
}

SLOTS = {
    "GLOBAL": ("MODEL", "NET", "SEG_MODEL", "CLASSIFIER"),
    "helper": HELPER,
    "load": LOAD,
    "out": ("outputs", "logits", "o"),
    "mark": ("# expect: TL301",),
}

SHAPES = [
    Shape(name=f"upper-case-global/{frame}", files={"app.py": HEAD + body},
          slots={**SLOTS, "fname": ("sentence_prediction", "predict_one", "infer")}, select=SELECT)
    for frame, body in FRAMES.items()
] + [
    # any name runs repeatedly when a loop calls it
    Shape(name="upper-case-global/loop-any-name", files={"app.py": HEAD + FRAMES["loop"]},
          slots={**SLOTS, "fname": ("score_text", "classify", "run")}, select=SELECT),
]

NEAR_MISS_HELPER = (
    """
@torch.no_grad()
def $fname(text):
    $out = $GLOBAL(encode(text))
    return torch.sigmoid($out).cpu().numpy()[0][0]
""",
    """
def $fname(text):
    with torch.no_grad():
        $out = $GLOBAL(encode(text))
    return $out.argmax(1).item()
""",
    """
def $fname(text):
    $out = $GLOBAL(encode(text))
    loss = F.cross_entropy($out, torch.tensor([1], device=DEVICE))
    OPT.zero_grad()
    loss.backward()
    OPT.step()
    return loss.item()
""",
)

NEAR_MISS_FRAME = """
$helper


if __name__ == "__main__":
    $load
    OPT = torch.optim.SGD($GLOBAL.parameters(), lr=0.1)
    for path in glob.glob("reviews/*.txt"):
        print(path, $fname(open(path).read()))
"""

# An upper-case class of the file, built in a loop: a constructor, not a forward pass.
CLASS_BUILT = """
import torch
import torch.nn as nn


class $CLASS(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, 2)

    def forward(self, x):
        return self.fc(x)


def $fname(sizes):
    nets = []
    for n in sizes:
        nets.append($CLASS(n).cuda())
    return nets
"""

NEGATIVE_SHAPES = [
    Shape(name="upper-case-global/near-miss", files={"app.py": HEAD + NEAR_MISS_FRAME},
          slots={**SLOTS, "helper": NEAR_MISS_HELPER, "fname": ("sentence_prediction", "predict_one", "classify")},
          select=SELECT),
    Shape(name="upper-case-class/built-in-loop", files={"nets.py": CLASS_BUILT},
          slots={"CLASS": ("VGG", "UNET", "MLP"), "fname": ("predict_models", "evaluate_sizes", "build")},
          select=SELECT),
]

LIMIT = 10


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_network_in_upper_case_global_is_found_however_written(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message


@pytest.mark.parametrize("shape", NEGATIVE_SHAPES, ids=lambda s: s.name)
def test_upper_case_near_misses_stay_silent(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
