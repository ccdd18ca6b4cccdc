"""How often inference runs decides whether it is worth a change: a loop that breaks after its first batch
runs once, like a grid of samples drawn once after training; a break behind a condition, or after a
`continue`, repeats, and a GAN's grid of samples drawn every epoch is inference. Also the distillation
shapes of TL305: a teacher's output detached on the next line, and tensor constructors'
`requires_grad=False`, which freezes no network."""

from __future__ import annotations

from lint_testing import found, lines, lint

SHAPE_CHECK = """
import torch

model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters())
for images, _ in loader:
    out = model(images.cuda())
    print(out.shape)
    break

for epoch in range(10):
    for images, labels in loader:
        loss = criterion(model(images.cuda()), labels.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_loop_that_breaks_after_one_batch_runs_once() -> None:
    assert lines(SHAPE_CHECK, "TL301") == []


def test_a_loop_that_breaks_on_a_condition_repeats() -> None:
    gathered = SHAPE_CHECK.replace(
        "    print(out.shape)\n    break\n", "    preds.append(out.argmax(1).cpu())\n    if len(preds) > 100:\n        break\n"
    )
    assert lines(gathered, "TL301") == [7]


def test_a_loop_that_may_continue_past_its_break_repeats() -> None:
    skipping = SHAPE_CHECK.replace(
        "    out = model(images.cuda())\n",
        "    if images.size(0) < 8:\n        continue\n    out = model(images.cuda())\n",
    ).replace("print(out.shape)", "preds.append(out.argmax(1).cpu())")
    assert lines(skipping, "TL301") == [9]


SAMPLES_PER_EPOCH = """
import torch
import matplotlib.pyplot as plt

fixed_z = torch.randn(25, 100).cuda()


def show_result(epoch):
    G.eval()
    images = G(fixed_z)
    G.train()
    fig, ax = plt.subplots(5, 5)
    for k in range(25):
        ax[k // 5, k % 5].imshow(images[k, 0].cpu().data.numpy())
    plt.savefig(f"epoch_{epoch}.png")


G = Generator().cuda()
D = Discriminator().cuda()
g_optimizer = torch.optim.Adam(G.parameters())
for epoch in range(20):
    for x, _ in train_loader:
        g_loss = criterion(D(G(torch.randn(x.size(0), 100).cuda())), ones)
        g_optimizer.zero_grad()
        g_loss.backward()
        g_optimizer.step()
    show_result(epoch)
"""


def test_a_grid_of_samples_drawn_per_epoch_is_reported() -> None:
    # GAN sample functions are inference: no_grad costs nothing there, whatever the share of the run
    assert lines(SAMPLES_PER_EPOCH, "TL301") == [8]


def test_a_grid_drawn_once_after_training_is_left_alone() -> None:
    once = SAMPLES_PER_EPOCH.replace("        g_optimizer.step()\n    show_result(epoch)", "        g_optimizer.step()\nshow_result(20)")
    assert lines(once, "TL301") == []


DISTILLATION = """
import torch
import torch.nn.functional as F

teacher = TeacherNet().cuda()
teacher.load_state_dict(torch.load("teacher.pt"))
student = StudentNet().cuda()
optimizer = torch.optim.SGD(student.parameters(), lr=0.01)


def train(epoch):
    student.train()
    teacher.eval()
    for data, target in train_loader:
        data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        output = student(data)
        teacher_output = teacher(data)
        teacher_output = teacher_output.detach()
        loss = distillation(output, target, teacher_output)
        loss.backward()
        optimizer.step()


for epoch in range(10):
    train(epoch)
"""


def test_a_teacher_whose_output_is_detached_on_the_next_line() -> None:
    assert found(DISTILLATION, ["TL301", "TL305"]) == [(18, "TL305")]


def test_a_teacher_output_read_before_its_detach_is_not_called_detached() -> None:
    # the raw output feeds the loss too: the backward pass runs through the teacher (a finding of another kind)
    kept = DISTILLATION.replace(
        "        teacher_output = teacher_output.detach()\n",
        "        hint = F.mse_loss(output, teacher_output)\n        teacher_output = teacher_output.detach()\n",
    ).replace("loss = distillation(output, target, teacher_output)", "loss = distillation(output, target, teacher_output) + hint")
    messages = [f.message for f in lint(kept, "TL305").findings]
    assert len(messages) == 1 and "inside the training step" in messages[0] and "detached" not in messages[0]


def test_a_tensor_built_with_requires_grad_false_freezes_no_network() -> None:
    keyword = DISTILLATION.replace("data, target = data.cuda(), target.cuda()", "data, target = data.cuda(), torch.tensor(target, requires_grad=False).cuda()")
    assert lines(keyword, "TL305") == [18]
    frozen = DISTILLATION.replace("teacher.eval()", "teacher.eval()\n    for p in teacher.parameters():\n        p.requires_grad = False")
    assert lines(frozen, "TL305") == []


PRETRAINED_ENCODER = """
import torch
import torchvision.models as models
from torch.autograd import Variable

resnet = models.resnet50(pretrained=True)
head = Head()
optimizer = torch.optim.Adam(head.parameters())
resnet.cuda()
head.cuda()
for img, label in loader:
    img = Variable(img)
for epoch in range(10):
    for img, label in loader:
        img = Variable(img).cuda()
        label = Variable(label).cuda()
        optimizer.zero_grad()
        loss = criterion(head(resnet(img)), label)
        loss.backward()
        optimizer.step()
with torch.no_grad():
    for img, label in loader:
        img = Variable(img).cuda()
        correct += (head(resnet(img)).argmax(1).cpu() == label).sum().item()
"""


def test_a_pretrained_encoder_fed_rewrapped_batches_in_front_of_a_trained_head() -> None:
    assert lines(PRETRAINED_ENCODER, "TL305") == [18]


CONTENT_LOSS = """
import torch
import torch.nn as nn
import torchvision.models as models


def main():
    global content_features
    vgg = models.vgg19()

    class _ContentFeatures(nn.Module):
        def __init__(self):
            super().__init__()
            self.feature = nn.Sequential(*list(vgg.features.children())[:-1])

        def forward(self, x):
            return self.feature(x)

    content_features = _ContentFeatures().cuda()
    optimizer = torch.optim.Adam(generator.parameters())
    for epoch in range(10):
        train(optimizer)


def train(optimizer):
    for lr, hr in loader:
        sr = generator(lr.cuda())
        hr = hr.cuda()
        fake = content_features(sr)
        real = content_features(hr)
        real = real.detach()
        loss = criterion(sr, hr) + criterion(fake, real)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_content_network_of_any_name_built_from_a_module_class_of_the_file() -> None:
    assert lines(CONTENT_LOSS, "TL305") == [30]


def test_a_helper_object_that_is_no_module_is_not_a_network() -> None:
    plain = CONTENT_LOSS.replace("class _ContentFeatures(nn.Module):", "class _ContentFeatures:").replace(
        "        def forward(self, x):", "        def __call__(self, x):"
    )
    assert lines(plain, "TL305") == []


UPDATE_D = """
import torch


def update_D(X, Z, net_D, net_G, loss, trainer_D):
    trainer_D.zero_grad()
    real_Y = net_D(X)
    fake_X = net_G(Z)
    fake_Y = net_D(fake_X.detach())
    loss_D = loss(real_Y, torch.ones_like(real_Y)) + loss(fake_Y, torch.zeros_like(fake_Y))
    loss_D.backward()
    trainer_D.step()
    return loss_D


def train_gan(loader, net_D, net_G, loss, trainer_D, epochs):
    for epoch in range(epochs):
        for X, _ in loader:
            update_D(X.cuda(), torch.randn(X.shape[0], 20, device="cuda"), net_D, net_G, loss, trainer_D)
"""


def test_a_generator_received_as_a_parameter_and_detached_later_stays_a_tl301_finding() -> None:
    assert found(UPDATE_D, ["TL301", "TL305"]) == [(8, "TL301")]
