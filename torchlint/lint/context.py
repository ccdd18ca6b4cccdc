"""Facts about one file that every rule can ask for: qualified names, parents, scopes, constants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, TypeVar

import libcst as cst
from libcst._nodes.internal import CodegenState  # what Module.code_for_node uses

from torchlint.lint.names import ImportTable, dotted, flatten_targets
from torchlint.lint.scope import Binding, ScopeBindings, ScopeNode
from torchlint.lint.source import SourceFile
from torchlint.lint.walk import is_a

if TYPE_CHECKING:
    from torchlint.lint.proposal import Fix


class _Unknown:
    """The value of an expression the linter cannot decide."""

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        raise TypeError("UNKNOWN has no truth value; compare with `is UNKNOWN`")


UNKNOWN: Any = _Unknown()
T = TypeVar("T")

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_COMPREHENSION_TYPES = frozenset(_COMPREHENSIONS)  # final classes: libcst derives nothing from them
_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


@dataclass(frozen=True)
class RawFinding:
    code: str
    node: cst.CSTNode
    statement: Optional[cst.CSTNode]
    message: str
    fix: Optional["Fix"]


class Context:
    """Shared, per-file facts. Rules reach it as `self.context`."""

    def __init__(self, source: SourceFile, module: cst.Module, imports: ImportTable) -> None:
        self.source = source
        self.module = module
        self.imports = imports
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.current: Optional[cst.CSTNode] = None  # the node the engine is visiting or leaving
        self._filled: set[cst.CSTNode] = set()
        self._complete = False  # every node's parent is known
        self.raw_findings: list[RawFinding] = []
        self._scopes: dict[cst.CSTNode, ScopeBindings] = {}
        self._shared: dict[Callable[["Context"], Any], Any] = {}

    # -- names ---------------------------------------------------------------------------------
    def qualname(self, node: cst.CSTNode) -> Optional[str]:
        """Canonical dotted name of an imported object (`DL` -> `torch.utils.data.DataLoader`), or None."""
        if type(node) is cst.Call:  # exact types: see `walk.is_a`
            node = node.func  # type: ignore[attr-defined]
        if type(node) is cst.Name or type(node) is cst.Attribute:
            return self.imports.resolve(node)  # type: ignore[arg-type]
        return None

    def local_name_for(self, module: str) -> str:
        """How this file spells `module` (`import torch as th` -> "th"); the module name if not imported."""
        return self.imports.local_name_for(module) or module

    @staticmethod
    def dotted(node: cst.CSTNode) -> Optional[str]:
        """`a.b.c` as written, for a Name/Attribute chain (no import resolution)."""
        return dotted(node) if isinstance(node, (cst.Name, cst.Attribute)) else None

    def code(self, node: cst.CSTNode, at: Optional[cst.CSTNode] = None) -> str:
        """Source text of `node` as it would stand at `at` (default: where `node` itself stands).

        libcst keeps the indentation of continuation lines implicit; rendering a node with the
        indentation of the blocks around its place gives the text exactly as the file shows it.
        """
        return render(self.module, node, self.block_indents(at if at is not None else node))

    def block_indents(self, node: cst.CSTNode) -> list[str]:
        """The indentation each enclosing block adds, outermost first (empty for a node not in the tree)."""
        default = self.module.default_indent
        blocks = [a for a in self.ancestors(node) if isinstance(a, cst.IndentedBlock)]
        return [b.indent if b.indent is not None else default for b in reversed(blocks)]

    # -- tree ----------------------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        found = self.parents.get(node)
        if found is None and node is not self.module:
            # The walk records parents as it goes down; a rule looking below the node being visited
            # gets that node's subtree filled in on demand, and a question about a node the walk has not
            # reached yet (a helper defined further down) gets the whole file: otherwise the answer would
            # depend on when it was first asked, that is on which rules run.
            if self._complete:
                return None
            self._fill(self.current)
            found = self.parents.get(node)
            if found is None:
                self._fill_all()
                found = self.parents.get(node)
        return found

    def take_parents(self, parents: dict[cst.CSTNode, cst.CSTNode]) -> None:
        """Every node's parent, found by an earlier complete walk of this same tree (shared: never changed)."""
        self.parents = parents
        self._complete = True

    def parents_known(self) -> None:
        """The walk has recorded every node's parent: no question fills the tree in again."""
        self._complete = True

    def _fill_all(self) -> None:
        """Every node's parent, once (no subtree bookkeeping: nothing is left to fill after it)."""
        from torchlint.lint.walk import semantic_children

        self._complete = True
        parents = self.parents
        stack = [self.module]
        while stack:
            node = stack.pop()
            for child in semantic_children(node):
                parents[child] = node
                stack.append(child)

    def _fill(self, top: Optional[cst.CSTNode]) -> None:
        if top is None or self._complete or top in self._filled:
            return
        from torchlint.lint.walk import semantic_children

        stack = [top]
        while stack:
            node = stack.pop()
            self._filled.add(node)
            for child in semantic_children(node):
                self.parents[child] = node
                stack.append(child)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def enclosing(self, node: cst.CSTNode, *types: type) -> Optional[cst.CSTNode]:
        for ancestor in self.ancestors(node):
            if is_a(ancestor, types):
                return ancestor
        return None

    def enclosing_function(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        return self.enclosing(node, cst.FunctionDef)  # type: ignore[return-value]

    def enclosing_statement(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        if isinstance(node, _STATEMENTS):
            return node
        return self.enclosing(node, *_STATEMENTS)

    def shared(self, factory: Callable[["Context"], T]) -> T:
        """A per-file analysis shared by every rule that asks for it, built by `factory(context)` on first use."""
        try:
            return self._shared[factory]
        except KeyError:
            found = self._shared[factory] = factory(self)
            return found

    # -- scopes and constant flow --------------------------------------------------------------
    def bindings(self, scope: ScopeNode) -> ScopeBindings:
        found = self._scopes.get(scope)
        if found is None:
            found = self._scopes[scope] = ScopeBindings(scope)
        return found

    def lookup(self, name: cst.Name) -> Optional[list[Binding]]:
        """The bindings `name` may refer to, from the innermost scope that binds it.

        None when it cannot be known (bound by a comprehension, declared global/nonlocal, or unbound).
        """
        for ancestor in self.ancestors(name):
            kind = type(ancestor)  # exact types: isinstance against libcst's classes goes through abc, slowly
            if kind in _COMPREHENSION_TYPES and _comprehension_binds(ancestor, name.value):
                return None
            if kind is cst.FunctionDef or kind is cst.Lambda:
                scope = self.bindings(ancestor)
                if name.value in scope.globals:
                    return None
                found = scope.get(name.value)
                if found:
                    return found
        found = self.bindings(self.module).get(name.value)
        return found or None

    def is_parameter(self, name: cst.Name) -> bool:
        """`name` is bound here only as a parameter of its function: its value is whatever callers pass."""
        bindings = self.lookup(name)
        return bool(bindings) and all(b.kind == "param" for b in bindings)  # type: ignore[union-attr]

    def assigned_value(self, name: cst.Name) -> Optional[cst.BaseExpression]:
        """The expression of the single plain assignment `name = value` that binds `name`, else None."""
        bindings = self.lookup(name)
        if not bindings or len(bindings) != 1 or bindings[0].kind != "assign":
            return None
        return bindings[0].value

    def literal(self, node: Optional[cst.BaseExpression], _depth: int = 0) -> Any:
        """The Python value of a literal expression, following names through single assignments.

        Returns UNKNOWN for anything it cannot decide.
        """
        if node is None or _depth > 8:
            return UNKNOWN
        if isinstance(node, cst.Integer):
            return int(node.value.replace("_", ""), 0)
        if isinstance(node, cst.Float):
            return float(node.value.replace("_", ""))
        if isinstance(node, cst.SimpleString):
            try:
                return node.evaluated_value
            except Exception:
                return UNKNOWN
        if isinstance(node, cst.Name):
            if node.value in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.value]
            return self.literal(self.assigned_value(node), _depth + 1)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            value = self.literal(node.expression, _depth + 1)
            return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else UNKNOWN
        return UNKNOWN

    def release(self) -> None:
        """Drop everything this file's analysis holds (the engine calls it when the file is done)."""
        self.parents = {}  # not cleared: the map may be kept with the tree for its next reader
        self._filled.clear()
        self._complete = False
        self._scopes.clear()
        self._shared.clear()
        self.raw_findings.clear()
        self.current = None

    # -- findings ------------------------------------------------------------------------------
    def add_finding(self, code: str, node: cst.CSTNode, message: str, fix: Optional["Fix"]) -> None:
        self.raw_findings.append(RawFinding(code, node, self.enclosing_statement(node), message, fix))


def render(module: cst.Module, node: cst.CSTNode, indents: list[str]) -> str:
    """`module.code_for_node(node)`, but inside blocks indented by `indents`."""
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens.extend(indents)
    node._codegen(state)
    text = "".join(state.tokens)
    if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        prefix = "".join(indents)
        text = text[len(prefix) :] if text.startswith(prefix) else text  # it starts where the node starts
    return text


def _comprehension_binds(comp: cst.CSTNode, name: str) -> bool:
    clause = getattr(comp, "for_in", None)
    while clause is not None:
        target = clause.target
        names = [dotted(t) for t in flatten_targets(target)]
        if name in names:
            return True
        clause = clause.inner_for_in
    return False
