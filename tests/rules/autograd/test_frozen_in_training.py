"""TL305: a network the file never trains, run on a batch with autograd on inside the training step (a
pretrained encoder in front of a trained decoder), and the near misses where the graph through it is needed
or the network may be trained after all."""

from __future__ import annotations

import textwrap
from pathlib import Path

from lint_testing import lines as shared_lines

from torchlint.lint.api import lint_paths

CAPTIONING = """
import torch
import torch.nn.functional as F
from torch.autograd import Variable
from nets import Encoder, Decoder


def train(encoder, decoder, optimizer, loader):
    encoder.eval()
    decoder.train()
    for imgs, captions in loader:
        imgs, captions = Variable(imgs).cuda(), Variable(captions).cuda()
        img_features = encoder(imgs)
        optimizer.zero_grad()
        preds = decoder(img_features, captions)
        loss = F.cross_entropy(preds, captions)
        loss.backward()
        optimizer.step()


def main():
    encoder = Encoder("vgg19")
    decoder = Decoder(10000, encoder.dim)
    encoder.cuda()
    decoder.cuda()
    optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-4)
    for epoch in range(10):
        train(encoder, decoder, optimizer, loader)
"""


def lines(code: str) -> list[int]:
    return shared_lines(code, "TL305", path="train.py")


def test_a_pretrained_encoder_in_front_of_a_trained_decoder() -> None:
    assert lines(CAPTIONING) == [13]


def test_silent_when_the_encoder_is_fine_tuned_too() -> None:
    both = CAPTIONING.replace(
        "torch.optim.Adam(decoder.parameters(), lr=1e-4)",
        "torch.optim.Adam(list(decoder.parameters()) + list(encoder.parameters()), lr=1e-4)",
    )
    assert lines(both) == []


def test_silent_when_the_encoder_is_part_of_a_trained_model() -> None:
    wrapped = CAPTIONING.replace(
        "optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-4)",
        "model = CaptionModel(encoder, decoder)\n    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)",
    )
    assert lines(wrapped) == []


def test_silent_when_the_input_comes_from_a_trained_network() -> None:
    # a perceptual loss: the gradient must flow through the frozen network back to the generator
    code = """
    import torch
    import torch.nn.functional as F

    def train(generator, vgg, optimizer, loader):
        for low, high in loader:
            fake = generator(low.cuda())
            loss = F.mse_loss(vgg(fake), vgg(high.cuda()).detach())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    generator = Generator().cuda()
    vgg = VGGFeatures().cuda()
    optimizer = torch.optim.Adam(generator.parameters())
    train(generator, vgg, optimizer, loader)
    """
    assert lines(code) == [8]  # only the detached pass on real images (the existing shape)


def test_silent_when_the_encoder_class_freezes_itself(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "nets.py").write_text(textwrap.dedent("""
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self, network):
            super().__init__()
            self.net = nn.Conv2d(3, 512, 3)
            for p in self.net.parameters():
                p.requires_grad = False

        def forward(self, x):
            return self.net(x)
    """))
    (tmp_path / "train.py").write_text(textwrap.dedent(CAPTIONING))
    results = lint_paths([str(tmp_path / "train.py")], select=["TL305"])
    assert [f.line for r in results for f in r.findings] == []


def test_silent_when_a_helper_builds_an_optimizer_from_it() -> None:
    built = CAPTIONING.replace(
        "optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-4)",
        "optimizer = build_optimizer(encoder, decoder)\n    print(sum(p.numel() for p in decoder.parameters()))",
    )
    assert lines(built) == []


def test_a_distillation_teacher_run_with_grad() -> None:
    code = """
    import torch
    import torch.nn.functional as F

    teacher = ResNet50().cuda().eval()
    student = ResNet18().cuda()
    optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        t = teacher(x)
        s = student(x)
        loss = F.kl_div(s.log_softmax(1), t.softmax(1), reduction="batchmean")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert lines(code) == [10]
