"""Code that provably runs once per run of the program: nothing repeats it.

A loop over the elements of one tensor costs little when the whole loop runs once (a demo on one image, a
notebook cell that shows how autograd works); the same loop in an evaluation over a data set runs per input.
`runs_once(context, node)` is True when no loop, comprehension or repeated caller runs the code holding
`node`:

- module-level code (a script, a notebook cell) outside any loop runs once;
- a top-level function runs once when it is called, and every call of it (in this file and in the project
  files that import it) runs once by the same test;
- a method of a top-level class, likewise, by every call of its name on any object (`detector.detect(img)`);
- anything else may repeat: `forward()` and special methods, a function nobody in the project calls (a
  framework or a user may call it per batch), a nested function, a method passed as a callback.

`node` itself may be a loop: only what encloses it counts.
"""

from __future__ import annotations

import os
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
    if _depth > _MAX_DEPTH:
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
    local = _uses(context, function, method)
    if local is None or any(context.enclosing_function(call) is function for call in local):
        return False  # passed as a value (a callback), or recursive
    from torchlint.semantic import project  # project summaries build semantic models of other files

    path = context.source.path
    remote = project.method_call_sites(path, name) if method else project.call_sites(path, name)
    resolved = {os.path.realpath(site.summary.context.source.path) for site in remote}
    if any(os.path.realpath(file) not in resolved for file in project.importers_spelling(path, name)):
        return False  # an importing file names it without a call we can resolve (`from predict import *`)
    if not local and not remote:
        return False  # called from nowhere we can see: a framework or a user may call it per batch
    return all(runs_once(context, call, depth + 1) for call in local) and all(
        runs_once(site.summary.context, site.call, depth + 1) for site in remote
    )


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
