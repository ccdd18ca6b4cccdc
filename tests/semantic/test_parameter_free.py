"""Modules that hold no parameter: running one with autograd on records no graph."""

from __future__ import annotations

import libcst as cst
from semantic_probe import ask

from torchlint.semantic.model import SemanticModel
from torchlint.semantic.parameter_free import holds_no_parameters


def _free(model: SemanticModel, call: cst.Call, expr: cst.BaseExpression) -> bool:
    context = model.context
    cls = next(c for c in context.module.body if isinstance(c, cst.ClassDef) and c.name.value == expr.value)
    return holds_no_parameters(context, cls)


HEAD = """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from librosa.filters import mel as mel_filters
from torch.nn import Parameter
from torchvision.models import resnet18
from layers import make_layers
"""


def test_buffers_and_library_values_hold_no_parameter() -> None:
    source = HEAD + """
class Spectrogram(nn.Module):
    def __init__(self, n_fft=1024, sampling_rate=22050, mels=80):
        super().__init__()
        self.n_fft = n_fft
        basis = torch.from_numpy(mel_filters(sr=sampling_rate, n_fft=n_fft, n_mels=mels)).float()
        self.register_buffer("basis", basis)
        self.register_buffer("window", torch.hann_window(n_fft).float())

    def _magnitude(self, audio):
        spec = torch.stft(audio, self.n_fft, window=self.window.to(audio.device), return_complex=True)
        return spec.abs()

    def forward(self, audio):
        if audio.dim() != 2:
            raise ValueError("expected a batch of waveforms")
        return torch.log(torch.clamp(torch.matmul(self.basis, self._magnitude(audio)), min=1e-5))

class Normalise(nn.Module):
    def forward(self, x):
        return F.normalize(x, dim=1) * np.sqrt(x.shape[1])
probe(Spectrogram)
probe(Normalise)
"""
    assert ask(source, _free) == ["True", "True"]


def test_layers_parameters_held_callables_and_helpers_may_hold_parameters() -> None:
    source = HEAD + """
class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
    def forward(self, x):
        return self.proj(x)

class Weighted(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = Parameter(torch.ones(4))
    def forward(self, x):
        return x * self.w

class Wrapper(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
    def forward(self, x):
        return self.net.forward(x)

class Built(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = make_layers()
    def forward(self, x):
        return x

class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module("trunk", resnet18())
    def forward(self, x):
        return x

class Derived(Layer):
    def forward(self, x):
        return x
probe(Layer)
probe(Weighted)
probe(Wrapper)
probe(Built)
probe(Backbone)
probe(Derived)
"""
    assert ask(source, _free) == ["False"] * 6


TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


class Features(nn.Module):
    def __init__(self, n_fft=1024):
        super().__init__()
        self.n_fft = n_fft
        self.register_buffer("window", torch.hann_window(n_fft))
        $layer

    def forward(self, audio):
        spec = torch.stft(audio, self.n_fft, window=self.window, return_complex=True)
        return $output


def train(net, dataset):
    device = torch.device("cuda")
    features = Features().to(device)
    optimizer = torch.optim.Adam(net.parameters())
    loader = DataLoader(dataset, batch_size=16, num_workers=4, pin_memory=True)
    for audio, target in loader:
        audio = audio.to(device, non_blocking=True)
        inputs = features(audio).detach()
        loss = (net(inputs) - target.to(device, non_blocking=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def spectra(loader):
    features = Features().cuda()
    return [features(audio.cuda()).cpu().numpy() for audio, _ in loader]
"""


def _codes(layer: str, output: str) -> list[tuple[str, int]]:
    from string import Template

    from torchlint.lint.api import lint_source

    source = Template(TRAIN).substitute(layer=layer, output=output)
    result = lint_source(source, select=["TL301", "TL305"])
    return sorted((f.code, f.line) for f in result.findings)


def test_a_transform_without_weights_is_not_reported_as_a_network_run_with_autograd_on() -> None:
    assert _codes("pass", "torch.log(spec.abs().clamp(min=1e-5))") == []


def test_the_same_transform_with_a_layer_is() -> None:
    found = _codes("self.proj = nn.Conv1d(513, 80, 1)", "self.proj(spec.abs())")
    assert {code for code, _ in found} == {"TL301", "TL305"}
