"""Host reads that the step needs by nature, and one finding per sync of a helper."""

from __future__ import annotations

from lint_testing import found

SYNC = ["TL201", "TL202", "TL203", "TL204", "TL205", "TL206", "TL207"]


def _lines(source: str, select: list[str] = SYNC) -> list[tuple[int, str]]:
    return found(source, select, path="<string>.py")


TRAIN = """
import torch
def train(model, loader, optimizer, args):
    for x, y in loader:
        out = model(x.cuda())
        loss = (out - y.cuda()).pow(2).mean()
        loss.backward()
        optimizer.step()
        {line}
"""


def _in_loop(line: str) -> list[str]:
    return [code for _, code in _lines(TRAIN.format(line=line))]


def test_images_written_to_files_per_batch_are_not_reported() -> None:
    source = """
    import numpy as np
    import torch
    from PIL import Image
    def save_predictions(model, loader):
        with torch.no_grad():
            for i, x in enumerate(loader):
                out = model(x.cuda())
                img = out[0].permute(1, 2, 0).cpu().numpy()
                Image.fromarray((img * 255).astype(np.uint8)).save(f"{i}.png")
                np.save(f"mask_{i}.npy", out.argmax(1).cpu().numpy())
    """
    assert _lines(source) == []


def test_outputs_gathered_per_batch_are_still_reported() -> None:
    source = """
    import torch
    def predict(model, loader):
        preds = []
        with torch.no_grad():
            for x in loader:
                out = model(x.cuda())
                preds.append(out.cpu().numpy())
        return preds
    """
    assert _lines(source) == [(8, "TL201")]


def test_a_value_that_bounds_a_python_loop_or_sizes_a_view_is_not_reported() -> None:
    assert _in_loop("keep = torch.topk(out.sum(1), 3)[1].tolist()\n        for i in keep:\n            print(i)") == []
    assert _in_loop("n = int(out.argmax())\n        feats = out.view(n, -1)") == []
    assert _in_loop("for j in range(int(y.cuda().max())):\n            pass") == []
    # the same reads kept for a log are still reported
    assert _in_loop("keep = torch.topk(out.sum(1), 3)[1].tolist()\n        history.append(keep)") == ["TL201"]
    assert _in_loop("n = int(out.argmax())\n        history.append(n)") == ["TL202"]


def test_a_read_behind_a_debug_switch_is_not_reported() -> None:
    assert _in_loop("if args.debug:\n            print(loss.item())") == []
    assert _in_loop("if self.debug_mode:\n            print(loss.item())") == []
    assert _in_loop("if args.log_loss:\n            print(loss.item())") == ["TL201"]


def test_reads_in_a_loop_over_elements_each_pay_a_round_trip() -> None:
    source = """
    import torch
    class Head(torch.nn.Module):
        def forward(self, cos, labels):
            cos = cos.cuda()
            for i in range(cos.size(0)):
                if cos[i, 0].item() > 0.5:
                    cos[i, 0] = 0.0
                w = torch.exp(cos[i] - cos[i, 0].item())
            return cos
    """
    assert _lines(source, ["TL201"]) == [(7, "TL201"), (9, "TL201")]


def test_a_helper_read_is_reported_once_at_the_call_the_step_loop_makes() -> None:
    source = """
    import torch
    def accuracy(out, y):
        return (out.argmax(1) == y).float().mean().item()

    def train(model, loader, optimizer):
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            optimizer.step()
            acc = accuracy(out, y)
    """
    assert _lines(source) == [(13, "TL207")]


def test_a_helper_that_forward_calls_is_reported_at_that_call() -> None:
    source = """
    import torch
    def max_length(lengths):
        return torch.max(lengths).item()

    class Decoder(torch.nn.Module):
        def forward(self, x, lengths):
            lengths = lengths.cuda()
            return x[:, : max_length(lengths)]
    """
    assert _lines(source) == [(9, "TL207")]


def test_images_copied_one_by_one_to_be_written_are_still_reported() -> None:
    source = """
    import numpy as np
    import torch
    from PIL import Image
    def save_predictions(model, loader):
        with torch.no_grad():
            for x in loader:
                out = model(x.cuda())
                for i in range(len(out)):
                    image = out[i].detach().cpu().numpy()
                    Image.fromarray(image.astype(np.uint8)).save(f"{i}.png")
    """
    # one copy per image where one copy of the batch would do
    assert _lines(source) == [(10, "TL201")]


COLOURED_MASKS = """
import numpy as np
import torch
def save_masks(model, loader, outdir):
    total = 0
    for i, (image, name) in enumerate(loader):
        with torch.no_grad():
            out = model(image.cuda())
        pred = torch.argmax(out, 1).cpu().numpy()
        mask = colorize(pred.squeeze(0))
        {write}
    np.save(outdir + "/total.npy", total)
"""


def test_a_prediction_coloured_then_written_per_image_is_not_reported() -> None:
    # the mask made from the prediction is saved on the same trip: the host needs every one
    assert _lines(COLOURED_MASKS.format(write="mask.save(outdir + name[0] + '.png')")) == []
    # a running value saved once after the loop: the per-image read is still waste
    assert _lines(COLOURED_MASKS.format(write="total = total + mask.sum()")) == [(9, "TL201")]
    # written only when asked for, while every image's read feeds the running total: still reported
    optional = "total = total + mask.sum()\n        if outdir:\n            mask.save(outdir + name[0] + '.png')"
    assert _lines(COLOURED_MASKS.format(write=optional)) == [(9, "TL201")]
