"""Per-sample loops whose header does not show a batch, and the newer per-box and per-element shapes."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.lint.api import lint_source

HEADER = """\
import torch
import torch.nn.functional as F
from PIL import Image
"""


def lines(code: str, source: str) -> list[int]:
    result = lint_source(HEADER + textwrap.dedent(source), "example.py", select=[code])
    assert result.error is None and not result.notes, (result.error, result.notes)
    return [f.line - HEADER.count("\n") for f in result.findings if f.code == code]


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("x.unsqueeze(0)", [3]),
        ("x[None]", [3]),
        ("x[None, ...].to(device)", [3]),
        ("x.view(1, -1)", [3]),
        ("torch.unsqueeze(x, 0)", [3]),
        ("torch.tensor([x])", [3]),
        ("torch.from_numpy(x).unsqueeze(0)", [3]),
        ("x", []),  # nothing says x is one sample: it may be a whole batch of a list of batches
        ("x.unsqueeze(1)", []),
        ("x.view(-1, 784)", []),
    ],
)
def test_tl401_element_made_a_batch_of_one(argument: str, expected: list[int]) -> None:
    source = f"""
    def predict(model, items, device):
        preds = []
        for x in items:
            preds.append(model({argument}))
        return preds
    """
    assert lines("TL401", source) == [n + 1 for n in expected]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("out = model(x[i : i + 1])", [4]),
        ("out = model(x[i].unsqueeze(0))", [4]),
        ("out = model(x[i])", []),
    ],
)
def test_tl401_range_over_a_value_of_unknown_kind(body: str, expected: list[int]) -> None:
    source = f"""
    def run(model, x):
        outs = []
        for i in range(x.shape[0]):
            {body}
            outs.append(out)
        return outs
    """
    assert lines("TL401", source) == expected


def test_tl401_elements_loaded_from_files_or_models_are_not_samples() -> None:
    source = """
    def from_files(model, paths, transform):
        preds = []
        for path in paths:
            img = transform(Image.open(path))
            preds.append(model(img.unsqueeze(0)))
        return preds

    def ensemble(models, x):
        return torch.stack([m(x.unsqueeze(0)) for m in models])

    def shown(model, samples):
        for s in samples:
            print(model(s.unsqueeze(0)))

    def decode(model, token, steps):
        outs = []
        for _ in range(steps):
            token = model(token.unsqueeze(0)).argmax(-1)
            outs.append(token)
        return outs
    """
    assert lines("TL401", source) == []


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        ("correct += (p.argmax() == t).item()", [4]),
        ("correct += int(p.argmax() == t)", [4]),
        ("correct += int(p == t)", []),  # Python numbers compared
        ("correct += (p.argmax(1) == t).sum().item()", []),  # a batch at a time
    ],
)
def test_tl401_one_comparison_read_as_a_number(count: str, expected: list[int]) -> None:
    source = f"""
    def accuracy(pred, target):
        correct = 0
        for p, t in zip(pred, target):
            {count}
        return correct
    """
    assert lines("TL401", source) == expected


@pytest.mark.parametrize(
    ("bound", "expected"),
    [("n", [5]), ("n_step", []), ("seq_len", []), ("T", []), ("num_steps", [])],
)
def test_tl401_counts_of_time_steps_are_not_samples(bound: str, expected: list[int]) -> None:
    source = f"""
    class Attention(torch.nn.Module):
        def forward(self, dec, enc_outputs):
            {bound} = enc_outputs.size(0)
            scores = torch.zeros({bound})
            for i in range({bound}):
                scores[i] = torch.dot(dec, enc_outputs[i])
            return scores
    """
    assert lines("TL401", source) == [n + 1 for n in expected]


@pytest.mark.parametrize(
    ("loop", "expected"),
    [
        ("for j in range(len(labels)):\n                total += criterion(outputs[j], labels[j])", [6]),
        ("for j in range(len(outputs)):\n                total += criterion(outputs[j], labels[j])", [6]),
        ("for j in range(len(outputs)):\n                total += criterion(outputs[j], labels)", []),
    ],
)
def test_tl401_labels_from_a_loader_indexed_with_a_batch(loop: str, expected: list[int]) -> None:
    source = f"""
    def validate(model, loader, criterion):
        total = 0
        for inputs, labels in loader:
            outputs = model(inputs)
            {loop}
        return total
    """
    source = source.replace("loader:", "torch.utils.data.DataLoader(loader):")
    assert lines("TL401", source) == expected


@pytest.mark.parametrize(
    ("lists", "after", "expected"),
    [
        ("log_probs, returns", "loss.backward()", [3]),
        ("log_probs, returns", "(loss / 2).backward()", [3]),
        ("log_probs, returns", "print(loss)", []),
        ("losses, weights", "loss.backward()", []),  # a weighted sum of a few task losses
    ],
)
def test_tl401_policy_gradient_summed_step_by_step(lists: str, after: str, expected: list[int]) -> None:
    a, b = lists.split(", ")
    source = f"""
    def update({lists}):
        loss = 0
        for x, y in zip({a}, {b}):
            loss = loss - x * y
        {after}
    """
    assert lines("TL401", source) == [n + 1 for n in expected]


SINGLE_IOU = """
def iou(a, b):
    w = (torch.min(a[2], b[2]) - torch.max(a[0], b[0])).clamp(min=0)
    h = (torch.min(a[3], b[3]) - torch.max(a[1], b[1])).clamp(min=0)
    return w * h
"""

MATRIX_IOU = """
def iou(a, b):
    lt = torch.max(a[:, None, :2], b[:, :2])
    rb = torch.min(a[:, None, 2:], b[:, 2:])
    return (rb - lt).clamp(min=0).prod(-1)
"""

HOST_IOU = """
def iou(a, b):
    return max(0, min(a[2], b[2]) - max(a[0], b[0]))
"""


@pytest.mark.parametrize(("helper", "reported"), [(SINGLE_IOU, True), (MATRIX_IOU, False), (HOST_IOU, False)])
def test_tl406_overlaps_pair_by_pair(helper: str, reported: bool) -> None:
    source = helper + """
def pairs(boxes1, boxes2):
    out = torch.zeros(len(boxes1), len(boxes2))
    for i in range(len(boxes1)):
        for j in range(len(boxes2)):
            out[i, j] = iou(boxes1[i], boxes2[j])
    return out
"""
    outer = source.splitlines().index("    for i in range(len(boxes1)):") + 1
    assert lines("TL406", source) == ([outer] if reported else [])


@pytest.mark.parametrize(
    ("values", "body", "expected"),
    [
        ("model(x.cuda()).argmax(1)", "out.append(p.item())", [4]),
        ("model(x.cuda()).argmax(1)", "n += p.item()", [4]),
        ("model(x.cuda()).argmax(1)", "if p.item() > 0:\n                n += 1", [4]),
        ("list(x)", "out.append(p.item())", []),
        ("model(x.cuda()).argmax(1)", "if p.item() > 0:\n                out.append(p)", []),
    ],
)
def test_tl407_loop_reads_a_tensor_back_element_by_element(values: str, body: str, expected: list[int]) -> None:
    source = f"""
    def read(model, x, out, n):
        values = {values}
        for p in values:
            {body}
        return out, n
    """
    assert lines("TL407", source) == expected


def test_tl401_chained_channel_groups_are_not_samples() -> None:
    source = """
    class Res2Block(torch.nn.Module):
        def forward(self, hidden_states):
            outputs = []
            for i, hidden_part in enumerate(torch.chunk(hidden_states, self.scale, dim=1)):
                if i == 0:
                    output_part = hidden_part
                elif i == 1:
                    output_part = self.blocks[i - 1](hidden_part)
                else:
                    output_part = self.blocks[i - 1](hidden_part + output_part)
                outputs.append(output_part)
            return torch.cat(outputs, dim=1)
    """
    assert lines("TL401", source) == []


@pytest.mark.parametrize(("element", "expected"), [("sample", [4]), ("frame", []), ("chunk", [])])
def test_tl401_elements_named_as_pieces_of_a_sequence(element: str, expected: list[int]) -> None:
    source = f"""
    class Decoder(torch.nn.Module):
        def forward(self, codes: torch.Tensor):
            return torch.stack([self.decoder({element}) for {element} in codes])
    """
    assert lines("TL401", source) == expected


@pytest.mark.parametrize(
    ("dets", "body", "expected"),
    [
        ("model(x.cuda())[0]", "print(int(det[0]), det[4].item())", [4]),
        ("model(x.cuda())[0]", "print(det[4].cpu().item())", [4]),
        ("model(x.cuda())[0].cpu()", "print(int(det[0]), det[4].item())", []),
        ("model(x.cuda())[0].tolist()", "print(int(det[0]), det[4])", []),
        ("model(x.cuda())[0]", "print(int(det.shape[0]))", []),
        ("model(x.cuda())[0]", "if det[4].item() > 0.5:\n                break", []),
    ],
)
def test_tl407_rows_of_a_device_tensor_read_element_by_element(dets: str, body: str, expected: list[int]) -> None:
    source = f"""
    def show(model, x):
        dets = {dets}
        for det in dets:
            {body}

    def run(model, loader):
        for x in loader:
            show(model, x)
    """
    assert lines("TL407", source) == expected


@pytest.mark.parametrize(("bound", "expected"), [("len(out)", [4]), ("out.size(0)", [4]), ("out.shape[0]", [4]), ("n", [])])
def test_tl407_rows_read_by_index(bound: str, expected: list[int]) -> None:
    source = f"""
    def show(model, x, n):
        out = model(x.cuda())
        for i in range({bound}):
            print(out[i, 4].item(), int(out[i][0]))

    def run(model, loader):
        for x in loader:
            show(model, x, 8)
    """
    assert lines("TL407", source) == expected


@pytest.mark.parametrize(
    ("test", "expected"),
    [("order.numel()", [4]), ("len(order)", [4]), ("order.shape[0] > 0", [4]), ("order.numel() != 0", [4]),
     ("order.numel() > 1", []), ("keep_going", [])],
)
def test_tl406_greedy_suppression_loop_tests(test: str, expected: list[int]) -> None:
    source = f"""
    def suppress(boxes, order, t, keep_going):
        keep = []
        while {test}:
            keep.append(order[0])
            ious = box_iou(boxes[order[:1]], boxes[order[1:]])[0]
            order = order[1:][ious <= t]
        return keep
    """
    assert lines("TL406", source) == expected


@pytest.mark.parametrize(("caller", "expected"), [("for x in loader:\n            show(model, x)", [4]), ("show(model, x)", [])])
def test_tl407_rows_read_once_are_noise(caller: str, expected: list[int]) -> None:
    source = f"""
    def show(model, x):
        dets = model(x.cuda())[0]
        for det in dets:
            print(int(det[0]), det[4].item())

    def main(model, loader, x):
        {caller}
    """
    assert lines("TL407", source) == expected


@pytest.mark.parametrize(
    ("picked", "expected"),
    [
        ("d[i][same[i]].max()", [8]),
        ("torch.min(d[i][same[i] == 0])", [8]),
        ("d[i][labels != labels[i]].mean()", [8]),
        ("d[i][same[i] == 0]", []),  # the negatives of each anchor kept whole: one piece per anchor, sizes differ
        ("d[i][same[i] == 0].sort()[0]", []),
        ("(d[i][same[i] == 0] - 0.3).clamp(min=0).mean()", [8]),  # element-wise math, then one value
        ("d[i][same[i] == 0].exp() * 2", []),
    ],
)
def test_tl401_masked_selection_reduced_per_anchor(picked: str, expected: list[int]) -> None:
    source = f"""
    class HardTriplet(torch.nn.Module):
        def forward(self, emb, labels):
            n = emb.size(0)
            d = torch.cdist(emb, emb)
            same = labels[:, None] == labels[None, :]
            picked = []
            for i in range(n):
                picked.append({picked})
            return torch.cat(picked)
    """
    assert lines("TL401", source) == expected


@pytest.mark.parametrize(
    ("helper", "expected"),
    [
        ("return F.cross_entropy(a, b, reduction='none').topk(4)[0].mean()", [7]),
        ("return torch.nonzero(a.argmax(0) == b).flatten().float()", []),  # a result of its own size per sample
        ("return a", []),  # nothing computed
    ],
)
def test_tl401_helper_defined_inside_the_loss(helper: str, expected: list[int]) -> None:
    source = f"""
    def bootstrapped_loss(input, target):
        batch_size = input.size()[0]
        def single(a, b):
            {helper}
        total = 0.0
        for i in range(batch_size):
            total += single(input[i].unsqueeze(0), target[i].unsqueeze(0))
        return total / batch_size
    """
    assert lines("TL401", source) == expected


@pytest.mark.parametrize(
    ("use", "expected"),
    [
        ("sim = emb @ emb.t()", [6]),  # a product of matrices: one tensor whose rows are the samples
        ("sim = torch.cdist(emb, emb)", [6]),
        ("sim = torch.stack(emb)", []),  # a list of tensors stacked: its parts may be levels, not samples
    ],
)
def test_tl401_rows_of_a_similarity_matrix_summed_per_anchor(use: str, expected: list[int]) -> None:
    source = f"""
    class Pull(torch.nn.Module):
        def forward(self, emb, labels):
            {use}
            total = 0
            for i, row in enumerate(sim):
                total = total + row[labels == labels[i]].mean() - row[labels != labels[i]].mean()
            return total
    """
    assert lines("TL401", source) == expected


@pytest.mark.parametrize(
    ("uses", "expected"),
    [
        ("total = total - torch.log(pos.exp().sum() / sim[i].exp().sum())", [6]),
        ("total = total + pos.max() - pos.min()", [6]),
        ("total = total + pos.max() + pos.sort()[0][-1]", []),  # a read that is no reduction (`sort`) is not followed
    ],
)
def test_tl401_masked_selection_named_then_reduced(uses: str, expected: list[int]) -> None:
    source = f"""
    class Contrast(torch.nn.Module):
        def forward(self, emb, labels):
            sim = emb @ emb.t()
            total = 0
            for i in range(emb.size(0)):
                pos = sim[i, labels == labels[i]]
                {uses}
            return total
    """
    assert lines("TL401", source) == expected


@pytest.mark.parametrize(
    ("update", "expected"),
    [
        ("total = total + self.fc(x[i]).sum() - 0.1 * x[i].sum()", [5]),  # a running sum of per-sample work
        ("total = total - self.fc(x[i]).mean()", [5]),
    ],
)
def test_tl401_running_sum_of_several_terms(update: str, expected: list[int]) -> None:
    source = f"""
    class Head(torch.nn.Module):
        def forward(self, x):
            total = 0
            for i in range(x.size(0)):
                {update}
            return total
    """
    assert lines("TL401", source) == expected


def test_tl401_state_read_before_its_running_update_is_carried() -> None:
    source = """
    class Refine(torch.nn.Module):
        def forward(self, x):
            h = torch.zeros_like(x[0])
            for i in range(x.size(0)):
                delta = self.fc(h)
                h = h + delta * x[i] - 0.1 * x[i]
            return h
    """
    assert lines("TL401", source) == []


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ("outer = outer + F.cross_entropy(self.net(xs[i], fast), ys[i])", []),  # each task runs its own weights
        ("outer = outer + F.cross_entropy(self.net(xs[i]), ys[i]) + grads[0].sum()", [5]),  # per-sample gradients only
    ],
)
def test_tl401_tasks_that_train_their_own_weights(run: str, expected: list[int]) -> None:
    source = f"""
    class Meta(torch.nn.Module):
        def forward(self, xs, ys):
            outer = 0
            for i in range(xs.size(0)):
                grads = torch.autograd.grad(F.cross_entropy(self.net(xs[i]), ys[i]), self.net.parameters())
                fast = [w - 0.01 * g for w, g in zip(self.net.parameters(), grads)]
                {run}
            return outer
    """
    assert lines("TL401", source) == expected
