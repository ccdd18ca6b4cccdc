"""The project: the linted code's own modules, and what each one defines, for the files that import them.

`from utils import calculate_accuracy` or `from .datasets import PredictDataset` names code of the project
itself. A rule that meets such a name asks here what it is: the module's file is found the way Python's
import system would find it from the importing file (its own folder, the folder above its top-level
package, `src/`, the current directory), and the module gets a summary built by the same semantic model
that lints it — what its classes are (a module, a dataset held in memory), what its functions return, which
of them read device values on the host, and whether it puts anything on an accelerator. Summaries follow the
module's own imports of project code, any depth, and are kept per process by file content.

A file's findings therefore depend on the files it imports; `dependencies` lists them so that a cached
result is used only while none of them changed.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.walk import descendants

if TYPE_CHECKING:
    from torchlint.lint.context import Context

# Modules larger than this are not summarised: the cost of parsing them would fall on every importer.
MAX_SUMMARY_BYTES = 512 * 1024
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import\b|import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*))", re.M)


@dataclass(frozen=True)
class ClassSummary:
    kind: Optional[str]  # an `objects` kind: "module", "dataset", ...
    in_memory_dataset: bool  # a dataset whose items are read from memory (no file I/O per item)


@dataclass(frozen=True)
class FunctionSummary:
    returns: Optional[str]  # the `objects` kind of what it returns
    syncs: Optional[str]  # how it reads a device value on the host (None: it does not)
    moves_to_accelerator: bool  # it puts something on an accelerator (`x.cuda()`, `.to(device)`)


class ModuleSummary:
    """What a project module defines, worked out name by name when an importer first asks about it."""

    def __init__(self, path: str, context: "Context") -> None:
        from torchlint.semantic.model import SemanticModel

        self.path = path
        self.context = context
        self.model = SemanticModel(context)
        self._top = {
            s.name.value: s for s in context.module.body if isinstance(s, (cst.ClassDef, cst.FunctionDef))
        }
        self._classes: dict[str, Optional[ClassSummary]] = {}
        self._functions: dict[str, Optional[FunctionSummary]] = {}

    def class_summary(self, name: str) -> Optional[ClassSummary]:
        if name not in self._classes:
            node = self._top.get(name)
            self._classes[name] = self._summarise_class(node) if isinstance(node, cst.ClassDef) else None
        return self._classes[name]

    def function_summary(self, name: str) -> Optional[FunctionSummary]:
        if name not in self._functions:
            self._functions[name] = None  # a recursion through other modules finds nothing
            node = self._top.get(name)
            if isinstance(node, cst.FunctionDef):
                self._functions[name] = self._summarise_function(node)
        return self._functions[name]

    def method_syncs(self, class_name: str, method: str) -> Optional[str]:
        """How the method `class_name.method` reads a device value on the host (see `calls.sync_in`), or None."""
        from torchlint.semantic.functions import method_named

        node = self._top.get(class_name)
        function = method_named(node, method) if isinstance(node, cst.ClassDef) else None
        return self.model.calls.sync_in(function, strict=True) if function is not None else None

    def _summarise_class(self, node: cst.ClassDef) -> ClassSummary:
        from torchlint.semantic import datasets
        from torchlint.semantic.objects import DATASET, MODULE

        objects = self.model.objects
        kind = objects.class_kind(node) or (MODULE if objects.is_module_class(node) else None)
        return ClassSummary(kind, kind == DATASET and datasets.indexes_memory(node))

    def _summarise_function(self, node: cst.FunctionDef) -> FunctionSummary:
        from torchlint.semantic.functions import returns_of
        from torchlint.semantic.placement import is_device_argument

        returns = {self.model.objects.kind(r.value) for r in returns_of(node) if r.value is not None}
        moves = False
        for call in descendants(node):
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
                method = call.func.attr.value
                if method == "cuda" or (
                    method == "to" and call.args and is_device_argument(self.context, call.args[0].value)
                ):
                    moves = True
                    break
        return FunctionSummary(
            returns=returns.pop() if len(returns) == 1 else None,
            syncs=self.model.calls.sync_in(node, strict=True),
            moves_to_accelerator=moves,
        )

    def release(self) -> None:
        self.context.release()


# -- finding modules ------------------------------------------------------------------------------


def import_roots(folder: str, cwd: str) -> list[str]:
    """Folders that `import x` in a file of `folder` searches for project code, nearest first: its own
    folder, the folder above its top-level package, the current directory and its `src/`."""
    top = folder
    while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    return list(dict.fromkeys([folder, top, cwd, os.path.join(cwd, "src")]))


def module_file(from_path: str, dots: int, module: str) -> Optional[str]:
    """The file `from <dots><module> import ...` in `from_path` reads, if it is part of the project."""
    return _module_file(os.path.dirname(os.path.abspath(from_path)), dots, module, os.getcwd())


@lru_cache(maxsize=4096)
def _module_file(folder: str, dots: int, module: str, cwd: str) -> Optional[str]:
    parts = [p for p in module.split(".") if p]
    if dots:
        base = folder
        for _ in range(dots - 1):
            base = os.path.dirname(base)
        candidates = [base]
    else:
        candidates = import_roots(folder, cwd)
    for root in candidates:
        stem = os.path.join(root, *parts)
        package = os.path.join(stem, "__init__.py")
        # `from . import x` names the package itself: only its __init__.py, never a sibling module
        for candidate in (stem + ".py", package) if parts else (package,):
            if os.path.isfile(candidate):
                return os.path.realpath(candidate)
    return None


_IMPORTS_OF: dict[tuple[str, int], tuple[str, ...]] = {}
_FILE_IMPORTS: dict[tuple[str, int, int], tuple[str, ...]] = {}


def imported_modules(path: str, text: str) -> tuple[str, ...]:
    """The project files `text` (the source of `path`) imports directly, found with a cheap scan."""
    key = (os.path.realpath(path), hash(text))
    if key not in _IMPORTS_OF:
        _IMPORTS_OF[key] = _scan_imports(path, text)
    return _IMPORTS_OF[key]


def _file_imports(path: str) -> tuple[str, ...]:
    """`imported_modules` of a file on disk, read once per version of the file (its mtime and size)."""
    try:
        stat = os.stat(path)
    except OSError:
        return ()
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _FILE_IMPORTS:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                _FILE_IMPORTS[key] = _scan_imports(path, handle.read(MAX_SUMMARY_BYTES))
        except OSError:
            _FILE_IMPORTS[key] = ()
    return _FILE_IMPORTS[key]


def _scan_imports(path: str, text: str) -> tuple[str, ...]:
    found: list[str] = []
    own = os.path.realpath(path)
    for match in _IMPORT_LINE.finditer(text):
        dots, module, plain = match.group(1), match.group(2), match.group(3)
        names = [(len(dots or ""), module)] if plain is None else [(0, m.strip()) for m in plain.split(",")]
        for level, name in names:
            target = module_file(path, level, name)
            if target is None and level == 0 and "." in name:  # `import pkg.mod` also runs pkg/__init__.py
                target = module_file(path, 0, name.rsplit(".", 1)[0])
            if target is not None and target not in found and target != own:
                found.append(target)
    return tuple(found)


def dependencies(path: str, text: str, limit: int = 200) -> list[str]:
    """Every project file `path` imports, directly or through other project files (bounded by `limit`)."""
    seen: list[str] = []
    queue = list(imported_modules(path, text))
    while queue and len(seen) < limit:
        current = queue.pop(0)
        if current not in seen:
            seen.append(current)
            queue.extend(_file_imports(current))
    return seen


# -- summaries ------------------------------------------------------------------------------------

# Summaries kept per process, most recently used last; each holds its module's tree, so they are few.
_SUMMARIES: "OrderedDict[tuple[str, int, int], Optional[ModuleSummary]]" = OrderedDict()
MAX_SUMMARIES = 48
# How many modules deep one question may go (a helper calling a helper of another module ...).
MAX_DEPTH = 3
_ACTIVE: list[str] = []


def summary(path: str, mentions: tuple[str, ...] = ()) -> Optional[ModuleSummary]:
    """The summary of a project file (None when it cannot be read or parsed, is too large, or answering would
    go more than MAX_DEPTH modules deep or round an import cycle). With `mentions`, also None when the file's
    text contains none of them: a cheap scan spares parsing a module that cannot answer."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key in _SUMMARIES:
        _SUMMARIES.move_to_end(key)
        return _SUMMARIES[key]
    if mentions and not _mentions(path, stat.st_mtime_ns, stat.st_size, mentions):
        return None
    if path in _ACTIVE or len(_ACTIVE) >= MAX_DEPTH or stat.st_size > MAX_SUMMARY_BYTES:
        return None
    _ACTIVE.append(path)
    try:
        found = _SUMMARIES[key] = _summarise(path)
    finally:
        _ACTIVE.pop()
    while len(_SUMMARIES) > MAX_SUMMARIES:
        _, old = _SUMMARIES.popitem(last=False)
        if old is not None:
            old.release()
    return found


@lru_cache(maxsize=4096)
def _mentions(path: str, mtime: int, size: int, words: tuple[str, ...]) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(MAX_SUMMARY_BYTES)
    except OSError:
        return False
    return any(word in text for word in words)


def imported(
    context: "Context", name: cst.BaseExpression, mentions: tuple[str, ...] = ()
) -> Optional[tuple[ModuleSummary, str]]:
    """The project module a name (or `module.attr`) comes from, with the name it has there (see `summary`
    for `mentions`)."""
    if isinstance(name, cst.Name):
        origin = context.imports.origin(name.value)
        if origin is None:
            return None
        dots, module, attr = origin
        target = module_file(context.source.path, dots, module)
        if target is None:  # `from package import module`, then `module.name`: not a name in a module
            return None
        found = summary(target, mentions)
        return (found, attr) if found is not None else None
    if isinstance(name, cst.Attribute) and isinstance(name.value, cst.Name):
        origin = context.imports.origin(name.value.value)  # `from . import utils` ... `utils.helper`
        if origin is not None:
            dots, module, attr = origin
            target = module_file(context.source.path, dots, f"{module}.{attr}" if module else attr)
            found = summary(target, mentions) if target is not None else None
            return (found, name.attr.value) if found is not None else None
    return None


def _summarise(path: str) -> Optional[ModuleSummary]:
    from torchlint.lint.engine import prepare_context
    from torchlint.lint.source import SourceError, read_source

    try:
        return ModuleSummary(path, prepare_context(read_source(path, path), walk=True))
    except (SourceError, cst.ParserSyntaxError, RecursionError, ValueError):
        return None
