"""DataLoaders of a file, in one object the rules share (`Flow`): the file is indexed once here, and each
question lives in its own module: which loaders an expression holds (`loader_values.py`, one entry of a dict
of them: `loader_entries.py`), their settings
(`loader_settings.py`, `loader_parameters.py`), where their batches are read (`loader_batches.py`) and copied to a device
(`loader_copies.py`), and the loaders that cost nothing per step (`loader_exemptions.py`); the syntax they
share is in `loader_calls.py`.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants
from torchlint.semantic.loader_batches import LoaderBatches
from torchlint.semantic.loader_calls import is_dataloader
from torchlint.semantic.loader_copies import LoaderCopies
from torchlint.semantic.loader_entries import LoaderEntries
from torchlint.semantic.loader_exemptions import LoaderExemptions
from torchlint.semantic.loader_parameters import LoaderParameters
from torchlint.semantic.loader_settings import LoaderSettings
from torchlint.semantic.loader_values import LoaderValues
from torchlint.semantic.memo import CycleSafeMemo, question_stack


class Flow(LoaderValues, LoaderEntries, LoaderSettings, LoaderParameters, LoaderBatches, LoaderCopies, LoaderExemptions):
    """Per-file facts about DataLoaders and the loops that consume them (built once, shared by the rules).
    Each concept lives in its own module; this class indexes the file once for all of them."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.loaders: list[cst.Call] = []
        self.fors: list[cst.For] = []
        self.calls_by_name: dict[str, list[cst.Call]] = {}
        self.self_assigns: dict[tuple[int, str], list[cst.BaseExpression]] = {}
        # `self.train_loader, self.val_loader = make_loaders(args)`: the assignments that unpack into an attribute
        self.self_unpacked: dict[tuple[int, str], list[cst.Assign]] = {}
        self._argparse: dict[str, list[cst.Call]] = {}
        self._memo: CycleSafeMemo[cst.BaseExpression, Optional[frozenset]] = CycleSafeMemo(None, question_stack(context))
        self._loops_memo: dict[int, list[tuple[cst.For, cst.BaseExpression]]] = {}
        self._transfers_memo: dict[int, list[cst.Call]] = {}
        self._helper_copies: dict[int, list[tuple[Context, cst.Call]]] = {}
        self.getitem_moves: Optional[bool] = None
        self._cpu_program: Optional[bool] = None
        self._program_sources: Optional[list[str]] = None
        self._sources_active: set[int] = set()
        self._remote = False  # whether `batch_sources` may ask other files (see `batch_reads`)
        self._reads: Optional[dict[object, list[tuple[cst.CSTNode, cst.BaseExpression]]]] = None
        self._names: Optional[dict[str, list[cst.Name]]] = None
        for node in descendants(context.module):
            kind = type(node)  # exact types: see `walk.is_a`
            if kind is cst.Call:
                name = last_name(node.func)
                if name is None:
                    continue
                if is_dataloader(context, node):
                    self.loaders.append(node)
                elif name == "add_argument":
                    self._add_argument(node)
                self.calls_by_name.setdefault(name, []).append(node)
            elif kind is cst.For:
                self.fors.append(node)
            elif kind is cst.Assign and len(node.targets) == 1:
                target = node.targets[0].target
                cls = context.enclosing(node, cst.ClassDef)
                if cls is None:
                    continue
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
                    self.self_assigns.setdefault((id(cls), target.attr.value), []).append(node.value)
                elif isinstance(target, (cst.Tuple, cst.List)):
                    for element in target.elements:
                        if isinstance(element.value, cst.Attribute) and isinstance(element.value.value, cst.Name):
                            self.self_unpacked.setdefault((id(cls), element.value.attr.value), []).append(node)

    def _uses(self, name: str) -> list[cst.Name]:
        if self._names is None:
            self._names = {}
            for node in descendants(self.context.module):
                if isinstance(node, cst.Name):
                    self._names.setdefault(node.value, []).append(node)
        return self._names.get(name, [])

    def _within(self, node: cst.CSTNode, scope: cst.CSTNode) -> bool:
        return scope is self.context.module or any(a is scope for a in self.context.ancestors(node))


def flow(context: Context) -> Flow:
    """The shared loader analysis of this file (call it from `leave_Module`, when every parent is known)."""
    return context.shared(Flow)
