"""TL107 samples-read-in-model-loop."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.rule import Rule
from torchlint.lint.walk import scope_nodes
from torchlint.semantic.dataset_items import in_per_item_method
from torchlint.semantic.loops import few_trips, is_loader_expr
from torchlint.semantic.sample_reads import (
    loop_names,
    runs_in_worker_processes,
    sample_read,
    times_each_trip,
    waits_for_user,
)


class SamplesReadInModelLoop(Rule):
    code = "TL107"
    name = "samples-read-in-model-loop"
    family = "Data loading"
    summary = (
        "A loop that reads and decodes one sample per trip (`Image.open(path)`, `cv2.imread`, `dataset[i]`) "
        "and runs the model on it, with no DataLoader: loading and the accelerator take turns."
    )
    message = (
        "Each sample is read and decoded in the main process between forward passes: wrap the files in a Dataset "
        "and iterate a DataLoader(num_workers=N, pin_memory=True) so loading overlaps the model"
    )
    explanation = (
        "Opening, decoding and transforming an image costs milliseconds of CPU time (a 500x375 JPEG: about 3-5 ms "
        "to decode, more to resize and normalise). In a loop that does it and then runs the model on the "
        "accelerator, the two never overlap: the GPU idles while the next image is read, and the CPU idles while "
        "the GPU runs. A DataLoader with worker processes reads the next samples while the model runs on the "
        "current ones, and can batch them; indexing a Dataset item by item (`for i in range(len(ds)): ds[i]`) "
        "runs its `__getitem__` in the main process in the same way."
    )
    bad = (
        "for path in image_paths:\n"
        "    image = transform(Image.open(path).convert('RGB')).unsqueeze(0).to(device)\n"
        "    masks.append(model(image).argmax(1).cpu())\n"
    )
    good = (
        "loader = DataLoader(ImageFiles(image_paths, transform), batch_size=16, num_workers=4, pin_memory=True)\n"
        "for images in loader:\n"
        "    masks.append(model(images.to(device, non_blocking=True)).argmax(1).cpu())\n"
    )
    false_positives = (
        "A handful of images (a loop over a literal list, `range(3)`) is left alone, and so is a program that never "
        "uses an accelerator, a loop whose model runs in a helper (not seen here), and the per-item methods of a "
        "Dataset themselves, and a loop that starts a clock before each read (it measures per-sample latency, "
        "which a DataLoader would hide), or one that waits for the user on each trip (`cv2.waitKey(0)`, "
        "`plt.show()`), or sits in a function handed to a process pool (`pool.map(extract, chunks)`), whose "
        "workers already load side by side. A loop over frames of a camera stream must run in order and in real "
        "time; silence it with `# noqa: TL107`."
    )
    requires = ("open", "imread", "read_image", "decode_image", "default_loader", "[")

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._loops: list[cst.For] = []

    def visit_For(self, node: cst.For) -> None:
        self._loops.append(node)

    def leave_Module(self, node: cst.Module) -> None:
        if not self._loops or self.semantic.is_test_module or not self.semantic.uses_accelerator:
            return
        reported: set[int] = set()
        for loop in self._loops:
            if is_loader_expr(self.context, loop.iter) or few_trips(self.context, loop):
                continue
            nodes = list(scope_nodes(loop.body))  # each trip's work, nested loops included
            counter = loop_names(loop)
            reads = [n for n in nodes if id(n) not in reported and sample_read(self.context, n, counter)]
            if not reads or in_per_item_method(self.context, loop) or times_each_trip(self.context, nodes, reads[0]) or waits_for_user(
                self.context, loop, nodes
            ):
                continue
            if runs_in_worker_processes(self.context, loop):
                continue  # a function a process pool maps over its share of the files: loading is parallel already
            if any(isinstance(n, cst.Call) and self.semantic.runs_forward(n) for n in nodes):
                reported.update(id(n) for n in reads)
                self.report(reads[0])
