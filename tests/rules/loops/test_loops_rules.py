"""Decision edges of the vectorisation rules TL401-TL407."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.lint.api import lint_source


def lines(code: str, source: str) -> list[int]:
    result = lint_source(textwrap.dedent(source), "example.py", select=[code])
    assert result.error is None and not result.notes, (result.error, result.notes)
    return [f.line for f in result.findings if f.code == code]


def fixed(code: str, source: str) -> str | None:
    return lint_source(textwrap.dedent(source), "example.py", select=[code], unsafe_fixes=True).fixed_text


# -- TL401 per-sample-loop -------------------------------------------------------------------------
HEADER = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
"""


@pytest.mark.parametrize(
    "bound",
    ["x.size(0)", "x.shape[0]", "x.size()[0]", "len(x)", "n", "bs"],
)
def test_tl401_range_bounds_over_a_forward_input(bound: str) -> None:
    source = HEADER + f"""
class M(nn.Module):
    def forward(self, x):
        n, c = x.shape
        bs = x.size(0)
        out = []
        for i in range({bound}):
            out.append(self.fc(x[i]))
        return torch.stack(out)
"""
    assert lines("TL401", source) == [10]


def test_tl401_needs_torch_import_resolution_for_functions() -> None:
    source = HEADER + """
def my_loss(logits, targets):
    total = 0
    for i in range(logits.size(0)):
        total = total + F.cross_entropy(logits[i], targets[i])
    return total
"""
    assert lines("TL401", source) == [7]


def test_tl401_loader_values_and_len_of_batch() -> None:
    source = HEADER + """
from torch.utils.data import DataLoader as DL
train = DL(ds)
for batch in train:
    batch = batch.cuda()
    outs = [net(batch[i]) for i in range(len(batch))]
    stacked = torch.stack(outs)
"""
    assert lines("TL401", source) == [9]


def test_tl401_silent_without_evidence_of_a_batch() -> None:
    source = HEADER + """
def helper(x, model):
    out = []
    for i in range(x.shape[0]):  # `helper` and `x` say nothing about batches; an array has a shape too
        out.append(model(x[i]))
    return out
"""
    assert lines("TL401", source) == []


@pytest.mark.parametrize(
    "body",
    [
        "h = self.cell(x[i], h)\n            out.append(h)",  # recurrence
        "out.append(self.layers[i](x))",  # a loop over layers
        "out.append(self.fc(x[i, : lengths[i]]))",  # per-sample length
        "out.append(self.fc(x[i][x[i] > 0]))",  # boolean mask
        "out.append(self.fc(x[i]).nonzero())",  # varying size
        "print(x[i].sum())",  # nothing collected
        "out.append(float(x[i].mean()))",  # cheap math turned into a Python number
        "out.append({'row': self.fc(x[i])})",  # a record
        "if x[i].sum() > 0:\n                out.append(self.fc(x[i]))",  # branch on a sample's values
        "out.append(self.fc(x[i]))\n            break",
    ],
)
def test_tl401_silent_bodies(body: str) -> None:
    source = HEADER + f"""
class M(nn.Module):
    def forward(self, x, h, lengths):
        out = []
        for i in range(x.size(0)):
            {body}
        return out
"""
    assert lines("TL401", source) == []


def test_tl401_counting_loop_and_row_store() -> None:
    source = HEADER + """
def evaluate(model, loader):
    correct = 0
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        pred = model(x).argmax(1)
        for i in range(y.size(0)):
            if pred[i] == y[i]:
                correct += 1
        scores = torch.zeros(x.size(0))
        for i in range(x.size(0)):
            scores[i] = (x[i] * x[i]).sum()
    return correct
"""
    assert lines("TL401", source) == [10, 14]


def test_tl401_strided_range_is_micro_batching() -> None:
    source = HEADER + """
class M(nn.Module):
    def forward(self, x):
        return torch.cat([self.fc(x[i:i + 8]) for i in range(0, x.size(0), 8)])
"""
    assert lines("TL401", source) == []


def test_tl401_iterating_a_list_parameter_is_not_a_batch() -> None:
    source = HEADER + """
from typing import List
class M(nn.Module):
    def forward(self, feats: List[torch.Tensor], x: torch.Tensor):
        a = torch.cat([self.fc(f) for f in feats])
        b = torch.cat([self.fc(s) for s in x])
        return a, b
"""
    assert lines("TL401", source) == [9]


def test_tl401_zipped_batches() -> None:
    # `for c in zip(x, y)` / `enumerate(zip(...))`: a sample of each batch; `c[k]` counts only for batches
    source = HEADER + """
def pair_loss(input, target):
    n = input.size(0)
    total = 0
    for i, c in enumerate(zip(input, target)):
        total += F.mse_loss(c[0], c[1])
    for c in zip(input, target):
        total += F.mse_loss(c[0], c[0])
    for i, c in enumerate(zip(input, target)):
        total += F.mse_loss(c[1], c[1])  # `target` may be a list: nothing says it is a batch
    return total / n
"""
    assert lines("TL401", source) == [8, 10]
    both = source.replace("n = input.size(0)", "n = input.size(0) + target.size(0)")
    assert lines("TL401", both) == [8, 10, 12]


def test_tl401_docstring_and_helpers() -> None:
    source = HEADER + """
def coeff(a, b):
    return torch.dot(a.view(-1), b.view(-1))

def nonzero_count(a, b):
    return torch.nonzero(a * b)

def score(input, target):
    \"\"\"Score of a batch\"\"\"
    if input.shape[0] == 0:  # a shape, which an array has too: the docstring tells a batch
        pass
    s = 0
    for i, c in enumerate(zip(input, target)):
        s = s + coeff(c[0], c[1])
    for i, c in enumerate(zip(input, target)):
        s = s + nonzero_count(c[0], c[1])  # varying size
    for i, c in enumerate(zip(input, target)):
        s = s + unknown(c[0], c[1])  # not a function of this file
    return s
"""
    assert lines("TL401", source) == [16]
    no_doc = source.replace('\"\"\"Score of a batch\"\"\"', "pass")
    assert lines("TL401", no_doc) == []


def test_tl401_noqa() -> None:
    source = HEADER + """
class M(nn.Module):
    def forward(self, x):
        return torch.stack([self.fc(x[i]) for i in range(x.size(0))])  # noqa: TL401
"""
    assert lines("TL401", source) == []


# -- TL402 cat-in-loop ------------------------------------------------------------------------------
def test_tl402_alias_imports_and_reads() -> None:
    source = """
    import torch as th
    import numpy as onp
    acc = th.zeros(0)
    arr = onp.zeros(0)
    for chunk in chunks:
        acc = th.cat([acc, chunk])
        arr = onp.append(arr, chunk.numpy())
    log = th.zeros(0)
    for chunk in chunks:
        log = th.cat([log, chunk])
        print(log.shape)  # the growing tensor is read every iteration
    """
    assert lines("TL402", source) == [7, 8]


def test_tl402_torch_without_import_is_torch() -> None:
    # a snippet, or torch brought by a star import
    assert lines("TL402", "for c in cs:\n    acc = torch.cat([acc, c])\n") == [2]
    assert lines("TL402", "torch = load()\nfor c in cs:\n    acc = torch.cat([acc, c])\n") == []


def test_tl402_conditional_expression() -> None:
    source = """
    import torch
    out = None
    for x in loader:
        y = model(x)
        out = y if out is None else torch.cat([out, y])
    both = None
    for x in loader:
        both = torch.cat([both, x]) if both is not None else x
        both = torch.cat([both, x]) if both is not None else x  # a second grow of the same accumulator
    reread = None
    for x in loader:
        reread = x if reread is None else torch.cat([reread, model(reread)])  # read by the model: needed whole
    """
    assert lines("TL402", source) == [6, 9, 10]


# -- TL403 tensor-from-tensors ------------------------------------------------------------------------
def test_tl403_fix_keeps_parentheses_and_skips_requires_grad() -> None:
    source = """
    import torch
    def build():
        a = torch.ones(3)
        b = torch.tensor(a + 1)
        c = torch.tensor(a, requires_grad=True)
        d = torch.tensor(a, device="cuda")
    """
    assert lines("TL403", source) == [5, 6, 7]
    assert fixed("TL403", source) == textwrap.dedent(
        """
    import torch
    def build():
        a = torch.ones(3)
        b = (a + 1).detach().clone()
        c = torch.tensor(a, requires_grad=True)
        d = a.detach().to(device="cuda", copy=True)
    """
    )


def test_tl403_silent_at_the_top_level_outside_loops() -> None:
    source = """
    import torch
    losses = []
    for epoch in range(3):
        losses.append(torch.ones(1))
        so_far = torch.tensor(losses)
    curve = torch.tensor(losses)
    """
    assert lines("TL403", source) == [6]


def test_tl403_python_numbers_and_unknown_values_stay_silent() -> None:
    source = """
    import torch
    def f(values, model, x):
        items = []
        for v in values:
            items.append(model(v).item())
        return torch.tensor(items), torch.tensor(values), torch.tensor([x, x])
    """
    assert lines("TL403", source) == []


# -- TL404 log-of-softmax -------------------------------------------------------------------------------
def test_tl404_fix_needs_dim() -> None:
    source = """
    import torch
    import torch.nn.functional as F
    from torch.nn.functional import softmax
    a = torch.log(F.softmax(x, 1))
    b = torch.log(F.softmax(x))
    c = torch.log(softmax(x, dim=1))
    """
    assert lines("TL404", source) == [5, 6, 7]
    assert fixed("TL404", source) == textwrap.dedent(
        """
    import torch
    import torch.nn.functional as F
    from torch.nn.functional import softmax
    a = F.log_softmax(x, 1)
    b = torch.log(F.softmax(x))
    c = torch.log(softmax(x, dim=1))
    """
    )


def test_tl404_other_modules_are_not_torch() -> None:
    source = """
    import numpy as np
    import scipy.special as sp
    a = np.log(sp.softmax(x, axis=1))
    """
    assert lines("TL404", source) == []


# -- TL405 log-one-plus -----------------------------------------------------------------------------------
def test_tl405_fix_and_softplus_message() -> None:
    source = """
    import torch
    a = torch.log(1 + torch.exp(x))
    b = (x * y + 1).log()
    """
    result = lint_source(textwrap.dedent(source), "example.py", select=["TL405"])
    assert [f.line for f in result.findings] == [3, 4]
    assert "softplus" in result.findings[0].message
    assert fixed("TL405", source) == textwrap.dedent(
        """
    import torch
    a = torch.log1p(torch.exp(x))
    b = (x * y).log1p()
    """
    )


def test_tl405_math_and_shadowed_log() -> None:
    source = """
    import math
    import torch
    from torch import log
    a = math.log(1 + x)
    b = log(1 + x)  # resolved to torch.log: reported, but no fix (log1p is not imported)
    """
    result = lint_source(textwrap.dedent(source), "example.py", select=["TL405"], unsafe_fixes=True)
    assert [f.line for f in result.findings] == [6]
    assert result.findings[0].fix is None


# -- TL401: batches beyond forward() and loaders ---------------------------------------------------------
def test_tl401_batch_size_of_a_sequence_first_input() -> None:
    source = HEADER + """
class Attn(nn.Module):
    def forward(self, hidden, enc):
        this_batch_size = enc.size(1)
        steps = enc.size(0)
        out = torch.zeros(this_batch_size, steps)
        for b in range(this_batch_size):
            for i in range(steps):
                out[b, i] = self.score(hidden[:, b], enc[i, b])
        return out

    def score(self, h, e):
        return h.dot(e)
"""
    assert lines("TL401", source) == [10]  # the outer loop only: the inner one is part of the same finding


def test_tl401_size_past_first_dimension_needs_a_batch_size_name() -> None:
    source = HEADER + """
def corners(p1: torch.Tensor, p2):
    rows = []
    for i in range(p1.shape[1]):
        rows.append(p2[:, i] * p1[:, i])
    return torch.stack(rows)
"""
    assert lines("TL401", source) == []


@pytest.mark.parametrize(
    ("binding", "expected"),
    [("x: torch.Tensor", [7]), ("x", [])],
)
def test_tl401_parameter_annotated_as_tensor(binding: str, expected: list[int]) -> None:
    source = HEADER + f"""
def helper({binding}, model):
    out = []
    for i in range(x.shape[0]):  # `x.size(0)` would show a tensor by itself
        out.append(model(x[i]))
    return out
"""
    assert lines("TL401", source) == expected


@pytest.mark.parametrize(("passed", "expected"), [("torch.randn(4, 8)", [7]), ("[a, b]", [])])
def test_tl401_parameter_callers_pass_a_tensor_to(passed: str, expected: list[int]) -> None:
    source = HEADER + f"""
def helper(x, model):
    out = []
    for i in range(len(x)):
        out.append(model(x[i]))
    return out

def main(model, a, b):
    data = {passed}
    return helper(data, model)
"""
    assert lines("TL401", source) == expected


def test_tl401_torch_op_output_is_a_batch() -> None:
    source = HEADER + """
def pairwise(points, centers):
    d = torch.cdist(points, centers)
    rows = []
    for i in range(d.size(0)):
        rows.append(F.softmax(d[i], dim=0))
    return torch.stack(rows)
"""
    assert lines("TL401", source) == [8]


@pytest.mark.parametrize(
    ("body", "expected"),
    [("scores.append(model.predict(seqs[i]))", [7]), ("scores.append(seqs[i] * 2)", [])],
)
def test_tl401_rows_of_a_matrix_need_a_model_per_row(body: str, expected: list[int]) -> None:
    source = f"""
import numpy as np

def evaluate(model, test):
    seqs = test.sequences[:, :-1]
    scores = []
    for i in range(len(seqs)):
        {body}
    return np.array(scores)
"""
    assert lines("TL401", source) == expected


@pytest.mark.parametrize(
    ("after", "expected"),
    [("return torch.cat(losses).sum()", [8]), ("return losses", [])],
)
def test_tl401_elementwise_math_over_a_list_of_tensors(after: str, expected: list[int]) -> None:
    source = HEADER + f"""
class Agent:
    def loss(self, returns):
        losses = []
        for lp, r in zip(self.log_probs, returns):
            losses.append(-lp * r)
        {after}
"""
    assert lines("TL401", source) == expected


# -- TL406 per-box-loop ------------------------------------------------------------------------------------
NMS_LOOP = """
import torch

def suppress(x1, x2, scores, t):
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(i)
        lo = x1[order[1:]].clamp(min=x1[i])
        hi = x2[order[1:]].clamp(max=x2[i])
        overlap = (hi - lo).clamp(min=0)
        order = order[1:][{keep_test}]
    return keep
"""


@pytest.mark.parametrize(("keep_test", "expected"), [("overlap <= t", [7]), ("1:", [])])
def test_tl406_greedy_suppression_rebinds_candidates_to_a_subset(keep_test: str, expected: list[int]) -> None:
    assert lines("TL406", NMS_LOOP.format(keep_test=keep_test)) == expected


@pytest.mark.parametrize(("call", "expected"), [("nms", [6]), ("batched_nms", [])])
def test_tl406_suppression_once_per_class(call: str, expected: list[int]) -> None:
    source = f"""
import torch
from torchvision.ops import nms, batched_nms

def per_class(boxes, scores, num_classes):
    for c in range(num_classes):
        keep = {call}(boxes[c], scores[c], 0.5)
    return keep
"""
    assert lines("TL406", source) == expected


@pytest.mark.parametrize(("resize", "expected"), [("F.interpolate(crop, size=(24, 24))", [6]), ("crop.resize((24, 24))", [])])
def test_tl406_crops_resized_with_torch(resize: str, expected: list[int]) -> None:
    source = f"""
import torch
import torch.nn.functional as F

def crops(img, y, ey, x, ex, out):
    for k in range(len(y)):
        crop = img[:, :, y[k]:ey[k], x[k]:ex[k]]
        out.append({resize})
"""
    assert lines("TL406", source) == expected


def test_tl406_silent_without_torch() -> None:
    source = NMS_LOOP.format(keep_test="overlap <= t").replace("import torch", "import mxnet")
    assert lines("TL406", source) == []


# -- TL407 per-element-tensor ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("element", "expected"),
    [
        ("torch.tensor(s).float().to(device)", [5]),
        ("torch.as_tensor(s).cuda()", [5]),
        ("torch.tensor(s).float()", []),
        ("torch.tensor(s).to(torch.float32)", []),
    ],
)
def test_tl407_element_built_and_moved_to_the_device(element: str, expected: list[int]) -> None:
    source = f"""
import torch
device = torch.device("cuda")
def states(all_states):
    return torch.stack([{element} for s in all_states])
"""
    assert lines("TL407", source) == expected


@pytest.mark.parametrize(
    ("source_of_preds", "expected"),
    [("model(x.cuda()).argmax(1)", [5]), ("[1, 2, 3]", [])],
)
def test_tl407_device_tensor_read_back_per_element(source_of_preds: str, expected: list[int]) -> None:
    source = f"""
import torch
def labels(model, x):
    preds = {source_of_preds}
    return [p.item() for p in preds]
"""
    assert lines("TL407", source) == expected
