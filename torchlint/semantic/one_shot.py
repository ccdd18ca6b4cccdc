"""Code that provably runs once per run of the program: nothing repeats it.

A loop over the elements of one tensor costs little when the whole loop runs once (a demo on one image, a
notebook cell that shows how autograd works); the same loop in an evaluation over a data set runs per input.
`runs_once(context, node)` is True when no loop, comprehension or repeated caller runs the code holding
`node`, and `node` does not walk data gathered by a loop:

- module-level code (a script, a notebook cell) outside any loop runs once;
- in a script (a file no project file imports), a top-level function, or a method of a top-level class, runs
  once when every call of its name in the file runs once by the same test;
- anything else may repeat: code of a module other files import (a library is written to be reused, and
  its callers cannot all be seen), `forward()` and special methods, a function nobody calls, a nested
  function, a function passed as a callback;
- a loop (or a `map`) over a tensor that a loop built (`output = torch.cat((output, pred))` per batch, then
  `for i in range(output.shape[0])`) walks the whole run's data, however often it runs.

`node` itself may be a loop: only what encloses it counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.walk import descendants

if TYPE_CHECKING:
    from torchlint.lint.context import Context

_REPEATING = (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Lambda)

# How many calls deep (through callers) the question looks before assuming the code repeats.
_MAX_DEPTH = 4


def runs_once(context: "Context", node: cst.CSTNode, _depth: int = 0) -> bool:
    """Whether the code holding `node` runs once per run of the program (see the module docstring)."""
    if _depth > _MAX_DEPTH or _walks_gathered_data(context, node):
        return False
    child = node
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, _REPEATING) and child is not getattr(ancestor, "iter", None):
            return False  # `for ... in f(x)` evaluates its iterable once; its body repeats
        if isinstance(ancestor, cst.ClassDef):
            return False
        if isinstance(ancestor, cst.FunctionDef):
            return _function_runs_once(context, ancestor, _depth)
        child = ancestor
    return True


def _function_runs_once(context: "Context", function: cst.FunctionDef, depth: int) -> bool:
    method = _method_of_top_level_class(context, function)
    if function not in context.module.body and not method:
        return False  # a nested function: its callers cannot all be seen
    name = function.name.value
    if method and (name.startswith("__") or name == "forward"):
        return False  # run by the object's machinery (`model(x)`), not by a call of its name
    from torchlint.semantic import project  # the project's import graph

    if project.importers(context.source.path):
        return False  # a module other files use: written to be reused
    local = _uses(context, function, method)
    if not local or any(context.enclosing_function(call) is function for call in local):
        return False  # never called here, passed as a value (a callback), or recursive
    return all(runs_once(context, call, depth + 1) for call in local)


def _walks_gathered_data(context: "Context", node: cst.CSTNode) -> bool:
    """`node` is a loop whose iterable (or range bound) reads a name bound inside another loop of the same
    function: data gathered batch by batch (`output = torch.cat((output, prediction))`)."""
    if isinstance(node, cst.For):
        iterable: Optional[cst.CSTNode] = node.iter
    elif isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
        iterable = node.for_in.iter
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "map" and len(node.args) == 2:
        iterable = node.args[1].value  # `map(f, output)`: the loop written as a map
    else:
        return False
    scope = context.enclosing_function(node)
    for name in [n for n in [iterable, *descendants(iterable)] if isinstance(n, cst.Name)]:
        for binding in context.lookup(name) or ():
            if context.enclosing_function(binding.node) is scope and any(
                isinstance(a, (cst.For, cst.While)) for a in context.ancestors(binding.node)
                if context.enclosing_function(a) is scope
            ):
                return True
    return False


def _method_of_top_level_class(context: "Context", function: cst.FunctionDef) -> bool:
    body = context.parent(function)
    cls = context.parent(body) if body is not None else None
    return isinstance(cls, cst.ClassDef) and cls in context.module.body


def _uses(context: "Context", function: cst.FunctionDef, method: bool) -> Optional[list[cst.Call]]:
    """Every call in this file of the function's name (`f(...)`; `<any>.f(...)` for a method; a notebook
    may define a function in several cells: all count), or None when the name is also used otherwise
    (passed as a callback, stored)."""
    name = function.name.value
    calls: list[cst.Call] = []
    for node in descendants(context.module):
        if not (isinstance(node, cst.Name) and node.value == name) or node is function.name:
            continue
        parent = context.parent(node)
        if method:
            if not (isinstance(parent, cst.Attribute) and parent.attr is node):
                continue  # a plain name: another binding
            call = context.parent(parent)
            if not (isinstance(call, cst.Call) and call.func is parent):
                return None
            calls.append(call)
        elif isinstance(parent, cst.Call) and parent.func is node:
            calls.append(parent)
        elif not isinstance(parent, cst.FunctionDef):
            return None
    return calls
