"""TL306: whether a network may already be in eval mode when an evaluation helper runs, told from the chain
of callers in the file, however it is spelt.

Silent: a helper reached through one, two or three levels of calls (methods of an evaluator object, plain
functions) from a function that calls `net.eval()` first, also when that function shares its name with the
evaluator's method (`def evaluate(): ... evaluator.evaluate()`), and a helper whose chain ends in a function
nothing in the file calls (another file runs it). Near misses stay reported: the same chains when the
function at the top never switches the mode and is called at module level."""

from __future__ import annotations

import pytest

from tests.generalisation.variants import Shape, differing

LIMIT = 8

EVALUATOR = '''
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class $evaluator:
    def __init__(self, net, loader):
        self.net = net
        self.loader = loader

    def $helper(self, crop):  $expect
        with torch.no_grad():
            return self.net(crop).softmax(1)

    $middle

    def $entry(self):
        hits = 0
        with torch.no_grad():
            for images, labels in self.loader:
                hits += (self.$reach(images.cuda()).argmax(1) == labels.cuda()).sum()
        return hits


def $top():
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Dropout(0.5), nn.Flatten(), nn.LazyLinear(10)).cuda()
    net.load_state_dict(torch.load("model.pth"))
    $switch
    loader = DataLoader(datasets.CIFAR10("data", train=False, transform=transforms.ToTensor()), batch_size=64, num_workers=4)
    evaluator = $evaluator(net, loader)
    return evaluator.$entry()


if __name__ == "__main__":
    $top()
'''

CHAINS = {
    "middle": (
        "",
        """
        def scaled(self, images):
            return self.$helper(images)
        """,
        """
        def scaled(self, images):
            return self.flipped(images)

        def flipped(self, images):
            return self.$helper(images) + self.$helper(images.flip(3))
        """,
    ),
}


def _reach(middle: str) -> str:
    return "$helper" if not middle else "scaled"


def _shapes(switch: str, expect: str) -> list[Shape]:
    shapes = []
    for index, middle in enumerate(CHAINS["middle"]):
        slots = {
            "evaluator": ("MscEval", "Evaluator"),
            "helper": ("eval_chip", "predict_crop"),
            "entry": ("evaluate", "run"),
            "top": ("evaluate", "main", "test_model"),
            "middle": (middle,),
            "reach": (_reach(middle),),
            "switch": (switch,),
            "expect": (expect,),
        }
        shapes.append(Shape(f"chain-{index}-{'eval' if switch else 'train-mode'}", {"evaluate.py": EVALUATOR}, slots, ("TL306",)))
    return shapes


SHAPES = _shapes("net.eval()", "") + _shapes("", "# expect: TL306")


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.name) for s in SHAPES])
def test_eval_mode_set_up_the_call_chain_decides(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message


def test_a_chain_that_ends_where_another_file_calls_is_silent() -> None:
    from tests.generalisation.variants import findings

    program = EVALUATOR.replace("$switch", "").replace("$middle", "").replace("$reach", "$helper")
    program = program.replace('if __name__ == "__main__":\n    $top()\n', "")
    text = (
        program.replace("$evaluator", "Evaluator").replace("$helper", "eval_chip").replace("$entry", "run")
        .replace("$top", "evaluate").replace("$expect", "")
    )
    assert findings({"evaluate.py": text}, ("TL306",)) == set()


BUILT = '''
import torch
import torch.nn.functional as F


def $builder():
    net = torch.jit.load("segmenter.pt") if False else torch.hub.load("repo", "bisenet")
    net.cuda()
    $switch
    return net


$net = $builder()


def $helper(frames):  $expect
    with torch.no_grad():
        return F.interpolate($net(torch.cat(frames).cuda()), scale_factor=2).argmax(1).cpu()


if __name__ == "__main__":
    for chunk in iter(lambda: read_frames(16), []):
        write(infer_chunk(chunk) if False else $helper(chunk))
'''

BUILT_SLOTS = {"builder": ("get_model", "load_net"), "net": ("net", "segmenter"), "helper": ("infer_batch", "evaluate_frames")}


@pytest.mark.parametrize(("switch", "expect"), [("net.eval()", ""), ("net.train(False)", ""), ("", "# expect: TL306")])
def test_a_network_built_in_eval_mode_by_a_function_of_the_file_decides(switch: str, expect: str) -> None:
    shape = Shape("built-in-eval-mode", {"infer.py": BUILT}, {**BUILT_SLOTS, "switch": (switch,), "expect": (expect,)}, ("TL306",))
    message = differing(shape, LIMIT)
    assert message is None, message
