"""Inference found through the objects that hold a network: a model built by a helper of another file, a
network handed in as an argument, a data-parallel wrapper, a helper object of a class, and a script's
top-level loop; with the near misses that must stay silent."""

from __future__ import annotations

import textwrap
from pathlib import Path

from lint_testing import lines as shared_lines

from torchlint.lint.api import lint_paths


def lint(tmp_path: Path, files: dict[str, str], target: str, rule: str = "TL301") -> list[tuple[str, int]]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")  # marks the project's folder
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    results = lint_paths([str(tmp_path / target)], select=[rule])
    return sorted((Path(r.path).name, f.line) for r in results for f in r.findings)


def lines(code: str) -> list[int]:
    return shared_lines(code, "TL301", path="train.py")


PIX_MODEL = """
import torch
from torch import nn


class Pix(nn.Module):
    def __init__(self):
        super().__init__()
        self.netG = nn.Conv2d(3, 3, 3)
        self.netE = nn.Conv2d(3, 3, 3)

    def inference(self, label):
        return self.netG.forward(label)

    def synthesize(self, label):
        return self.netG(label)

    def encode_features(self, image):
        return {0: self.netE.forward(image.cuda()).data.cpu().numpy()}


class InferencePix(Pix):
    def forward(self, label):
        return self.inference(label)
"""

FACTORY = """
def create_model(opt):
    from models.pix import Pix, InferencePix
    if opt.train:
        model = Pix()
    else:
        model = InferencePix()
    return model
"""

TEST_SCRIPT = """
import torch
from models.factory import create_model

model = create_model(opt)
for i, data in enumerate(dataset):
    generated = model.inference(data["label"].cuda())
    save(tensor2im(generated.data[0]))
"""


def test_a_model_built_by_a_helper_of_another_file_runs_in_a_test_loop(tmp_path: Path) -> None:
    files = {"models/__init__.py": "", "models/pix.py": PIX_MODEL, "models/factory.py": FACTORY, "test.py": TEST_SCRIPT}
    assert lint(tmp_path, files, "test.py") == [("test.py", 7)]


def test_the_same_loop_is_silent_when_the_method_turns_grad_off(tmp_path: Path) -> None:
    model = PIX_MODEL.replace("    def inference(", "    @torch.no_grad()\n    def inference(")
    files = {"models/__init__.py": "", "models/pix.py": model, "models/factory.py": FACTORY, "test.py": TEST_SCRIPT}
    assert lint(tmp_path, files, "test.py") == []


def test_a_data_parallel_wrapper_is_seen_through(tmp_path: Path) -> None:
    script = """
    import torch
    from models.factory import create_model

    model = torch.nn.DataParallel(create_model(opt))
    model = create_model(opt)
    for data in dataset:
        save(model.module.synthesize(data["label"].cuda()).cpu().numpy())
    """
    files = {"models/__init__.py": "", "models/pix.py": PIX_MODEL, "models/factory.py": FACTORY, "test.py": script}
    assert lint(tmp_path, files, "test.py") == [("test.py", 8)]


def test_a_method_that_returns_only_arrays_is_reported_at_its_def(tmp_path: Path) -> None:
    # the script that loops over it does not even name torch; the callers are found through the factory
    script = """
    import numpy as np
    from models.factory import create_model

    model = create_model(opt)
    features = []
    for data in dataset:
        features.append(model.module.encode_features(data["image"]))
    np.save("features.npy", features)
    """
    files = {"models/__init__.py": "", "models/pix.py": PIX_MODEL, "models/factory.py": FACTORY, "encode.py": script}
    assert lint(tmp_path, files, "models/pix.py") == [("pix.py", 18)]
    assert lint(tmp_path, files, "encode.py") == []


VQVAE = """
import torch
from torch import nn


class VQVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3)

    def encode(self, x):
        z = self.enc(x)
        return z, z.argmax(1)

    def forward(self, x):
        return self.encode(x)[0]
"""


def test_a_network_passed_as_an_argument_is_read_from_its_callers(tmp_path: Path) -> None:
    extract = """
    import torch
    from vqvae import VQVAE

    def extract(txn, loader, model, device):
        for img, _ in loader:
            _, ids = model.encode(img.to(device))
            txn.put(ids.detach().cpu().numpy())

    if __name__ == "__main__":
        model = VQVAE().to("cuda")
        model.eval()
        extract(env, loader, model, "cuda")
    """
    assert lint(tmp_path, {"vqvae.py": VQVAE, "extract.py": extract}, "extract.py") == [("extract.py", 5)]


def test_an_argument_whose_result_is_trained_on_stays_silent(tmp_path: Path) -> None:
    train = """
    import torch
    from vqvae import VQVAE

    def codes(model, img):
        return model.encode(img)[0]

    def fit(model, loader, optimizer):
        for img, _ in loader:
            loss = codes(model, img.cuda()).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    if __name__ == "__main__":
        model = VQVAE().cuda()
        fit(model, loader, torch.optim.Adam(model.parameters()))
    """
    assert lint(tmp_path, {"vqvae.py": VQVAE, "train.py": train}, "train.py") == []


def test_a_script_loop_that_reads_only_output_sizes() -> None:
    code = """
    import torch
    from model import handpose_model

    model = handpose_model().cuda()
    size = {}
    for i in range(10, 1000):
        data = torch.randn(1, 3, i, i).cuda()
        size[i] = model(data).size(2)
    """
    assert lines(code) == [9]


SCORE_CAM = """
import torch
import torch.nn.functional as F


class CamExtractor:
    def __init__(self, model):
        self.model = model

    def forward_pass_on_convolutions(self, x):
        conv_output = None
        for position, module in self.model.features._modules.items():
            x = module(x)
            if int(position) == 11:
                conv_output = x
        return conv_output, x

    def forward_pass(self, x):
        conv_output, x = self.forward_pass_on_convolutions(x)
        return conv_output, self.model.classifier(x.view(x.size(0), -1))


class ScoreCam:
    def __init__(self, model):
        self.model = model.eval()
        self.extractor = CamExtractor(self.model)

    def generate_cam(self, image, target_class):
        conv_output, _ = self.extractor.forward_pass(image)
        target = conv_output[0]
        cam = torch.zeros(target.shape[1:])
        for i in range(len(target)):
            w = F.softmax(self.extractor.forward_pass(image * target[i])[1], dim=1)[0][target_class]
            cam += w.data.numpy() * target[i].data.numpy()
        return cam.numpy()
"""


def test_a_helper_object_run_once_per_channel_is_reported_even_on_the_cpu() -> None:
    # one forward pass per channel, hundreds in all; the loop over layers is one forward pass, not a repeat
    assert lines(SCORE_CAM) == [28]


def test_a_few_greedy_decoding_steps_of_a_cpu_toy_are_left_alone() -> None:
    code = """
    import torch

    def greedy_decoder(model, enc_input, start):
        enc_outputs = model.encoder(enc_input)
        dec_input = torch.zeros(1, 5).long()
        symbol = start
        for i in range(0, 5):
            dec_input[0][i] = symbol
            projected = model.projection(model.decoder(dec_input, enc_outputs))
            symbol = projected.squeeze(0).max(dim=-1)[1].data[i].item()
        return dec_input

    if __name__ == "__main__":
        print(greedy_decoder(model, enc_inputs, 4))
    """
    assert lines(code) == []


def test_an_agent_method_is_reported_at_its_def_not_at_every_call() -> None:
    code = """
    import torch
    from torch import nn

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 2)

        def forward(self, state):
            return self.fc(state)

        def sample(self, state):
            return self.forward(state).tanh()

    class Agent:
        def __init__(self):
            self.policy = Policy().to("cuda")

        def select_action(self, state):
            state = torch.FloatTensor(state).to("cuda")
            return self.policy.sample(state).detach().cpu().numpy()

    agent = Agent()
    for episode in range(1000):
        state, done = env.reset(), False
        while not done:
            state, reward, done, _ = env.step(agent.select_action(state))
    """
    assert lines(code) == [20]


PREDICTOR = """
import torch

class Predictor:
    def __init__(self, path):
        self.model = Net().cuda().eval()
        self.model.load_state_dict(torch.load(path))

    def __call__(self, img):
        return self.model(img.cuda()).argmax(1).cpu().numpy()

predictor = Predictor("weights.pt")
for img in images:
    print(predictor(img))
"""


def test_a_wrapper_object_called_in_a_loop_runs_its_call_method() -> None:
    assert lines(PREDICTOR) == [9]


def test_a_wrapper_object_called_under_no_grad_stays_silent() -> None:
    guarded = PREDICTOR.replace("for img in images:\n    print(predictor(img))",
                                "with torch.no_grad():\n    for img in images:\n        print(predictor(img))")
    assert lines(guarded) == []


def test_on_the_cpu_a_name_alone_does_not_make_a_network() -> None:
    code = """
    import torch
    from fp16_utils import *

    def to_master_grads(model_groups, master_groups):
        for model_params, master_params in zip(model_groups, master_groups):
            model_grads_to_master_grads(model_params, master_params)
    """
    assert lines(code) == []
