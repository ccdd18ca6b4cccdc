"""Family B's near misses written many ways: the same evaluation and sampling functions when autograd is
already off (a caller in any file wraps the call, several calls up too; a grad-off decorator of any spelling;
`torch.set_grad_enabled(phase == "train")` in a shared epoch function), when the output is trained on through
a return value, a list or a dict, when gradients are wanted (an attack, a saliency map), and a single forward
pass for one picture. TL301 and TL305 must stay silent on every spelling."""

from __future__ import annotations

import pytest

from tests.generalisation import pools
from tests.generalisation.test_variants_inference import (
    CLASSIFIER,
    DATA,
    EVAL_FRAMES,
    EVAL_SLOTS,
    GAN_HEAD,
    GAN_MAIN,
    GAN_SLOTS,
    GAN_TRAIN,
    HEAD,
    IMPORTS,
    METHOD_SLOTS,
    MODELS,
    SAMPLE_FUNCTION,
    SELECT,
    ATTACK_ORIGIN,
    _indent,
    TRAIN_EPOCH,
    TRAINER,
    params,
)
from tests.generalisation.variants import Shape, differing

GRAD_OFF_IMPORTS = "from torch import no_grad, inference_mode\nimport torch as th\n"

# a call (two lines: the call and a log line) under autograd off, spelled as users spell it
WRAPPED = (
    "with torch.no_grad():\n    $call\n$after",
    "with torch.inference_mode():\n    $call\n$after",
    "with no_grad():\n    $call\n$after",
    "with th.no_grad():\n    $call\n$after",
    "with torch.set_grad_enabled(False):\n    $call\n$after",
    "with torch.autograd.no_grad():\n    $call\n$after",
    "with inference_mode():\n    $call\n$after",
)

DECORATOR = (
    "@torch.no_grad()",
    "@torch.inference_mode()",
    "@no_grad()",
    "@th.no_grad()",
    "@torch.no_grad",
    "@torch.inference_mode(mode=True)",
    "@torch.autograd.no_grad()",
)


def _with_imports(files: dict[str, str]) -> dict[str, str]:
    """Every project file also imports the grad-off spellings (unused where a variant does not need them)."""
    return {name: GRAD_OFF_IMPORTS + text if name != "models.py" else text for name, text in files.items()}


# -- callers turn autograd off: the evaluation function of every frame, its call wrapped ----------------------
CALLER_OFF = [
    Shape(
        name=f"caller-grad-off/{frame}",
        files=_with_imports(files),
        slots={**EVAL_SLOTS, "mark": ("",), "evaluation": WRAPPED,
               "call": ("report(epoch, $model, $L)",) if frame == "deep" else ("score = $fname($model, $L)",),
               "after": ("print(epoch)",) if frame == "deep" else ("print(epoch, score)",)},
        select=SELECT,
    )
    for frame, files in EVAL_FRAMES.items()
]

# the reporting helper of a third file turns autograd off around the evaluation; main.py calls it plainly
DEEP_HELPER = dict(EVAL_FRAMES["deep"])
DEEP_HELPER["reporting.py"] = GRAD_OFF_IMPORTS + """
import torch
from engine import $fname


def report(epoch, $model, $L):
    $wrapped
    return score
"""
CALLER_OFF.append(
    Shape(
        name="caller-grad-off/deep_helper",
        files=_with_imports({k: v for k, v in DEEP_HELPER.items() if k != "reporting.py"}) | {
            "reporting.py": DEEP_HELPER["reporting.py"]},
        slots={**EVAL_SLOTS, "mark": ("",), "evaluation": ("report(epoch, $model, $L)",), "wrapped": WRAPPED,
               "call": ("score = $fname($model, $L)",), "after": ("print(f'epoch {epoch}: {score}')",)},
        select=SELECT,
    )
)

TRAINER_OFF = TRAINER.replace("            print(epoch, self.$fname())", "            $wrapped")
CALLER_OFF.append(
    Shape(
        name="caller-grad-off/method",
        files=_with_imports({**MODELS, "main.py": TRAINER_OFF}),
        slots={**METHOD_SLOTS, "mark": ("",), "wrapped": WRAPPED, "call": ("score = self.$fname()",),
               "after": ("print(epoch, score)",)},
        select=SELECT,
    )
)

GAN_OFF = GAN_MAIN.replace("    $fname($G, epoch)", "    $wrapped")
CALLER_OFF.append(
    Shape(
        name="caller-grad-off/gan_other_file",
        files=_with_imports({**MODELS, "sampling.py": IMPORTS + DATA + SAMPLE_FUNCTION,
                             "main.py": GAN_HEAD + "from sampling import $fname\n" + GAN_TRAIN + GAN_OFF}),
        slots={**GAN_SLOTS, "mark": ("",), "wrapped": WRAPPED, "call": ("images = $fname($G, epoch)",),
               "after": ("print(len(images))",)},
        select=SELECT,
    )
)

# -- the function turns autograd off itself: a decorator of any spelling -------------------------------------
DECORATED = [
    Shape(
        name=f"decorated/{frame}",
        files=_with_imports(files),
        slots={**EVAL_SLOTS, "mark": ("",), "decorator": DECORATOR,
               "evaluation": ("report(epoch, $model, $L)",) if frame == "deep" else
               ("score = $fname($model, $L)\nprint(epoch, score)",)},
        select=SELECT,
    )
    for frame, files in EVAL_FRAMES.items()
    if frame != "deep"
] + [
    Shape(
        name="decorated/method",
        files=_with_imports({**MODELS, "main.py": TRAINER}),
        slots={**METHOD_SLOTS, "mark": ("",), "decorator": DECORATOR},
        select=SELECT,
    ),
    Shape(
        name="decorated/gan_other_file",
        files=_with_imports({**MODELS, "sampling.py": IMPORTS + DATA + SAMPLE_FUNCTION,
                             "main.py": GAN_HEAD + "from sampling import $fname\n" + GAN_TRAIN + GAN_MAIN}),
        slots={**GAN_SLOTS, "mark": ("",), "decorator": DECORATOR},
        select=SELECT,
    )
]

# -- one epoch function for both phases: autograd follows the phase --------------------------------------------
RUN_EPOCH = """

def $fname($model, $L, optimizer, $phase):
    $train_flag
    $model.train($is_train)
    total = 0.0
    for x, y in $L:
        x, y = x.to(device), y.to(device)
        with $switch($is_train):
            loss = F.cross_entropy($model(x), y)
            if $is_train:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        total += loss.item()
    return total / len($L)
"""

PHASE_MAIN = """
$model = $construct
loaders = {
    'train': DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True),
    'val': DataLoader(test_set, batch_size=256, num_workers=4, pin_memory=True),
}
optimizer = torch.optim.SGD($model.parameters(), lr=0.1)
for epoch in range(10):
    for stage in ('train', 'val'):
        print(stage, $fname($model, loaders[stage], optimizer, $passed))
"""

PHASE_SLOTS = {
    "fname": ("run_epoch", "run", "step", "evaluate", "f", "_loop"),
    "construct": CLASSIFIER,
    "model": pools.MODEL,
    "L": ("loader", "dl", "data", "source"),
    "switch": ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "th.set_grad_enabled"),
}
PHASE_FORMS = {  # (the parameter, what main passes, the flag line, the flag)
    "phase": ("phase", "stage", "is_train = phase == 'train'", "is_train"),
    "flag": ("train", "stage == 'train'", "", "train"),
}

PHASE_SHAPES = [
    Shape(
        name=f"phase-switch/{form}/{frame}",
        files=_with_imports(files),
        slots={**PHASE_SLOTS, "phase": (phase,), "passed": (passed,), "train_flag": (flag_line,), "is_train": (flag,)},
        select=SELECT,
    )
    for form, (phase, passed, flag_line, flag) in PHASE_FORMS.items()
    for frame, files in {
        "function": {**MODELS, "main.py": HEAD + RUN_EPOCH + PHASE_MAIN},
        "other_file": {**MODELS, "engine.py": IMPORTS + DATA + RUN_EPOCH,
                       "main.py": HEAD + "from engine import $fname\n" + PHASE_MAIN},
    }.items()
]

# -- outputs trained on through a return value, a list or a dict ------------------------------------------------
FORWARD_HELPER = """

def $fname($model, $x):
    $result
"""

RETURNED = (
    "return $model($x)",
    "$out = $model($x)\nreturn $out",
    "return {'logits': $model($x)}",
    "$out = $model($x)\nreturn [$out]",
    "$out = $model($x)\nreturn $out, $out.softmax(1).detach()",
)

TRAIN_WITH_HELPER = """

def first(result):
    if isinstance(result, dict):
        return result['logits']
    if isinstance(result, (list, tuple)):
        return result[0]
    return result


$model = $construct
loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
optimizer = torch.optim.SGD($model.parameters(), lr=0.1)
for epoch in range(10):
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(first($fname($model, images)), labels)
        loss.backward()
        optimizer.step()
"""

RETURNED_SLOTS = {
    "fname": ("predict", "infer", "run", "step", "forward_batch", "f", "_loop", "evaluate"),
    "result": RETURNED, "construct": CLASSIFIER, "model": pools.MODEL, "x": pools.INPUT,
    "out": ("outputs", "logits", "o"),
}

TRAINED_ON = [
    Shape(name="trained-on/function", files={**MODELS, "main.py": HEAD + FORWARD_HELPER + TRAIN_WITH_HELPER},
          slots=RETURNED_SLOTS, select=SELECT),
    Shape(
        name="trained-on/other_file",
        files={**MODELS, "forward.py": IMPORTS + FORWARD_HELPER,
               "main.py": HEAD + "from forward import $fname\n" + TRAIN_WITH_HELPER},
        slots=RETURNED_SLOTS,
        select=SELECT,
    ),
]

# -- gradients wanted: an adversarial evaluation, a saliency map ------------------------------------------------
GRADIENT_BODY = (
    """
    correct = 0
    for $x, $y in $L:
        $x, $y = $x.to(device), $y.to(device)
        $x.requires_grad_(True)
        loss = F.cross_entropy($model($x), $y)
        grad, = torch.autograd.grad(loss, $x)
        adv = ($x + eps * grad.sign()).clamp(0, 1).detach()
        correct += ($model(adv).argmax(1) == $y).sum().item()
    return correct / len($L.dataset)
    """,
    """
    correct = 0
    for $x, $y in $L:
        $x, $y = $x.to(device), $y.to(device)
        $x.requires_grad = True
        F.cross_entropy($model($x), $y).backward()
        adv = ($x + eps * $x.grad.sign()).clamp(0, 1).detach()
        correct += ($model(adv).argmax(1) == $y).sum().item()
    return correct / len($L.dataset)
    """,
    """
    maps = []
    for $x, $y in $L:
        $x = $x.to(device).requires_grad_()
        scores = $model($x).gather(1, $y.to(device)[:, None])
        scores.sum().backward()
        maps.append($x.grad.abs().amax(1).cpu().numpy())
    return np.concatenate(maps)
    """,
)

GRADIENT_FUNCTION = """

def $fname($model, $L, eps=8 / 255):
    $mode_here
    $body
"""

GRADIENT_SLOTS = {
    "fname": ("attack", "evaluate", "robust_accuracy", "saliency", "run", "f", "_loop"),
    "body": GRADIENT_BODY, "construct": CLASSIFIER, "model": pools.MODEL, "x": pools.INPUT, "y": pools.TARGET,
    "L": ("test_loader", "loader", "eval_data"), "loader": ("train_loader",), "mode_here": ("", "$model.eval()"),
    "mode_caller": ("",), "evaluation": ("print(epoch, $fname($model, $L))",),
}

GRADIENT_SHAPES = [
    Shape(name="gradients-wanted/function",
          files={**MODELS, "main.py": HEAD + TRAIN_EPOCH + GRADIENT_FUNCTION + "\n\n"
                 + EVAL_FRAMES["other_file"]["main.py"].split("from engine import $fname\n", 1)[1]
                 .split(TRAIN_EPOCH, 1)[1]},
          slots=GRADIENT_SLOTS, select=SELECT),
    Shape(name="gradients-wanted/other_file",
          files={**MODELS, "engine.py": IMPORTS + DATA + GRADIENT_FUNCTION,
                 "main.py": EVAL_FRAMES["other_file"]["main.py"]},
          slots=GRADIENT_SLOTS, select=SELECT),
]

# a WGAN-GP critic step: the penalty's forward pass on interpolates needs its graph (a gradient of a gradient)
PENALTY = """

def $fname($critic, real, fake):
    alpha = torch.rand(real.size(0), 1, 1, 1, device=device)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    $score = $critic(mixed)
    grads = torch.autograd.grad($score.sum(), mixed, create_graph=True)[0]
    return ((grads.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
"""

CRITIC_STEP = """
$critic = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 1)).to(device)
generator = nn.Sequential(nn.Linear(64, 3 * 32 * 32), nn.Tanh()).to(device)
opt_c = torch.optim.Adam($critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-4, betas=(0.0, 0.9))
loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
for epoch in range(10):
    for real, _ in loader:
        real = real.to(device)
        fake = generator(torch.randn(real.size(0), 64, device=device)).view_as(real)
        loss = $critic(fake.detach()).mean() - $critic(real).mean() + 10 * $fname($critic, real, fake.detach())
        opt_c.zero_grad()
        loss.backward()
        opt_c.step()
        g_loss = -$critic(fake).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
"""

PENALTY_SLOTS = {"fname": ("gradient_penalty", "gp", "penalty", "f", "compute_gp", "_loop"),
                 "critic": ("critic", "D", "net_d", "m", "disc"), "score": ("score", "out", "d_out", "o")}

GRADIENT_SHAPES += [
    Shape(name="gradients-wanted/penalty_function", files={**MODELS, "main.py": HEAD + PENALTY + CRITIC_STEP},
          slots=PENALTY_SLOTS, select=SELECT),
    Shape(name="gradients-wanted/penalty_other_file",
          files={**MODELS, "losses.py": IMPORTS + DATA + PENALTY,
                 "main.py": HEAD + "from losses import $fname\n" + CRITIC_STEP},
          slots=PENALTY_SLOTS, select=SELECT),
]

# -- one forward pass for one picture, once the training is over --------------------------------------------------
ONE_PICTURE = (
    "save_image($G(fixed), 'final.png', normalize=True)",
    "samples = $G(fixed)\nplt.imshow(samples[0].permute(1, 2, 0).detach().cpu().numpy())\nplt.savefig('final.png')",
    "show($G, fixed)",
)

ONE_PICTURE_MAIN = GAN_MAIN.replace("    $mode_caller\n    $fname($G, epoch)\n", "") + """
fixed = torch.randn(64, 64, device=device)
$G.eval()
$picture
"""

SHOW = """

def show(net, z):
    grid = torchvision.utils.make_grid(net(z), normalize=True)
    plt.imshow(grid.permute(1, 2, 0).detach().cpu().numpy())
    plt.savefig('final.png')
"""

ONE_PICTURE_SHAPES = [
    Shape(
        name=f"one-picture/{frame}",
        files={**MODELS, "main.py": GAN_HEAD + GAN_TRAIN + SHOW + (body if frame == "module" else
               "\n\nif __name__ == '__main__':\n" + "\n".join("    " + line if line else line
                                                          for line in body.strip("\n").splitlines()) + "\n")},
        slots={**GAN_SLOTS, "picture": ONE_PICTURE},
        select=SELECT,
    )
    for frame, body in {"module": ONE_PICTURE_MAIN, "main_block": ONE_PICTURE_MAIN}.items()
]

# -- one adversarial example for one image, made once: the weight gradients of that one backward cost nothing
ONE_ATTACK = """
$victim = $origin
$victim.eval()
$x = torch.rand(1, 3, 224, 224, device=device)
$x.requires_grad_(True)
$out = $victim($x)
loss = F.nll_loss($out, torch.tensor([263], device=device))
$victim.zero_grad()
loss.backward()
$adv = ($x + 0.03 * $x.grad.sign()).clamp(0, 1)
print($victim($adv).argmax(1).item())
"""

ONE_ATTACK_FRAMES = {
    "module": ONE_ATTACK,
    "main_block": "\nif __name__ == '__main__':\n" + _indent(ONE_ATTACK),
    "function": "\n\ndef $fname():\n" + _indent(ONE_ATTACK) + "\n\n\nif __name__ == '__main__':\n    $fname()\n",
}

ONE_ATTACK_SHAPES = [
    Shape(
        name=f"one-attack/{frame}",
        files={"main.py": HEAD + body},
        slots={"origin": ATTACK_ORIGIN, "victim": ("model", "victim", "net", "m"), "x": ("img", "image", "x"),
               "out": ("out", "logits"), "adv": ("perturbed", "x_adv"), "fname": ("main", "attack", "demo")},
        select=SELECT,
    )
    for frame, body in ONE_ATTACK_FRAMES.items()
]

# -- a model whose parts are optimised one by one (`Adam(model.enc.parameters())`) and that returns its own loss:
# the call is the training step, not a frozen network
PARTS = """

class $cls(nn.Module):
    def __init__(self):
        super().__init__()
        self.$enc = nn.GRU(32, 64, batch_first=True)
        self.$dec = nn.Linear(64, 10)

    def forward(self, x, y):
        h, _ = self.$enc(x)
        return F.cross_entropy(self.$dec(h[:, -1]), y)
"""

PARTS_TRAIN = """
$model = $cls().to(device)
enc_optim = torch.optim.Adam($model.$enc.parameters(), lr=1e-3)
dec_optim = torch.optim.$opt($model.$dec.parameters(), lr=1e-3)
for epoch in range(10):
    for x, y in loader:
        loss = $model(x.to(device), y.to(device))
        $post
        loss.backward()
        enc_optim.step()
        dec_optim.step()
"""

PARTS_FRAMES = {
    "script": PARTS + PARTS_TRAIN,
    "function": PARTS + "\n\ndef $fname(loader):\n" + _indent(PARTS_TRAIN) + "\n\n\nif __name__ == '__main__':\n"
    "    $fname(loader)\n",
}

PARTS_SHAPES = [
    Shape(
        name=f"parts-optimised/{frame}",
        files={"main.py": HEAD + "loader = DataLoader(train_set, batch_size=64, shuffle=True)\n" + body},
        slots={"cls": ("Seq2Seq", "Model", "Net2"), "enc": ("enc", "encoder", "rnn"), "dec": ("dec", "decoder", "head"),
               "model": ("model", "net", "m", "seq2seq"), "opt": ("Adam", "SGD"), "fname": ("train", "fit", "f"),
               "post": ("enc_optim.zero_grad()\ndec_optim.zero_grad()", "print(loss.item())", "")},
        select=SELECT,
    )
    for frame, body in PARTS_FRAMES.items()
]

# -- a sample grid drawn once by a function of another file imported with `import *`, called once from main
ONCE_SAMPLER = """

def $fname($G, path, nz=64):
    $G.eval()
    z = torch.randn(100, nz, device=device)
    grid = ($G(z).data + 1) / 2.0
    save_image(grid, path, nrow=10)
"""

ONCE_MAIN = """
$G = $gen
$G.load_state_dict(torch.load('G.pth'))
$fname($G, 'test.jpg')
"""

ONCE_SHAPES = [
    Shape(
        name=f"one-grid-other-file/{frame}",
        files={**MODELS, "sampling.py": IMPORTS + DATA + ONCE_SAMPLER,
               "main.py": GAN_HEAD + "$import\n" + body},
        slots={"fname": ("test", "sample", "generate", "f"), "G": ("G", "netG", "generator"),
               "gen": ("Generator().to(device)", "UpNet(64).cuda()"),
               "import": ("from sampling import *", "from sampling import $fname")},
        select=SELECT,
    )
    for frame, body in {"module": ONCE_MAIN, "main_block": "\nif __name__ == '__main__':\n" + _indent(ONCE_MAIN)}.items()
]

SHAPES = CALLER_OFF + DECORATED + PHASE_SHAPES + TRAINED_ON + GRADIENT_SHAPES + ONE_PICTURE_SHAPES + ONE_ATTACK_SHAPES + PARTS_SHAPES + ONCE_SHAPES

LIMIT = 8
XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("shape", params(SHAPES, XFAIL))
def test_inference_near_misses_stay_silent_however_written(shape: Shape) -> None:
    message = differing(shape, LIMIT)
    assert message is None, message
