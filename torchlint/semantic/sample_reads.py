"""Samples read one at a time in the loop that runs the model: an image file opened and decoded
(`Image.open(path)`, `cv2.imread(path)`), or a Dataset indexed item by item (`dataset[i]`, whose
`__getitem__` reads and transforms). Without a DataLoader, that work runs in the main process, between
forward passes, while the accelerator waits."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import flatten_targets, last_name
from torchlint.lint.walk import descendants
from torchlint.semantic.calls import CLOCK_CALLS
from torchlint.semantic.loops import DATASET_NAME
from torchlint.semantic.objects import DATASET, objects

# Calls that read and decode one image (or array) file.
FILE_DECODERS = frozenset(
    {
        "PIL.Image.open", "cv2.imread", "imageio.imread", "imageio.v2.imread", "imageio.v3.imread",
        "skimage.io.imread", "scipy.misc.imread", "matplotlib.pyplot.imread", "torchvision.io.read_image",
        "torchvision.io.decode_image", "torchvision.datasets.folder.default_loader",
    }
)


def sample_read(context: Context, node: cst.CSTNode, counter: frozenset[str]) -> Optional[str]:
    """What `node` reads, when it reads one sample: a decoder's name, or `dataset[i]` indexed by the loop's
    own variable (`counter`) on a Dataset (built as one, or named like one with nothing else known of it)."""
    if isinstance(node, cst.Call):
        qual = context.qualname(node) or ""
        return ".".join(qual.split(".")[-2:]) if qual in FILE_DECODERS else None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        index = node.slice[0].slice.value
        if not (isinstance(index, cst.Name) and index.value in counter):
            return None
        kind = objects(context).kind(node.value)
        name = last_name(node.value)
        if kind == DATASET or (kind is None and name is not None and bool(DATASET_NAME.search(name))):
            return f"{name}[{index.value}]"
    return None


def loop_names(loop: cst.For) -> frozenset[str]:
    """The names the loop binds on each trip (`for i in ...`, `for i, path in enumerate(...)`)."""
    return frozenset(t.value for t in flatten_targets(loop.target) if isinstance(t, cst.Name))


_CLOCKS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.perf_counter_ns", "time.time_ns",
                     "timeit.default_timer"})


def times_each_trip(context: Context, nodes: list[cst.CSTNode], read: cst.CSTNode) -> bool:
    """The trip starts a clock before it reads the sample: the loop measures per-sample latency, loading
    included (a deployment check), which a DataLoader would hide. `nodes` are in source order."""
    for node in nodes:
        if node is read:
            return False
        if isinstance(node, cst.Call) and (context.qualname(node) in _CLOCKS or last_name(node.func) in CLOCK_CALLS - {"time"}):
            return True
    return False


def waits_for_user(context: Context, loop: cst.For, nodes: list[cst.CSTNode]) -> bool:
    """Every trip shows its result and waits for the user (`cv2.waitKey(0)`, `plt.show()`, `input()`, not
    behind an `if`): an interactive viewer, whose pace the user sets."""
    for node in nodes:
        if not isinstance(node, cst.Call):
            continue
        qual = context.qualname(node) or ""
        name = last_name(node.func)
        blocking = qual in ("matplotlib.pyplot.show", "builtins.input") or name == "input" or (
            name == "waitKey" and (not node.args or context.literal(node.args[0].value) == 0)
        )
        if blocking and not _conditional_in(context, node, loop):
            return True
    return False


def _conditional_in(context: Context, node: cst.CSTNode, loop: cst.For) -> bool:
    for ancestor in context.ancestors(node):
        if ancestor is loop:
            return False
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.Try)):
            return True
    return False


# Methods that run a function in other processes or threads (`pool.map(fn, items)`, `executor.submit(fn, x)`).
_PARALLEL_MAPS = frozenset({"map", "imap", "imap_unordered", "starmap", "map_async", "starmap_async", "submit",
                            "apply_async"})


def runs_in_worker_processes(context: Context, loop: cst.For) -> bool:
    """The loop's function is handed to a process or thread pool (`pool.map(extract_on_paths, chunks)`): its
    reads already run side by side with the other workers' forward passes."""
    function = context.enclosing(loop, cst.FunctionDef)
    return function is not None and function.name.value in context.shared(_pool_mapped)


def _pool_mapped(context: Context) -> frozenset[str]:
    """Names of the functions the file hands to a pool's `map`/`submit`-style methods."""
    names = set()
    for node in descendants(context.module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.args:
            first = node.args[0].value
            if node.func.attr.value in _PARALLEL_MAPS and isinstance(first, cst.Name):
                names.add(first.value)
    return frozenset(names)
