"""Qualified names through imports and aliases, without libcst's (costly) scope analysis.

`import torch.utils.data as tud`, `from torch.utils.data import DataLoader as DL`,
`from torch.utils.data.dataloader import DataLoader` and `from torch import nn` all resolve so that
`tud.DataLoader`, `DL`, `DataLoader` and `nn.Conv2d` give `torch.utils.data.DataLoader` and
`torch.nn.Conv2d`. A name that is both imported and rebound at module level resolves to nothing:
when in doubt, rules stay silent.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Optional

import libcst as cst

# Private submodules that re-export into a public namespace: canonical names use the public one.
_CANONICAL_PREFIXES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^torch\.utils\.data\.(dataloader|dataset|sampler|distributed)\."), "torch.utils.data."),
    (re.compile(r"^torch\.nn\.modules(\.\w+)?\."), "torch.nn."),
    (re.compile(r"^torch\.nn\.parallel\.(data_parallel|distributed)\."), "torch.nn.parallel."),
    (re.compile(r"^torch\.autograd\.grad_mode\."), "torch."),
    (re.compile(r"^torch\.autograd\.(no_grad|enable_grad|inference_mode|set_grad_enabled)$"), "torch.\\1"),
    (re.compile(r"^torch\.amp\.autocast_mode\."), "torch.amp."),
    (re.compile(r"^torch\.amp\.grad_scaler\."), "torch.amp."),
    (re.compile(r"^torch\.cuda\.amp\.(autocast_mode|grad_scaler)\."), "torch.cuda.amp."),
    (re.compile(r"^torch\.optim\.(?!lr_scheduler\.|swa_utils\.)\w+\.(?=[A-Z])"), "torch.optim."),
    (re.compile(r"^torch\.functional\."), "torch."),
    (re.compile(r"^torch\._tensor\.Tensor"), "torch.Tensor"),
)
_PUBLIC_ALIASES = {
    "torch.amp.autocast": "torch.autocast",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
}


# What these names almost always are in PyTorch code that uses them without importing them (they came
# through a star import such as `from utils import *`, or the file is a snippet). Used only for names
# the file does not bind itself.
_IMPLICIT = {
    "torch": "torch",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "optim": "torch.optim",
    "DataLoader": "torch.utils.data.DataLoader",
}


def canonical(name: str) -> str:
    """The public spelling of a dotted name (`torch.utils.data.dataloader.DataLoader` -> `torch.utils.data.DataLoader`)."""
    for pattern, replacement in _CANONICAL_PREFIXES:
        name = pattern.sub(replacement, name, count=1)
    return _PUBLIC_ALIASES.get(name, name)


def dotted(node: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for a chain of Name/Attribute nodes, else None."""
    parts: list[str] = []
    while type(node) is cst.Attribute:  # exact types: see `walk.is_a`
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def last_name(node: cst.CSTNode) -> Optional[str]:
    """The last segment of a Name/Attribute (`self.model.eval` -> "eval"), else None."""
    kind = type(node)  # exact types: see `walk.is_a`
    if kind is cst.Name:
        return node.value  # type: ignore[attr-defined]
    if kind is cst.Attribute:
        return node.attr.value  # type: ignore[attr-defined]
    return None


def _module_name(node: cst.BaseExpression) -> str:
    return dotted(node) or ""


class ImportTable:
    """Local name -> qualified name, built from the import statements seen so far."""

    def __init__(self) -> None:
        self._aliases: dict[str, str] = {}
        self._shadowed: set[str] = set()
        self._origins: dict[str, tuple[int, str, str]] = {}  # local -> (dots, module, imported name)
        self.stars: list[tuple[int, str]] = []  # `from [dots]module import *`: (dots, module)

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                module = _module_name(alias.name)
                if alias.asname is not None:
                    local = alias.asname.name
                    if isinstance(local, cst.Name):
                        self._bind(local.value, module)
                else:
                    # `import torch.nn` binds `torch`
                    top = module.split(".")[0]
                    self._bind(top, top)
            return
        dots = len(node.relative)
        module = _module_name(node.module) if node.module is not None else ""
        if isinstance(node.names, cst.ImportStar):
            self.stars.append((dots, module))
            return
        for alias in node.names:
            imported = _module_name(alias.name)
            local = imported
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            if local in self._shadowed and local not in self._origins:
                continue
            self._origins[local] = (dots, module, imported)
            if dots:
                # project code: not a library's qualified name, and not torch's either when used unbound
                self._aliases.pop(local, None)
                self._shadowed.add(local)
            else:
                self._bind(local, f"{module}.{imported}")

    def _bind(self, local: str, qualified: str) -> None:
        if local in self._shadowed:
            return
        self._aliases[local] = qualified

    def origin(self, local: str) -> Optional[tuple[int, str, str]]:
        """Where `from [dots]module import name [as local]` took `local` from: (dots, module, name)."""
        return self._origins.get(local)

    def locals_of(self, imported: str) -> list[str]:
        """The local names `from ... import <imported> [as local]` bound."""
        return [local for local, origin in self._origins.items() if origin[2] == imported]

    def shadow(self, names: Iterable[str]) -> None:
        """Names rebound by assignment, def or class at module level: never resolve them."""
        for name in names:
            self._shadowed.add(name)
            self._aliases.pop(name, None)
            self._origins.pop(name, None)

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        """The canonical qualified name of a Name/Attribute chain rooted at an imported name."""
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = self._aliases.get(head)
        if base is None:
            if head in self._shadowed:
                return None
            base = _IMPLICIT.get(head)
            if base is None:
                return None
        return canonical(f"{base}.{rest}" if rest else base)

    def local_name_for(self, module: str) -> Optional[str]:
        """The local name bound to `module` by an import (`import torch as th` -> "th"), else None."""
        for local, qualified in self._aliases.items():
            if qualified == module:
                return local
        return None

    def is_bound(self, local: str) -> bool:
        return local in self._aliases or local in self._shadowed


def module_level_bindings(module: cst.Module) -> tuple[list[cst.Import | cst.ImportFrom], list[str]]:
    """Top-level imports (also inside top-level if/try blocks) and the other names bound at top level."""
    imports: list[cst.Import | cst.ImportFrom] = []
    rebound: list[str] = []

    def scan(statements: Iterable[cst.CSTNode]) -> None:
        for stmt in statements:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        imports.append(small)
                    elif isinstance(small, cst.Assign):
                        for target in small.targets:
                            rebound.extend(_target_names(target.target))
                    elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                        rebound.extend(_target_names(small.target))
            elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                rebound.append(stmt.name.value)
            elif isinstance(stmt, (cst.If, cst.Try, cst.TryStar, cst.With)):
                scan(_blocks_of(stmt))

    scan(module.body)
    return imports, rebound


def _blocks_of(stmt: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock):
        out.extend(body.body)
    for attr in ("orelse", "finalbody"):
        part = getattr(stmt, attr, None)
        if part is not None:
            if isinstance(part, cst.If):
                out.append(part)
            elif hasattr(part, "body") and isinstance(part.body, cst.IndentedBlock):
                out.extend(part.body.body)
    for handler in getattr(stmt, "handlers", ()) or ():
        if isinstance(handler.body, cst.IndentedBlock):
            out.extend(handler.body.body)
    return out


def flatten_targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The single targets of an assignment target: `a, (b, *c)` -> [a, b, c]."""
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[cst.BaseExpression] = []
        for element in target.elements:
            out.extend(flatten_targets(element.value))
        return out
    if isinstance(target, cst.StarredElement):
        return flatten_targets(target.value)
    return [target]


def target_names(target: cst.BaseExpression) -> Iterator[str]:
    """The plain names an assignment target binds (`a`, `a, (b, *c)`); attributes and subscripts bind none."""
    for single in flatten_targets(target):
        if isinstance(single, cst.Name):
            yield single.value


def bound_value(target: cst.BaseExpression, value: cst.BaseExpression, name: str) -> Optional[cst.BaseExpression]:
    """What `name` is bound to by `target = value`: `value` for a plain name, the matching element of tuples
    assigned element by element (`x, (y, z) = a, (b, c)`), None when that cannot be told (a starred element,
    lengths that differ, a right side that is no tuple)."""
    if isinstance(target, cst.Name):
        return value if target.value == name else None
    if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))):
        return None
    elements = (*target.elements, *value.elements)
    if len(target.elements) != len(value.elements) or any(isinstance(e, cst.StarredElement) for e in elements):
        return None
    for t, v in zip(target.elements, value.elements):
        found = bound_value(t.value, v.value, name)
        if found is not None:
            return found
    return None


def _target_names(target: cst.BaseExpression) -> list[str]:
    return [t.value for t in flatten_targets(target) if isinstance(t, cst.Name)]
