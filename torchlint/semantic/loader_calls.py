"""DataLoader calls and the syntax the loader analysis reads: which calls construct a DataLoader, the
literal value of an argument, how a loop's target pairs with what it iterates (`enumerate`, `zip`, `tqdm`),
`next(it)`, and which parameter a call's argument lands in."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument, has_star_args, has_star_kwargs, positional
from torchlint.lint.context import UNKNOWN, Context
from torchlint.lint.names import last_name
from torchlint.semantic.functions import is_static

DATALOADER = "torch.utils.data.DataLoader"


# Drop-in replacements with the same constructor and defaults.
_LOADERS = frozenset(
    {
        DATALOADER,
        "torchdata.stateful_dataloader.StatefulDataLoader",
        "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader",
    }
)


def is_dataloader(context: Context, node: cst.CSTNode) -> bool:
    """`node` is a call of torch's `DataLoader` (through any import spelling), or of a project subclass that
    hands its arguments to it unchanged (`AudioDataLoader(dataset, batch_size=32, num_workers=4)`)."""
    if not isinstance(node, cst.Call):
        return False
    return context.qualname(node) in _LOADERS or _loader_subclass_call(context, node)


def _loader_subclass_call(context: Context, call: cst.Call) -> bool:
    """A call of a class of this file or of a project module that subclasses `DataLoader` and either defines no
    `__init__` or passes its `*args, **kwargs` straight to the base's (`super().__init__(*args, **kwargs)`,
    keyword-only options of its own aside): the call's arguments are the loader's settings."""
    from torchlint.semantic import project
    from torchlint.semantic.objects import objects

    func = call.func
    if isinstance(func, cst.Name):
        local = objects(context).classes().get(func.value)
        if local is not None:
            return _transparent_loader_class(context, local)
    if not isinstance(func, (cst.Name, cst.Attribute)) or context.qualname(func) is None:
        return False  # neither imported nor defined here: no project class
    found = project.imported(context, func, ("DataLoader",))
    definition = found[0].definition(found[1]) if found is not None else None
    return isinstance(definition, cst.ClassDef) and _transparent_loader_class(found[0].context, definition)  # type: ignore[index]


def _transparent_loader_class(context: Context, cls: cst.ClassDef) -> bool:
    from torchlint.semantic.functions import method_named

    if not any(context.qualname(base.value) in _LOADERS for base in cls.bases if base.keyword is None):
        return False
    init = method_named(cls, "__init__")
    if init is None:
        return True
    params = init.params
    star = params.star_arg.name.value if isinstance(params.star_arg, cst.Param) else None
    double = params.star_kwarg.name.value if params.star_kwarg is not None else None
    if [p.name.value for p in params.params] != ["self"] or star is None or double is None:
        return False
    for node in _calls_in(init):
        if last_name(node.func) == "__init__" and isinstance(node.func, cst.Attribute) and _is_super(node.func.value):
            stars = [a for a in node.args if a.star]
            return (
                len(node.args) == 2
                and len(stars) == 2
                and isinstance(stars[0].value, cst.Name)
                and stars[0].value.value == star
                and isinstance(stars[1].value, cst.Name)
                and stars[1].value.value == double
            )
    return False


def _calls_in(function: cst.FunctionDef) -> list[cst.Call]:
    from torchlint.lint.walk import descendants

    return [n for n in descendants(function.body) if isinstance(n, cst.Call)]


def _is_super(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "super"


def is_builtin(context: Context, func: cst.BaseExpression, name: str) -> bool:
    return isinstance(func, cst.Name) and func.value == name and context.lookup(func) is None


def setting_value(context: Context, call: cst.Call, name: str, position: Optional[int]) -> object:
    """The literal value of a DataLoader argument: its default marker MISSING, a value, or UNKNOWN."""
    arg = argument(call, name, position)
    if arg is None:
        if has_star_kwargs(call) or has_star_args(call):
            return UNKNOWN
        if position is not None and len(positional(call)) > position:
            return UNKNOWN
        return MISSING
    return context.literal(arg.value)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


def strict_union(parts: list[Optional[frozenset]]) -> Optional[frozenset]:
    if not parts or any(p is None for p in parts):
        return None
    out: frozenset = frozenset()
    for part in parts:
        out |= part  # type: ignore[operator]
    return out


def element_at(value: cst.BaseExpression, index: int, size: int) -> Optional[cst.BaseExpression]:
    elements = value.elements  # type: ignore[attr-defined]
    if len(elements) != size or any(isinstance(e, cst.StarredElement) for e in elements):
        return None
    return elements[index].value


def is_transfer(call: cst.Call) -> bool:
    """`x.to(...)` or `x.cuda(...)`: a copy that may go to an accelerator (`to_accelerator` tells)."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda")


def param_for(context: Context, function: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> Optional[cst.Name]:
    """The name of the parameter of `function` that `arg` of `call` is passed to."""
    params = [*function.params.posonly_params, *function.params.params, *function.params.kwonly_params]
    if context.enclosing(function, cst.ClassDef) is not None and not is_static(function):
        params = params[1:]
    if arg.keyword is not None:
        matches = [p for p in params if p.name.value == arg.keyword.value]
    else:
        index = [a for a in call.args if not a.keyword].index(arg)
        matches = params[index : index + 1] if index < len(function.params.posonly_params) + len(function.params.params) else []
    return matches[0].name if matches else None


def argument_for(
    context: Context, function: cst.FunctionDef, call: cst.Call, param: str
) -> Optional[cst.BaseExpression]:
    """The expression `call` passes for `function`'s parameter `param`."""
    params = [*function.params.posonly_params, *function.params.params]
    if context.enclosing(function, cst.ClassDef) is not None and not is_static(function):
        params = params[1:]
    names = [p.name.value for p in params]
    position = names.index(param) if param in names else None
    arg = argument(call, param, position)
    return arg.value if arg is not None else None


TQDM = frozenset({"tqdm", "track"})


def match_iteration(
    context: Context, iterable: cst.BaseExpression, target: cst.BaseExpression
) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """Pair what a loop iterates with the part of its target each item lands in.

    `for i, (x, y) in enumerate(loader)` -> [(loader, (x, y))]; `for a, b in zip(l1, l2)` -> [(l1, a), (l2, b)];
    `tqdm(loader)` is looked through.
    """
    if isinstance(iterable, cst.Call) and iterable.args and not has_star_args(iterable):
        func = iterable.func
        if is_builtin(context, func, "enumerate"):
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                return match_iteration(context, iterable.args[0].value, target.elements[1].value)
            return []
        if is_builtin(context, func, "zip"):
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(iterable.args):
                pairs = []
                for arg, element in zip(iterable.args, target.elements):
                    pairs.extend(match_iteration(context, arg.value, element.value))
                return pairs
            return []
        if last_name(func) in TQDM and (context.qualname(iterable) or "").startswith(("tqdm", "rich")):
            return match_iteration(context, iterable.args[0].value, target)
    return [(iterable, target)]


_LOOPS = (cst.For, cst.While)


def enclosing_loops(context: Context, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The `for`/`while` statements around `node` within its own function, innermost first."""
    loops = []
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            break
        if isinstance(ancestor, _LOOPS):
            loops.append(ancestor)
    return loops


def next_of(context: Context, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The iterator `next(it)`, `it.__next__()` or `it.next()` (the Python 2 spelling old loaders still
    offered) advances; the callers ask whether `it` iterates a loader."""
    if is_builtin(context, call.func, "next") and call.args and not has_star_args(call):
        return call.args[0].value
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("__next__", "next") and not call.args:
        return call.func.value
    return None


def step_loop_of_read(context: Context, call: cst.Call) -> Optional[cst.CSTNode]:
    """The loop that runs a `next(it)` read on every trip (its innermost one), or None: outside any loop the
    read happens once, and under a logging interval (`if step % 100 == 0:`) only on some trips."""
    from torchlint.semantic import (
        loops,  # loops asks about values, which ask about loaders
    )

    loop = next(iter(enclosing_loops(context, call)), None)
    if loop is None or loops.gated(context, call, loop):  # type: ignore[arg-type]
        return None
    return loop
