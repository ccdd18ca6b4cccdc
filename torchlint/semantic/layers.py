"""Layer order: which layer feeds which, in an `nn.Sequential` and in a module's `forward()`.

Rules that judge a pair of adjacent layers (a convolution followed by BatchNorm) ask here for the pairs.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Optional

import libcst as cst

from torchlint.lint.calls import positional
from torchlint.lint.context import Context
from torchlint.lint.walk import descendants

_STATEMENT_BLOCKS = (cst.IndentedBlock, cst.Module)


def _self_attr(node: cst.BaseExpression) -> Optional[str]:
    """`self.conv1` -> "conv1"."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _single_assign(stmt: cst.CSTNode) -> Optional[cst.Assign]:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        assign = stmt.body[0]
        if len(assign.targets) == 1:
            return assign
    return None



class LayerOrder:
    """Adjacent layers of one file, found once and shared."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._lists: dict[cst.CSTNode, dict[str, list[list[Optional[cst.BaseExpression]]]]] = {}

    def sequence_items(self, call: cst.Call) -> Iterator[list[Optional[cst.BaseExpression]]]:
        """The runs of layers an `nn.Sequential(...)` call holds, in order (None where one is unknown)."""
        return self._sequences(call)

    def forward_pairs(self, cls: cst.ClassDef) -> Iterator[tuple[cst.Call, cst.Call]]:
        """(first, second) layer constructions of a module class whose forward feeds the first's output,
        and nothing else, into the second (`x = self.conv(x); x = self.bn(x)` or `self.bn(self.conv(x))`)."""
        assigned: dict[str, list[cst.BaseExpression]] = {}
        uses: dict[str, int] = {}
        targets: set[cst.CSTNode] = set()
        pairs: list[tuple[str, str]] = []
        for child in descendants(cls.body):
            if isinstance(child, cst.Assign):
                for target in child.targets:
                    attr = _self_attr(target.target)
                    if attr is not None:
                        targets.add(target.target)
                        assigned.setdefault(attr, []).append(child.value)
            elif isinstance(child, cst.Attribute):
                attr = _self_attr(child)
                if attr is not None and child not in targets:
                    uses[attr] = uses.get(attr, 0) + 1
            elif isinstance(child, cst.Call):
                outer = _self_attr(child.func)
                args = child.args
                if outer is not None and len(args) == 1 and args[0].keyword is None and args[0].star == "":
                    inner = args[0].value
                    if isinstance(inner, cst.Call):
                        conv = _self_attr(inner.func)
                        if conv is not None:
                            pairs.append((conv, outer))
            elif isinstance(child, cst.IndentedBlock):
                pairs.extend(_statement_pairs(child.body))
        if not pairs:
            return
        for conv, norm in pairs:
            if len(assigned.get(conv, ())) != 1 or len(assigned.get(norm, ())) != 1 or uses.get(conv) != 1:
                continue
            first, second = assigned[conv][0], assigned[norm][0]
            if isinstance(first, cst.Call) and isinstance(second, cst.Call):
                yield first, second

    def _sequences(self, call: cst.Call) -> Iterator[list[Optional[cst.BaseExpression]]]:
        items: list[Optional[cst.BaseExpression]] = []
        args = list(call.args)
        if len(args) == 1 and args[0].star == "" and args[0].keyword is None:
            ordered = self._ordered_dict_items(args[0].value)
            if ordered is not None:
                yield ordered
                return
        for arg in args:
            if arg.keyword is not None or arg.star == "**":
                items.append(None)
            elif arg.star == "*":
                value = arg.value
                if isinstance(value, (cst.List, cst.Tuple)):
                    items.append(None)
                    items.extend(e.value if isinstance(e, cst.Element) else None for e in value.elements)
                    items.append(None)
                elif isinstance(value, cst.Name):
                    items.append(None)
                    yield from self._built_lists(call, value.value)
                else:
                    items.append(None)
            else:
                items.append(arg.value)
        yield items

    def _ordered_dict_items(self, value: cst.BaseExpression) -> Optional[list[Optional[cst.BaseExpression]]]:
        """`OrderedDict([("conv", Conv2d(...)), ("bn", BatchNorm2d(...))])` -> the modules in order."""
        if not isinstance(value, cst.Call) or self.context.qualname(value) != "collections.OrderedDict":
            return None
        args = positional(value)
        if len(args) != 1 or not isinstance(args[0].value, (cst.List, cst.Tuple)):
            return None
        out: list[Optional[cst.BaseExpression]] = []
        for element in args[0].value.elements:
            pair = element.value
            if isinstance(pair, cst.Tuple) and len(pair.elements) == 2:
                out.append(pair.elements[1].value)
            else:
                out.append(None)
        return out

    def _built_lists(self, call: cst.Call, name: str) -> list[list[Optional[cst.BaseExpression]]]:
        """Runs of list building for `name` in the scope of `call` (`layers = [...]`, `+=`, `.extend`, `.append`)."""
        scope = self.context.enclosing_function(call) or self.context.module
        found = self._lists.get(scope)
        if found is None:
            found = self._lists[scope] = self._scan_lists(scope)
        return found.get(name, [])

    def _scan_lists(self, scope: cst.CSTNode) -> dict[str, list[list[Optional[cst.BaseExpression]]]]:
        runs: dict[str, list[list[Optional[cst.BaseExpression]]]] = {}
        blocks: Iterable[cst.CSTNode] = [scope] if isinstance(scope, cst.Module) else []
        nodes = descendants(scope)
        for node in [*blocks, *nodes]:
            if not isinstance(node, _STATEMENT_BLOCKS):
                continue
            current_name: Optional[str] = None
            current: list[Optional[cst.BaseExpression]] = []
            for stmt in node.body:
                added = self._list_addition(stmt)
                if added is None or added[0] != current_name:
                    if current_name is not None and len(current) > 1:
                        runs.setdefault(current_name, []).append(current)
                    current_name, current = (added[0], list(added[1])) if added else (None, [])
                else:
                    current.extend(added[1])
            if current_name is not None and len(current) > 1:
                runs.setdefault(current_name, []).append(current)
        return runs

    @staticmethod
    def _list_addition(stmt: cst.CSTNode) -> Optional[tuple[str, list[Optional[cst.BaseExpression]]]]:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        elements: Optional[cst.BaseExpression] = None
        target: Optional[cst.BaseExpression] = None
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target, elements = small.targets[0].target, small.value
        elif isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
            target, elements = small.target, small.value
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
            if isinstance(call.func, cst.Attribute) and len(call.args) == 1 and call.args[0].star == "":
                target = call.func.value
                if call.func.attr.value == "append":
                    if isinstance(target, cst.Name):
                        return target.value, [call.args[0].value]
                    return None
                if call.func.attr.value == "extend":
                    elements = call.args[0].value
        if not isinstance(target, cst.Name) or not isinstance(elements, (cst.List, cst.Tuple)):
            return None
        return target.value, [e.value if isinstance(e, cst.Element) and not isinstance(e, cst.StarredElement) else None for e in elements.elements]


def _statement_pairs(body: Iterable[cst.CSTNode]) -> list[tuple[str, str]]:
    """`x = self.conv(...)` directly followed by `x = self.bn(x)` (or `x = act(self.bn(x))`)."""
    pairs = []
    previous: Optional[tuple[str, str]] = None  # (variable, conv attribute)
    for stmt in body:
        assign = _single_assign(stmt)
        current = None
        if assign is not None and isinstance(assign.targets[0].target, cst.Name):
            variable = assign.targets[0].target.value
            value = assign.value
            if previous is not None and previous[0] == variable:
                norm = _norm_call_on(value, variable)
                if norm is not None:
                    pairs.append((previous[1], norm))
            if isinstance(value, cst.Call):
                conv = _self_attr(value.func)
                if conv is not None:
                    current = (variable, conv)
        previous = current
    return pairs


def _norm_call_on(value: cst.BaseExpression, variable: str) -> Optional[str]:
    """The attribute `X` when `value` uses `variable` exactly once, as the only argument of `self.X(...)`."""
    found: Optional[str] = None
    count = 0
    for node in [value, *descendants(value)]:
        if isinstance(node, cst.Name) and node.value == variable:
            count += 1
        if isinstance(node, cst.Call) and len(node.args) == 1:
            arg = node.args[0]
            if arg.keyword is None and arg.star == "" and isinstance(arg.value, cst.Name) and arg.value.value == variable:
                found = _self_attr(node.func)
    return found if count == 1 else None
