"""TL401 per-sample-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.rule import FixSafety, Rule


_LIST_MESSAGE = (
    "Element-wise math on a list of tensors one element at a time: stack the list once (torch.stack/torch.cat) "
    "and do the math on the result, e.g. (-torch.stack(log_probs) * returns).sum()"
)


class PerSampleLoop(Rule):
    code = "TL401"
    name = "per-sample-loop"
    family = "Vectorisation and loops"
    summary = (
        "A Python loop (or a comprehension fed to `torch.stack`/`torch.cat`/`sum`/`torch.tensor`, also through `list(...)` or `tuple(...)`) over the samples of a batch "
        "that runs a module, a loss or tensor math on one sample at a time and collects the results; or the "
        "same arithmetic applied to every element of a list of tensors (a policy-gradient loss built step by "
        "step) before `torch.cat`/`torch.stack`."
    )
    message = (
        "Per-sample loop over a batch: call the module/loss once on the whole batch, broadcast the math over "
        "the batch dimension, or use torch.vmap"
    )
    explanation = (
        "Every call in the loop body pays Python, dispatcher and (on a GPU) kernel-launch overhead once per "
        "sample, and every kernel works on one sample, which leaves most of the hardware idle: a GPU kernel on "
        "a single sample typically finishes long before the next one is launched. Calling the module or the "
        "loss once on the batch does the same arithmetic in a few large kernels. Measured on a 2-core CPU (1 "
        "thread), an MLP (512-1024-10) on a batch of 64 ran 4.0x slower sample by sample (2.28 ms against "
        "0.57 ms), and a training step whose loss was summed per sample ran 1.7x slower than one "
        "`F.cross_entropy` on the batch; a small conv net, whose per-sample convolutions already keep a "
        "CPU core busy, ran about as fast either way (1.1x). The gap is far larger on a GPU, where each "
        "per-sample call is a handful of kernel launches of a few microseconds each. When the per-sample computation cannot be "
        "written for a batch directly, `torch.vmap` (or `torch.func.vmap`, with `torch.func.grad` for "
        "per-sample gradients) vectorises the function automatically."
    )
    bad = (
        "def forward(self, x):\n"
        "    outputs = []\n"
        "    for i in range(x.size(0)):\n"
        "        outputs.append(self.head(x[i]))\n"
        "    return torch.stack(outputs)\n\n"
        "for images, labels in train_loader:\n"
        "    logits = model(images)\n"
        "    loss = 0\n"
        "    for i in range(len(labels)):\n"
        "        loss += criterion(logits[i], labels[i])\n"
    )
    good = (
        "def forward(self, x):\n"
        "    return self.head(x)  # modules take the batch dimension first\n\n"
        "for images, labels in train_loader:\n"
        "    logits = model(images)\n"
        "    loss = criterion(logits, labels) * len(labels)  # or reduction='sum'\n\n"
        "# per-sample logic that has no batched form:\n"
        "outputs = torch.vmap(per_sample_fn)(x)\n"
    )
    false_positives = (
        "The rule needs evidence that the loop runs over a batch: the range is `x.size(0)`, `x.shape[0]` (or the first of "
        "the sizes unpacked from `x.shape`, `x.size()` or their leading dimensions, `n, c = x.shape[:2]`) or "
        "`len(x)` (or a batch-size variable), or the loop iterates `x` directly (`for s in x`, `enumerate(x)`, "
        "`zip(x, y)`), where `x` is a `forward()` input, a value drawn from a DataLoader (a tuple batch, a dict "
        "batch read by key, or the parts a helper hands back from the whole batch; the loader may be a parameter "
        "every caller passes one, also kept as `self.<attr>`), a parameter annotated "
        "`Tensor` or one that every caller in the file (for a top-level function no call of its file runs: every "
        "caller in the project files that import it; for a method of a top-level class no call of its file runs: every "
        "`obj.method(...)` of those files where `obj` is built as an instance of the class, `scorer = Scorer()`) "
        "passes a tensor to, a module's output or a torch op's output "
        "(`pred = torch.sigmoid(model(x))`, iterated even with no other tensor use), or what a function of this "
        "or another project file returns when every return of it is one (`emb = embed(model, x)` for "
        "`return F.normalize(model(x), dim=1)`; not a tuple, a list or a stack of several values), "
        "or, whatever made it (a parameter of a helper no caller in sight fills, what any call returns), a value the "
        "function shows to be a tensor: bound to what a tensor operation makes (`x.detach()`, `torch.exp(x)`) or "
        "used as only a tensor can be (`x.size(0)`, `x.unsqueeze(1)`, `torch.exp(x)`; not `x.shape`, `len(x)` "
        "or `x.to(device)`, which arrays, lists and modules share), and not a grid of values a factory builds "
        "(`torch.linspace`), pieces (`x.chunk(2)`) or a copy on the host (`x.cpu()`), "
        "or a model's output zipped with labels drawn from the loader or enumerated beside them "
        "(`criterion(o, y[k])`; not per-image records read by "
        "key, `out[\"boxes\"]`, nor a value whose elements the loop reads by key, `output[i][\"x\"]` over "
        "`range(len(output))`: a list of records), and is used as a tensor when it is iterated or "
        "measured with `len()` (a list of tensors such as feature levels or per-image targets is not a batch). "
        "A size past the first dimension (`x.size(1)` of a sequence-first tensor) counts only when the code "
        "names it as the batch size. Rows of an array, a sparse matrix or a data set turned into a "
        "tensor (`a[:, :-1]`, `m.tocsr()`, `torch.FloatTensor(X_test)`, `x = x.cpu().numpy()` where the loop reads it) count only when the body runs a model "
        "on each row (`model.predict(row)`, or on the row's index), loops and comprehensions alike. A loop "
        "over anything else (a list, a dataset, a parameter of unknown kind) counts only when its body shows "
        "that each element is one sample: it runs a model or a loss on the element made a batch of one "
        "(`x.unsqueeze(0)`, `x[None]`, `x[i:i + 1]`, `x.view(1, -1)`, `torch.tensor([x])`), directly or "
        "through a function or method of the same file or of another project file (`predict(model, x)`, "
        "`utils.predict(model, x)`, `agent.evaluate(x)` where `agent = Agent(net)`, or where `agent` is a parameter of a "
        "top-level function every caller passes an instance of the same project class: `test(args, dqn)`), turns one "
        "element's comparison into a number (`(p.argmax() == t).item()`, `if p.argmax() == t:`), or indexes "
        "a batch together with labels drawn from a loader (`criterion(out[i], y[i])` over `range(len(y))`); "
        "a loop that loads its element (a path) first is not one, nor is a loop over a Python list gathered "
        "by hand (`data: list`, `random.sample(test_data, k=9)`: a few samples for a plot, or images of "
        "different sizes; a list made a tensor before the loop, `returns = torch.tensor(returns)`, is that tensor; a minibatch drawn with a count named as the batch size, `random.sample(memory, "
        "batch_size)`, holds samples). A range over a count named as time steps "
        "or positions (`n_step`, `seq_len`, `T`), pieces cut by `torch.chunk`/`torch.split`, and elements "
        "named as frames, steps, tokens, chunks, levels or layers walk a sequence or a model, not samples. The body "
        "runs a module (known by how it is built, or by what the code does to it: `m.train()`, "
        "`m.parameters()`, whatever it is called), a loss, a torch function, a function or method of the same file that computes with "
        "torch (one defined inside the looping function too, or such a function imported from a project module or called through it (`utils.psnr(a, b)`), or a method of an instance of a project class, or an image metric of a library such as "
        "`pytorch_msssim.ssim`), or tensor arithmetic on `x[i]`, and appends, assigns `out[i] = ...` or accumulates the result "
        "(read as a number with `.item()` only for a module, a loss or such a function: a metric per image), or "
        "back-propagates a per-sample loss (gradients summed one sample at a time; not when the loop steps an "
        "optimizer, clears gradients or reads `.grad` per sample, nor when each element adapts weights of its own by hand and runs them: the tasks of meta-learning). "
        "A loop over a list of tensors is reported only when its body is plain arithmetic on each element (or "
        "a loss of the functional API on them) and the results go to `torch.cat`/`torch.stack`, or are summed "
        "step by step (`loss += -log_prob * R`) over per-step lists (log-probabilities, rewards, returns, a "
        "tensor of returns, a list a method of the class appends to once per step) and back-propagated. Over such "
        "per-step lists the same loss counts however it is spelled: the lists read by position (`for i in "
        "range(len(log_probs))`, `enumerate`), a step's value passed through a method that keeps it one value "
        "(`lp.squeeze()`, `R.detach()`, `torch.tensor(R)`), the terms appended to an attribute, kept in a list "
        "comprehension bound to a name, or added up by Python's `sum()` and back-propagated; not a list of "
        "numbers made a tensor afterwards (discounted returns), a weighted sum of a few task losses, or feature "
        "levels read by position. It stays silent for loops over layers, heads, "
        "parameters, epochs, files and time steps that carry a state (RNN cells, autoregressive decoding), "
        "for loops that stop early (`break`, `return`) or branch on a sample's values, loops that read the row beside "
        "their own (`ret[i] += ret[i - 1]`: a scan along the dimension), and for per-sample work "
        "of varying size (`nonzero`, boolean masks, NMS, slices by a per-sample length, a result size or "
        "shape computed per sample: `size=sizes[i]`, `x.reshape(t, h, w)`; a masked selection reduced at once, "
        "`d[i][mask[i]].max()` for the hardest positive of each anchor, has one value per sample and counts, and so does a "
        "loop that collects only one value per sample, `losses.append(cls_loss.sum() / n_pos)`, whatever the size of "
        "the pieces on the way: an image's real boxes cut from a padded batch, matched and turned into a loss term, "
        "with the image that has none handled apart under `if boxes.shape[0] == 0:`), which has no direct "
        "batched form (box-by-box detection work is TL406, and a loop TL406 reports is not reported again). Per-sample random augmentation done on purpose, "
        "or a loop that bounds peak memory by design, is a deliberate choice: silence it with `# noqa: TL401`. "
        "A loop that nothing repeats is left alone: module-level code outside any loop (a demo, a notebook "
        "cell) or, in a script no project file imports, a function or method every call of which runs once "
        "that way; a loop over data a loop gathered (`output = torch.cat((output, pred))` per batch) still counts. A module of the file whose `forward` returns a tuple, a list or a "
        "namedtuple (the features of several layers) gives layers, not samples, when its output is iterated; one whose `forward` returns one computed tensor "
        "(not `torch.stack` of levels) gives samples."
    )
    fix_safety = FixSafety.NONE
    requires = ("torch", "model")  # a file without torch can still run a project's model once per row

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._reported: set[cst.CSTNode] = set()  # loops reported in this file

    def visit_For(self, node: cst.For) -> None:
        samples = self.semantic.per_sample_loops
        if not isinstance(node.iter, (cst.Call, cst.Name, cst.Attribute)) or self._inside_reported(node):
            return
        if self._box_loop(node):
            return  # boxes one at a time: torchvision.ops is the advice (TL406)
        loop = samples.candidate(node, node.target, node.iter)
        if loop is not None and samples.body_is_per_sample(loop, node.body):
            self._report_loop(node)
        elif samples.elementwise_list_loop(node):
            self._report_loop(node, _LIST_MESSAGE)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._check_comprehension(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._check_comprehension(node)

    def _check_comprehension(self, node: cst.ListComp | cst.GeneratorExp) -> None:
        samples = self.semantic.per_sample_loops
        if self._inside_reported(node):
            return
        if self._box_loop(node):
            return  # the IoU of one pair of boxes per element: TL406
        if samples.comprehension_is_per_sample(node):
            self._report_loop(node)
        elif samples.elementwise_list_comprehension(node):
            self._report_loop(node, _LIST_MESSAGE)

    def _box_loop(self, node: cst.CSTNode) -> bool:
        """`node` works on boxes one at a time, or is part of a loop that does (TL406's finding)."""
        if not self.semantic.uses_torch:
            return False
        boxes = self.semantic.box_loops
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)) and boxes.overlaps_comprehension(node):
            return True
        for loop in [node, *self.context.ancestors(node)]:
            if isinstance(loop, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(loop, (cst.For, cst.While)) and boxes.kind(loop) is not None:
                return True
        return False

    def _report_loop(self, node: cst.CSTNode, message: str | None = None) -> None:
        self._reported.add(node)
        if self.semantic.runs_once(node):
            return  # a demo or a notebook cell: nothing repeats the loop
        self.report(node, message)

    def _inside_reported(self, node: cst.CSTNode) -> bool:
        """A loop nested in a reported one (positions within a sample) is part of the same finding."""
        return bool(self._reported) and any(ancestor in self._reported for ancestor in self.context.ancestors(node))
