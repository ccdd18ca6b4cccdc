"""Evidence, inside a loop body, that each element of what the loop walks is one sample of a batch, for
loops whose header alone does not show a batch (a list, a dataset, a parameter of unknown kind):

- a model or a loss runs on the element made a batch of one: `model(x.unsqueeze(0))`, `net(img[None])`,
  `model(x[i:i + 1])`, `model(x[i].view(1, -1))`, directly or through a function or method of the same file
  (`predict(model, img)` whose body runs `model(img.unsqueeze(0))`);
- one element's comparison is turned into a Python number: `correct += (p.argmax() == t).item()` (`.item()`
  on a comparison needs a single element, so the loop compares samples one at a time).

A loop over files, paths or layers shows neither: its element is loaded or called, not made a batch of one.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

import libcst as cst

from torchlint.lint.calls import argument, positional
from torchlint.lint.context import Context
from torchlint.lint.walk import descendants
from torchlint.semantic.functions import called_function
from torchlint.semantic.sample_callees import Callees, foreign_function
from torchlint.semantic.sample_scopes import Scope
from torchlint.semantic.sample_syntax import flatten_names, indexes_sample

# Methods that keep a value the same sample (a copy, another device or dtype).
_SAME_SAMPLE = frozenset("to cuda cpu float double half long int contiguous detach clone".split())
_AS_TENSOR = frozenset(
    "torch.tensor torch.as_tensor torch.from_numpy torch.Tensor torch.FloatTensor torch.LongTensor".split()
)


class SingleSamples:
    """For one loop: which names hold an element of what it walks, unchanged, and whether the body runs a
    model on one of them made a batch of one."""

    def __init__(
        self,
        context: Context,
        callees: Callees,
        scope: Scope,
        index: str | None,
        samples: set[str],
        roots: set[str],
        in_helper: bool = False,  # analysing a helper the loop calls: look no further down
    ) -> None:
        self.context = context
        self.callees = callees
        self.scope = scope
        self.index = index
        self.roots = roots
        self.direct = set(samples)
        self.in_helper = in_helper
        self.batches_of_one: set[str] = set()  # names bound to an element made a batch of one

    def shown(self, nodes: Iterable[cst.CSTNode], mentions_sample: Callable[[cst.BaseExpression], bool]) -> bool:
        """The body (its nodes in document order) treats an element as one sample."""
        nodes = list(nodes)
        for node in nodes:  # `x = x.to(device)`, `image, label = dataset[i]`: still the element
            if isinstance(node, cst.Assign) and self._element(node.value):
                for target in node.targets:
                    self.direct.update(flatten_names(target.target))
            elif isinstance(node, cst.Assign) and self._batch_of_one(node.value):
                for target in node.targets:  # `x = torch.unsqueeze(x, dim=0).to(device)`
                    if isinstance(target.target, cst.Name):
                        self.batches_of_one.add(target.target.value)
        for node in nodes:
            if isinstance(node, cst.Call):
                if self._runs_model(node) and any(self._batch_of_one(arg.value) for arg in node.args):
                    return True
                if single_comparison(node, mentions_sample):
                    return True
                if self._helper_runs_model(node):
                    return True
            if isinstance(node, cst.If) and _compares_tensor(node.test, mentions_sample):
                return True  # `if p.argmax() == t:` needs one element
        return False

    def _helper_runs_model(self, call: cst.Call) -> bool:
        """`predict(img)` for a function of this file, or of a project file it imports, that runs a model on
        its parameter made a batch of one (`return model(img.unsqueeze(0))`); also `agent.evaluate(state)`
        where `agent` is an instance of a project class whose method does."""
        if self.in_helper:
            return False  # one level down only
        found = self._callee(call)
        if found is None:
            return False
        context, callees, function, method = found
        params = [p.name.value for p in function.params.params]
        if method:
            params = params[1:]  # self
        passed = {
            params[position]
            for position, arg in enumerate(call.args)
            if arg.keyword is None and not arg.star and position < len(params) and self._element(arg.value)
        }
        if not passed:
            return False
        scope = callees.scopes.of_function(function)
        inner = SingleSamples(context, callees, scope, None, passed, set(), in_helper=True)
        return inner.shown(descendants(function.body), lambda expr: False)

    def _callee(self, call: cst.Call) -> Optional[tuple[Context, Callees, cst.FunctionDef, bool]]:
        """The function `call` runs, with its file and whether it is a method: one of this file, or one of
        another project file (`predict(...)`, `utils.predict(...)`, `agent.evaluate(x)` of `agent = Agent()`)."""
        function = called_function(self.context, call)
        if function is not None:
            return self.context, self.callees, function, isinstance(call.func, cst.Attribute)
        found = foreign_function(self.context, call.func)
        if found is None:
            return None
        summary, function, method = found
        return summary.context, summary.model.per_sample_loops.callees, function, method

    def _element(self, expr: cst.BaseExpression) -> bool:
        """`x`, `x.to(device)`, `x[0]` of an element, `data[i]` of a walked value."""
        if isinstance(expr, cst.Name):
            return expr.value in self.direct
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return self._element(expr.value)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SAME_SAMPLE:
            return self._element(expr.func.value)
        if isinstance(expr, cst.Call) and (self.context.qualname(expr) or "") in _AS_TENSOR and expr.args:
            return self._element(expr.args[0].value)  # `torch.from_numpy(x)`: the same sample as a tensor
        if isinstance(expr, cst.Subscript):
            value = expr.value
            if isinstance(value, cst.Name) and value.value in self.roots and indexes_sample(expr, self.index):
                return True
            if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                key = expr.slice[0].slice.value
                return isinstance(key, (cst.Integer, cst.SimpleString)) and self._element(value)
        return False

    def _batch_of_one(self, expr: cst.BaseExpression) -> bool:
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SAME_SAMPLE:
            expr = expr.func.value
        if isinstance(expr, cst.Name):
            return expr.value in self.batches_of_one
        if isinstance(expr, cst.Call):
            func = expr.func
            args = positional(expr)
            if isinstance(func, cst.Attribute) and func.attr.value == "unsqueeze" and len(expr.args) == 1:
                return self.context.literal(expr.args[0].value) == 0 and self._element(func.value)
            if isinstance(func, cst.Attribute) and func.attr.value in ("view", "reshape") and len(args) >= 2:
                return self.context.literal(args[0].value) == 1 and self._element(func.value)
            qualname = self.context.qualname(expr) or ""
            if qualname == "torch.unsqueeze" and args:
                dim = argument(expr, "dim", 1)
                return dim is not None and self.context.literal(dim.value) == 0 and self._element(args[0].value)
            if qualname in _AS_TENSOR and args and isinstance(args[0].value, cst.List):
                elements = args[0].value.elements  # `torch.tensor([x])`
                return len(elements) == 1 and not isinstance(elements[0], cst.StarredElement) and self._element(elements[0].value)
            return False
        if isinstance(expr, cst.Subscript) and expr.slice:
            first = expr.slice[0].slice
            if isinstance(first, cst.Index) and isinstance(first.value, cst.Name) and first.value.value == "None":
                return self._element(expr.value)  # x[None], x[None, ...]
            if isinstance(first, cst.Slice) and isinstance(expr.value, cst.Name) and expr.value.value in self.roots:
                return indexes_sample(expr, self.index)  # x[i:i + 1]
        return False

    def _runs_model(self, call: cst.Call) -> bool:
        qualname = self.context.qualname(call) or ""
        return (
            qualname.startswith("torch.nn.functional.")
            or self.callees.is_module_call(self.scope, call)
            or self.callees.tensor_helper(call)
        )


def single_comparison(call: cst.Call, mentions_sample: Callable[[cst.BaseExpression], bool]) -> bool:
    """`(p.argmax() == t).item()`, `int(p.argmax() == t)`: one element's comparison as a Python number."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not call.args:
        compared = func.value
    elif isinstance(func, cst.Name) and func.value in ("int", "float", "bool") and len(call.args) == 1:
        compared = call.args[0].value
        if not isinstance(compared, cst.Comparison) or not any(
            isinstance(side, cst.Call) for side in (compared.left, *(c.comparator for c in compared.comparisons))
        ):
            return False  # int(p == t) of two Python numbers; int(p.argmax() == t) compares a tensor
    else:
        return False
    return _equality(compared, mentions_sample)


def _compares_tensor(test: cst.BaseExpression, mentions_sample: Callable[[cst.BaseExpression], bool]) -> bool:
    """`p.argmax() == t`: samples compared, one side computed by a method (a tensor's, not a number's)."""
    return _equality(test, mentions_sample) and any(
        isinstance(side, cst.Call) and isinstance(side.func, cst.Attribute)
        for side in (test.left, *(c.comparator for c in test.comparisons))  # type: ignore[attr-defined]
    )


def _equality(compared: cst.BaseExpression, mentions_sample: Callable[[cst.BaseExpression], bool]) -> bool:
    return (
        isinstance(compared, cst.Comparison)
        and all(isinstance(c.operator, (cst.Equal, cst.NotEqual)) for c in compared.comparisons)
        and mentions_sample(compared.left)
        and any(mentions_sample(c.comparator) for c in compared.comparisons)
    )
