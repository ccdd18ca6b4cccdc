"""The project: the linted code's own modules, and what each one defines, for the files that import them.

`from utils import calculate_accuracy` or `from .datasets import PredictDataset` names code of the project
itself. A rule that meets such a name asks here what it is: the module's file is found the way Python's
import system would find it from the importing file (its own folder, the folder above its top-level
package, `src/`, the current directory), and the module gets a summary built by the same semantic model
that lints it — what its classes are (a module, a dataset held in memory), what its functions return, which
of them read device values on the host, and whether it puts anything on an accelerator. Summaries follow the
module's own imports of project code, any depth, and are kept per process by file content.

The other direction matters too: whether a function's result is backpropagated, or what is done with the
loader it builds, is decided by its callers. `importers` finds the project files that import a module (a cheap
scan of the project's files, bounded), and `call_sites` / `method_call_sites` the calls in them.

A file's findings therefore depend on the files it imports and on the files that import it; `dependencies`
lists them so that a cached result is used only while none of them changed.
"""

from __future__ import annotations

import os
import stat as stat_module
import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.discovery import marked_ancestor
from torchlint.lint.walk import descendants
from torchlint.semantic.functions import calls_named

if TYPE_CHECKING:
    from torchlint.lint.context import Context

# Modules larger than this are not summarised: the cost of parsing them would fall on every importer.
MAX_SUMMARY_BYTES = 512 * 1024
_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import\b[ \t]*\(?([\w \t,]*)|import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*))",
    re.M,
)


@dataclass(frozen=True)
class ClassSummary:
    kind: Optional[str]  # an `objects` kind: "module", "dataset", ...
    in_memory_dataset: bool  # a dataset whose items are read from memory (no file I/O per item)


@dataclass(frozen=True)
class FunctionSummary:
    returns: Optional[str]  # the `objects` kind of what it returns
    syncs: Optional[str]  # how it reads a device value on the host (None: it does not)
    moves_to_accelerator: bool  # it puts something on an accelerator (`x.cuda()`, `.to(device)`)
    value: str = "unknown"  # a `values` kind of what it returns: "tensor" for a loss a step function returns
    one_step: bool = False  # it runs one training step (`loss.backward(); optimizer.step()`, no loop)


class ModuleSummary:
    """What a project module defines, worked out name by name when an importer first asks about it."""

    def __init__(self, path: str, context: "Context") -> None:
        from torchlint.semantic.model import semantic_model

        self.path = path
        self.context = context
        self.model = semantic_model(context)  # the one an asker holding only the context gets too
        self._top = {
            s.name.value: s for s in context.module.body if isinstance(s, (cst.ClassDef, cst.FunctionDef))
        }
        self._classes: dict[str, Optional[ClassSummary]] = {}
        self._functions: dict[str, Optional[FunctionSummary]] = {}

    def calls_named(self, name: str) -> list[cst.Call]:
        """The module's calls `name(...)` and `<expr>.name(...)`."""
        return calls_named(self.context, name)

    def definition(self, name: str) -> Optional[cst.CSTNode]:
        """The top-level class or function `name` of the module, as parsed."""
        return self._top.get(name)

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
        from torchlint.semantic import loops
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
        values = {self.model.values.kind(r.value) for r in returns_of(node) if r.value is not None}
        return FunctionSummary(
            returns=returns.pop() if len(returns) == 1 else None,
            syncs=self.model.calls.sync_in(node, strict=True),
            moves_to_accelerator=moves,
            value=values.pop() if len(values) == 1 else "unknown",
            one_step=loops.is_step_function(self.context, node),
        )

    def release(self) -> None:
        self.context.release()


# -- finding modules ------------------------------------------------------------------------------


def import_roots(folder: str, cwd: str) -> list[str]:
    """Folders that `import x` in a file of `folder` searches for project code, nearest first: its own
    folder, the folder above its top-level package, the current directory and its `src/`."""
    return list(dict.fromkeys([folder, package_parent(folder), cwd, os.path.join(cwd, "src")]))


def package_parent(folder: str) -> str:
    """The folder above the top-level package holding `folder` (`folder` itself outside packages)."""
    top = folder
    while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    return top


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
        found = _in_root(root, parts)
        if found is not None:
            return found
    if dots or not parts:
        return None
    # `sys.path.insert(0, "../lib")` in a script: a folder of the project that is no package itself
    # holding the module, when exactly one does
    found_in = {f for f in (_in_root(r, parts) for r in _path_folders(cwd)) if f is not None}
    return found_in.pop() if len(found_in) == 1 else None


def _in_root(root: str, parts: list[str]) -> Optional[str]:
    stem = os.path.join(root, *parts)
    package = os.path.join(stem, "__init__.py")
    # `from . import x` names the package itself: only its __init__.py, never a sibling module
    for candidate in (stem + ".py", package) if parts else (package,):
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
    return None


@lru_cache(maxsize=64)
def _path_folders(cwd: str) -> tuple[str, ...]:
    """Folders directly under `cwd` that are not packages: where scripts put their code on `sys.path`."""
    try:
        entries = sorted(os.scandir(cwd), key=lambda e: e.name)
    except OSError:
        return ()
    folders = [
        e.path for e in entries
        if not e.name.startswith(".") and e.name not in _SKIPPED_FOLDERS and _is_folder(e)
        and not os.path.isfile(os.path.join(e.path, "__init__.py"))
    ]
    return tuple(folders) if len(folders) <= 32 else ()


def _is_folder(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:  # a symbolic link loop
        return False


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
    if not stat_module.S_ISREG(stat.st_mode):
        return ()  # a FIFO or a device named like source: reading it could block forever
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _FILE_IMPORTS:
        _FILE_IMPORTS[key] = _scan_imports(path, _text(path))
    return _FILE_IMPORTS[key]


def _scan_imports(path: str, text: str) -> tuple[str, ...]:
    found: list[str] = []
    own = os.path.realpath(path)
    for match in _IMPORT_LINE.finditer(text):
        dots, module, imported, plain = match.groups()
        if plain is None:  # `from [dots]module import a, b`: a and b may be modules themselves
            level = len(dots or "")
            submodules = [f"{module}.{n}" if module else n for n in _imported_names(imported)]
            names = [(level, module), *((level, m) for m in submodules)]
        else:
            names = [(0, m.strip()) for m in plain.split(",")]
        for level, name in names:
            if not name and not level:
                continue
            target = module_file(path, level, name)
            if target is None and level == 0 and "." in name:  # `import pkg.mod` also runs pkg/__init__.py
                target = module_file(path, 0, name.rsplit(".", 1)[0])
            if target is not None and target not in found and target != own:
                found.append(target)
    return tuple(found)


def _imported_names(text: str) -> list[str]:
    """The names of `import a, b as c` after `from x`: a and b."""
    return [part.split()[0] for part in text.split(",") if part.split()]


def dependencies(path: str, text: str, limit: int = 200) -> list[str]:
    """Every project file `path` imports, directly or through other project files (bounded by `limit`), and
    the project files that import it (their calls are what some findings of `path` rest on)."""
    seen: list[str] = []
    queue = list(imported_modules(path, text))
    while queue and len(seen) < limit:
        current = queue.pop(0)
        if current not in seen:
            seen.append(current)
            queue.extend(_file_imports(current))
    own = os.path.realpath(path)
    seen.extend(p for p in importers(own) if p not in seen and p != own)
    return seen


# -- importers ------------------------------------------------------------------------------------

# A project with more Python files than this gets no importer index: scanning it would cost every run.
MAX_PROJECT_FILES = 2000
_PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg", "torchlint.toml")
_SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"})
# Per run (see `new_run`): project folder of a file's folder; importers of each module, per project folder.
_PROJECT_OF: dict[str, str] = {}
_IMPORTERS: dict[str, Optional[dict[str, list[str]]]] = {}


def new_run() -> None:
    """Forget the project layout: files may have been added, removed or edited since the last run."""
    _PROJECT_OF.clear()
    _IMPORTERS.clear()


def project_folder(path: str) -> str:
    """The folder whose files can import `path`: the nearest one above it marked as a project (version
    control, packaging or torchlint configuration), else the current directory when it holds the file,
    else the folder above the file's top-level package."""
    folder = os.path.dirname(os.path.realpath(path))
    if folder not in _PROJECT_OF:
        _PROJECT_OF[folder] = _project_folder(folder)
    return _PROJECT_OF[folder]


def _project_folder(folder: str) -> str:
    marked = marked_ancestor(folder, _PROJECT_MARKERS)
    if marked is not None:
        return marked
    cwd = os.path.realpath(os.getcwd())
    if folder == cwd or folder.startswith(cwd + os.sep):
        return cwd
    return package_parent(folder)


def _project_files(root: str) -> Optional[list[str]]:
    """The project's Python files; None when there are too many to scan."""
    found: list[str] = []
    for directory, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if not f.startswith(".") and f not in _SKIPPED_FOLDERS)
        for name in sorted(files):
            if name.endswith(".py"):
                if len(found) >= MAX_PROJECT_FILES:
                    return None
                found.append(os.path.realpath(os.path.join(directory, name)))
    return found


def importers(path: str) -> list[str]:
    """The project files that import the module `path` directly. A project too large to scan (a monorepo,
    a folder of many checkouts) is narrowed to the current directory when it holds the module, else to the
    folder above the module's top-level package, whose files are the ones that import it by its plain name."""
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    cwd = os.path.realpath(os.getcwd())
    linted = [cwd] if folder.startswith(cwd + os.sep) else []  # the folder being linted, inside a monorepo
    for root in dict.fromkeys([project_folder(path), *linted, package_parent(folder)]):
        index = _importer_index(root)
        if index is not None:
            return list(index.get(real, ()))
    return []


def _importer_index(root: str) -> Optional[dict[str, list[str]]]:
    """Importing files of each module under `root`; None when `root` holds too many files to scan."""
    if root not in _IMPORTERS:
        files = _project_files(root)
        index: Optional[dict[str, list[str]]] = None
        if files is not None:
            index = {}
            for file in files:
                for target in _file_imports(file):
                    index.setdefault(target, []).append(file)
        _IMPORTERS[root] = index
    return _IMPORTERS[root]


@dataclass(frozen=True)
class CallSite:
    summary: "ModuleSummary"  # the calling file: `.context` and `.model` (its SemanticModel)
    call: cst.Call


# How many importing files one question reads (each is parsed and summarised).
MAX_CALLER_FILES = 16


def call_sites(path: str, name: str, depth: int = 0) -> list[CallSite]:
    """Calls, in the files that import `path`, of the top-level function or class `name` it defines (also
    through a package's `__init__.py` that re-exports it: `from pkg.metrics import score`)."""
    target = os.path.realpath(path)
    found: list[CallSite] = []
    for caller in _caller_summaries(target, name):
        for local in dict.fromkeys([name, *caller.context.imports.locals_of(name)]):  # `import name as local`
            for node in caller.calls_named(local):
                if _names_definition(caller.context, node.func, target, name):
                    found.append(CallSite(caller, node))
    if depth < 2:
        for package in _re_exporters(target, name):
            found.extend(call_sites(package, name, depth + 1))
    return found


def _re_exporters(target: str, name: str) -> list[str]:
    """The package `__init__.py` files importing `target` that bind `name` only by importing it from there."""
    found = []
    for file in importers(target)[:MAX_CALLER_FILES]:
        if os.path.basename(file) != "__init__.py" or file == target or name not in _text(file):
            continue
        package = summary(file)
        if package is None or package.definition(name) is not None:
            continue
        origin = package.context.imports.origin(name)
        if origin is not None and origin[2] == name and module_file(file, origin[0], origin[1]) == target:
            found.append(file)
    return found


def method_call_sites(path: str, method: str) -> list[CallSite]:
    """Calls `<expr>.method(...)`, in the files that import `path`, by the method's name alone (the receiver
    is for the asker to confirm)."""
    found: list[CallSite] = []
    target = os.path.realpath(path)
    for caller in _caller_summaries(target, method):
        found.extend(CallSite(caller, node) for node in caller.calls_named(method) if isinstance(node.func, cst.Attribute))
    if not found:  # objects built by a factory module (`model = create_model(opt)`): the factory's importers
        files = list(dict.fromkeys(f for factory in importers(target)[:MAX_CALLER_FILES] for f in importers(factory)))
        for caller in _summaries_spelling(files, method, target):
            found.extend(CallSite(caller, node) for node in caller.calls_named(method) if isinstance(node.func, cst.Attribute))
    return found


def importers_spelling(path: str, name: str) -> list[str]:
    """The project files that import `path` and spell `name` (calls through `import *` included)."""
    target = os.path.realpath(path)
    return [file for file in importers(target) if file != target and name in _text(file)]


def _caller_summaries(target: str, name: str) -> list["ModuleSummary"]:
    """Summaries of the files that import `target` and spell `name` (the others cannot call it)."""
    return _summaries_spelling(importers(target), name, target)


def _summaries_spelling(files: list[str], name: str, target: str) -> list["ModuleSummary"]:
    found = []
    for file in files[:MAX_CALLER_FILES]:
        if file != target and _may_call(file, name):
            caller = summary(file)
            if caller is not None:
                found.append(caller)
    return found


def _may_call(path: str, name: str) -> bool:
    """Whether the text of `path` could call `name` (`name(`, `x.name(`) or import it under another name
    (`name as local`): a cheap scan that spares parsing and summarising a file that only mentions it."""
    try:
        stat = os.stat(path)
    except OSError:
        return False
    return _spells_call(path, stat.st_mtime_ns, stat.st_size, name)


@lru_cache(maxsize=4096)
def _spells_call(path: str, mtime: int, size: int, name: str) -> bool:
    text = _text(path)
    if name not in text:
        return False
    # between a name and its `(` or `as`: spaces, line breaks, continuations, comments, closing brackets (`(f)(x)`)
    return re.search(r"(?<!\w)" + re.escape(name) + r"(?:\s|\\|\)|#[^\n]*\n)*(?:\(|as(?!\w))", text) is not None


def read_text(path: str) -> Optional[str]:
    """The first MAX_SUMMARY_BYTES characters of a project file (None when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(MAX_SUMMARY_BYTES)
    except OSError:
        return None


def _text(path: str) -> str:
    return read_text(path) or ""


def _names_definition(context: "Context", func: cst.BaseExpression, target: str, name: str) -> bool:
    """Whether `func`, in the importing file of `context`, is the definition `name` of the module `target`."""
    here = context.source.path
    if isinstance(func, cst.Name):
        origin = context.imports.origin(func.value)
        if origin is None:  # `from module import *` of the defining module, the name bound nowhere in the file
            return not context.bindings(context.module).get(func.value) and any(
                module_file(here, dots, module) == target for dots, module in context.imports.stars
            )
        return origin[2] == name and module_file(here, origin[0], origin[1]) == target
    if not (isinstance(func, cst.Attribute) and func.attr.value == name):
        return False
    base = func.value
    if isinstance(base, cst.Name):
        origin = context.imports.origin(base.value)  # `from pkg import module` ... `module.name(...)`
        if origin is not None:
            dots, module, attr = origin
            return module_file(here, dots, f"{module}.{attr}" if module else attr) == target
    qualified = context.imports.resolve(base)  # `import pkg.module [as m]` ... `m.name(...)`
    return qualified is not None and module_file(here, 0, qualified) == target


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
    return _mention_pattern(words).search(_text(path)) is not None


@lru_cache(maxsize=64)
def _mention_pattern(words: tuple[str, ...]) -> "re.Pattern[str]":
    """Any of `words`; one that begins with a letter must begin a name in the text (`int(` is not in `print(`)."""
    return re.compile("|".join((r"(?<!\w)" if word[:1].isidentifier() else "") + re.escape(word) for word in words))


def imported(
    context: "Context", name: cst.BaseExpression, mentions: tuple[str, ...] = ()
) -> Optional[tuple[ModuleSummary, str]]:
    """The project module a name (or `module.attr`) comes from, with the name it has there (see `summary`
    for `mentions`)."""
    if isinstance(name, cst.Name):
        origin = context.imports.origin(name.value)
        if origin is None:
            return _star_imported(context, name.value, mentions)
        dots, module, attr = origin
        target = module_file(context.source.path, dots, module)
        if target is None:  # `from package import module`, then `module.name`: not a name in a module
            return None
        found = summary(target, mentions)
        if found is not None and found.definition(attr) is None and _re_exports(found, attr):
            # `from .trainer import BERTTrainer` where trainer/__init__.py imports it from its own module
            return imported(found.context, cst.Name(attr), mentions)
        return (found, attr) if found is not None else None
    if isinstance(name, cst.Attribute) and isinstance(name.value, cst.Name):
        origin = context.imports.origin(name.value.value)  # `from . import utils` ... `utils.helper`
        if origin is not None:
            dots, module, attr = origin
            target = module_file(context.source.path, dots, f"{module}.{attr}" if module else attr)
            found = summary(target, mentions) if target is not None else None
            return (found, name.attr.value) if found is not None else None
        plain = context.qualname(name.value)  # `import data_utils` ... `data_utils.NCFData`
        target = module_file(context.source.path, 0, plain) if plain else None
        found = summary(target) if target is not None else None
        return (found, name.attr.value) if found is not None else None
    return None


def _star_imported(context: "Context", name: str, mentions: tuple[str, ...]) -> Optional[tuple[ModuleSummary, str]]:
    """`name` unbound in the file, defined by a project module it imports with `from module import *`."""
    if not context.imports.stars or context.bindings(context.module).get(name):
        return None
    for dots, module in reversed(context.imports.stars):  # the last star import wins, as in Python
        target = module_file(context.source.path, dots, module)
        found = summary(target, mentions) if target is not None else None
        if found is not None and found.definition(name) is not None:
            return found, name
    return None


def _re_exports(module: ModuleSummary, name: str) -> bool:
    """The module binds `name` only by importing it from a module of its own package (`from .pretrain import
    BERTTrainer` in a package's `__init__.py`)."""
    origin = module.context.imports.origin(name)
    return origin is not None and origin[0] > 0 and bool(origin[1]) and os.path.basename(module.path) == "__init__.py"


def _summarise(path: str) -> Optional[ModuleSummary]:
    from torchlint.lint.engine import prepare_context
    from torchlint.lint.source import SourceError, read_source

    try:
        return ModuleSummary(path, prepare_context(read_source(path, path), walk=True))
    except (SourceError, cst.ParserSyntaxError, RecursionError, ValueError):
        return None
