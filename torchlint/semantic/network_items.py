"""Network items: a network taken out of a container that holds only networks, whatever it is called.

An ensemble keeps its members in a list (`self.members = [Net() for _ in range(k)]`, `models.append(load(p))`)
or a dict (`self.heads = {"cls": ClsHead(), "box": BoxHead()}`), or in an `nn.ModuleList` / `nn.ModuleDict`; code
then runs `self.heads[name](x)`, `for m in models: m(x)` or `sum(m(x) for m in self.members)`. The called item
is a network because every value the container is given is one (judged like an argument a caller passes:
`network_values.passes_network`), not because of its name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.names import dotted
from torchlint.lint.walk import descendants
from torchlint.semantic.network_values import passes_network
from torchlint.semantic.objects import MODULE, objects

if TYPE_CHECKING:
    from torchlint.lint.context import Context
    from torchlint.semantic.grad_mode import FileFacts

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_DISPLAYS = (cst.List, cst.Tuple, cst.Set, cst.Dict, cst.ListComp)
_ADDING = frozenset({"append", "insert", "add"})


def item_of_networks(facts: "FileFacts", func: cst.BaseExpression) -> bool:
    """`func` (a callee) is one item of a container of networks: `self.heads[name]`, `nets[i]`, or a name bound
    by a loop or a comprehension over one (`for m in self.members`)."""
    if isinstance(func, cst.Subscript):
        return holds_networks(facts, func.value)
    if isinstance(func, cst.Name):
        iterated = _iterated_by(facts.context, func)
        return iterated is not None and holds_networks(facts, iterated)
    return False


def holds_networks(facts: "FileFacts", container: cst.BaseExpression) -> bool:
    """Every item of `container` is a network: a module container (`nn.ModuleList`, `nn.Sequential`), or a list
    or dict whose written and added items all are (`.values()` of one too)."""
    if isinstance(container, cst.Call) and isinstance(container.func, cst.Attribute) and not container.args and (
        container.func.attr.value == "values"
    ):
        container = container.func.value
    context = facts.context
    if objects(context).kind(container) == MODULE:
        return True  # `self.blocks[i]`: an item of a ModuleList is a module
    items = _items(context, container)
    return bool(items) and all(passes_network(facts, item, 1) for item in items)


def _items(context: "Context", container: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values put into `container`: the items of the displays it is bound to (by a single assignment, or by
    the assignments to `self.<attr>` in its class), and those added later (`container.append(x)`); none when
    it is bound to anything else."""
    displays: list[cst.BaseExpression]
    if isinstance(container, _DISPLAYS):
        displays = [container]
    elif isinstance(container, cst.Name):
        bindings = context.lookup(container) or []
        if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
            return []
        displays = [bindings[0].value]
    elif isinstance(container, cst.Attribute) and dotted(container) == f"self.{container.attr.value}":
        cls = context.enclosing(container, cst.ClassDef)
        displays = list(objects(context).self_assignments(cls).get(container.attr.value, ())) if cls else []
    else:
        return []
    items: list[cst.BaseExpression] = []
    for display in displays:
        if not isinstance(display, _DISPLAYS):
            return []  # bound to something else too (a parameter's list, a call): not known
        if isinstance(display, cst.ListComp):
            items.append(display.elt)
        elif isinstance(display, cst.Dict):
            items.extend(e.value for e in display.elements if isinstance(e, cst.DictElement))
        else:
            items.extend(e.value for e in display.elements if isinstance(e, cst.Element))
    return items + _added(context, container)


def _added(context: "Context", container: cst.BaseExpression) -> list[cst.BaseExpression]:
    """Values added to `container` anywhere in the file: `models.append(net)`, `self.heads[name] = head`."""
    text = dotted(container)
    if text is None:
        return []
    added: list[cst.BaseExpression] = []
    for node in descendants(context.module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _ADDING:
            if node.args and dotted(node.func.value) == text:
                added.append(node.args[-1].value)
        elif isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Subscript) and dotted(target.value) == text:
                added.append(node.value)
    return added


def _iterated_by(context: "Context", name: cst.Name) -> Optional[cst.BaseExpression]:
    """What `name` iterates when a `for` loop or a comprehension binds it alone (`for m in models`), else None."""
    bindings = context.lookup(name)
    if bindings is not None:
        if len(bindings) == 1 and bindings[0].kind == "loop" and isinstance(bindings[0].node, cst.For):
            loop = bindings[0].node
            if isinstance(loop.target, cst.Name) and loop.target.value == name.value:
                return loop.iter
        return None
    for ancestor in context.ancestors(name):
        if isinstance(ancestor, _COMPREHENSIONS):
            comp: Optional[cst.CompFor] = ancestor.for_in
            while comp is not None:
                if isinstance(comp.target, cst.Name) and comp.target.value == name.value:
                    return comp.iter
                comp = comp.inner_for_in
    return None
