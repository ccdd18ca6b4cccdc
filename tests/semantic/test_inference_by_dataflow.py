"""Inference judged by what builds the network and where its output goes, not by names: a loader that freezes
what it returns, a freeze chained on the eval switch, a TorchScript detector kept in a cache, networks held in
a dict, features handed to a project class that keeps host copies; with the near misses that must stay silent."""

from __future__ import annotations

import textwrap
from pathlib import Path

from lint_testing import lines

from torchlint.lint.api import lint_paths


def lint(tmp_path: Path, files: dict[str, str], target: str) -> list[tuple[str, int]]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")  # marks the project's folder
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    results = lint_paths([str(tmp_path / target)], select=["TL301"])
    return sorted((Path(r.path).name, f.line) for r in results for f in r.findings)


LOADERS = """
import pickle


def load_network_pkl(f):
    data = pickle.load(f)
    for key in ("G", "G_ema"):
        data[key] = type(data[key])(**data[key].kwargs).eval().requires_grad_(False)
    return data


def load_for_finetuning(model):
    model.backbone.requires_grad_(False)
    return model
"""

GENERATE = """
import torch
import PIL.Image
import loaders


def generate_images(path, seeds, outdir):
    with open(path, "rb") as f:
        G = loaders.load_network_pkl(f)["G_ema"].to("cuda")
    for seed in seeds:
        img = G(torch.randn(1, 512, device="cuda"))
        PIL.Image.fromarray(img[0].cpu().numpy()).save(f"{outdir}/{seed}.png")


def generate_finetuned(model, seeds, outdir):
    net = loaders.load_for_finetuning(model).cuda()
    for seed in seeds:
        img = net(torch.randn(1, 512, device="cuda"))
        PIL.Image.fromarray(img[0].cpu().numpy()).save(f"{outdir}/{seed}.png")
"""


def test_a_network_from_a_loader_that_freezes_it_records_no_graph(tmp_path: Path) -> None:
    # the frozen generator is silent; a loader that freezes only a backbone leaves a network that records one
    assert lint(tmp_path, {"loaders.py": LOADERS, "generate.py": GENERATE}, "generate.py") == [("generate.py", 15)]


def test_a_freeze_chained_on_the_eval_switch_records_no_graph() -> None:
    code = """
    import copy
    import torch


    def compute_ppl(sampler, n, device):
        sampler.eval().requires_grad_(False).to(device)
        dist = []
        for _ in range(n):
            dist.append(sampler(torch.zeros(8, 10, device=device)).cpu())
        return torch.cat(dist).numpy()


    def generator_features(G0, n, device):
        G = copy.deepcopy(G0).eval().requires_grad_(False).to(device)
        return [G(torch.randn(8, 512, device=device)).cpu().numpy() for _ in range(n)]


    def unfrozen_features(G0, n, device):
        net = copy.deepcopy(G0).eval().to(device)
        return [net(torch.randn(8, 512, device=device)).cpu().numpy() for _ in range(n)]
    """
    assert lines(code, "TL301") == [19]


def test_a_torchscript_detector_kept_in_a_cache_is_a_network() -> None:
    code = """
    import torch

    _detectors = dict()


    def get_detector(url, device):
        if url not in _detectors:
            _detectors[url] = torch.jit.load(url).eval().to(device)
        return _detectors[url]


    def dataset_features(dataset, url, device):
        detector = get_detector(url, device)
        feats = []
        for images, _ in torch.utils.data.DataLoader(dataset, batch_size=64):
            feats.append(detector(images.to(device)).cpu().numpy())
        return feats
    """
    assert lines(code, "TL301") == [13]


NETS = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)
"""


def test_networks_held_in_a_dict_are_networks(tmp_path: Path) -> None:
    score = """
    from nets import Net


    def score_all(loader):
        nets = {"small": Net().cuda(), "large": Net().cuda()}
        scores = {}
        for name in nets:
            nets[name].eval()
            scores[name] = sum(nets[name](x.cuda()).sum().item() for x in loader)
        return scores
    """
    assert lint(tmp_path, {"nets.py": NETS, "score.py": score}, "score.py") == [("score.py", 5)]


STATS = """
import torch


class Stats:
    def __init__(self):
        self.items = []
        self.graphs = []

    def append_torch(self, x):
        self.items.append(x.cpu().numpy())

    def keep(self, x):
        self.graphs.append(x)
        self.items.append(x.detach().cpu().numpy())


def features(dataset, device):
    stats = Stats()
    detector = torch.jit.load("detector.pt").to(device)
    for images, _ in torch.utils.data.DataLoader(dataset, batch_size=64):
        stats.append_torch(detector(images.to(device)))
    return stats


def kept(dataset, device):
    stats = Stats()
    detector = torch.jit.load("detector.pt").to(device)
    for images, _ in torch.utils.data.DataLoader(dataset, batch_size=64):
        stats.keep(detector(images.to(device)))
    return stats
"""


def test_a_project_method_that_keeps_host_copies_ends_the_flow() -> None:
    # `keep` stores the tensor as it came (a graph could be trained on later): still out of sight
    assert lines(STATS, "TL301") == [18]


def test_a_warm_up_beside_a_no_grad_loop_and_dead_code_are_silent() -> None:
    code = """
    import torch


    def evaluate(model, loader, trt_file=None):
        model = model.eval()
        if trt_file is not None:
            model(torch.ones(1, 3, 64, 64).cuda())  # a warm-up before the engine is built
        outputs = []
        for images in loader:
            with torch.no_grad():
                outputs.append(model(images.cuda()).cpu())
        return outputs


    class Pruner:
        def test(self):
            return
            self.model.eval()
            for batch, label in self.test_loader:
                print(self.model(batch.cuda()).argmax(1).eq(label.cuda()).sum().item())


    def evaluate_all(model, loader):
        model = model.eval()
        model(torch.ones(1, 3, 64, 64).cuda())
        return [model(images.cuda()).cpu() for images in loader]
    """
    assert lines(code, "TL301") == [24]


PERCEPTUAL = """
import torch
import torch.nn.functional as F
from torchvision.models import vgg19


class PerceptualLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.vgg = vgg19(weights="DEFAULT").features[:36].eval()

    def forward(self, sr, hr):
        return F.mse_loss(self.vgg(sr), self.vgg(hr))
"""


def test_an_unfrozen_pretrained_extractor_of_a_loss_is_reported_once() -> None:
    assert lines(PERCEPTUAL, "TL305") == [13]


def test_a_frozen_or_fine_tuned_extractor_is_silent() -> None:
    frozen = PERCEPTUAL.replace(".features[:36].eval()", ".features[:36].eval().requires_grad_(False)")
    assert lines(frozen, "TL305") == []
    tuned = PERCEPTUAL + "\noptimizer = torch.optim.Adam(PerceptualLoss().vgg.parameters())\n"
    assert lines(tuned, "TL305") == []
    untrained = PERCEPTUAL.replace('weights="DEFAULT"', "weights=None")  # a network trained from scratch
    assert lines(untrained, "TL305") == []


EVALUATE = """
import torch
from model import Net


def evaluate(model, loader):
    model.eval()
    scores = []
    for batch, _ in loader:
        scores.append(model(batch.cuda()).detach().cpu())
    return torch.cat(scores)


if __name__ == "__main__":
    model = Net().cuda().eval()
    for batch in torch.load("batches.pt"):
        print(model(batch.cuda()).detach().argmax(1))
"""


def test_an_evaluation_handed_its_network_is_inference_not_a_frozen_network() -> None:
    from torchlint.lint.api import lint_source

    result = lint_source(EVALUATE, select=["TL301", "TL305"])
    found = sorted((f.code, f.line) for f in result.findings)
    assert ("TL301", 6) in found  # the function a caller (which may train the network) runs per evaluation
    assert ("TL305", 17) in found  # the script's own network, never trained anywhere, its output detached
    assert not any(code == "TL305" and line == 10 for code, line in found)
