"""Graph-free values: calls whose result carries no autograd graph, whatever they are given.

`torch.tensor(x)` and the typed constructors copy the data into a new leaf tensor; NumPy functions cannot take a
tensor that requires grad at all, so what reaches them holds none; a distribution's `sample()` draws under
no-grad (only `rsample()`, `log_prob()` and `entropy()` keep the graph of its parameters). An RL agent's
`action = dist.sample()` is therefore data, like the reward the environment returns for it.
"""

from __future__ import annotations

import libcst as cst

from torchlint.lint.context import Context

_CONSTRUCTORS = frozenset(
    {"torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor", "torch.DoubleTensor",
     "torch.IntTensor", "torch.BoolTensor", "torch.ByteTensor", "torch.HalfTensor"}
)
_DISTRIBUTIONS = "torch.distributions."


def drops_graph(context: Context, call: cst.Call) -> bool:
    """`call` returns a value with no graph: a tensor constructor, a NumPy function, a distribution's `sample()`."""
    qualname = context.qualname(call.func)
    if qualname is not None and (qualname in _CONSTRUCTORS or qualname.split(".", 1)[0] == "numpy"):
        return True
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "sample" and _distribution(context, func.value)


def _distribution(context: Context, expr: cst.BaseExpression) -> bool:
    """`expr` is a `torch.distributions` object: built right there, or a name every binding of which builds one."""
    if isinstance(expr, cst.Call):
        return (context.qualname(expr.func) or "").startswith(_DISTRIBUTIONS)
    if not isinstance(expr, cst.Name):
        return False
    bindings = context.lookup(expr) or ()
    return bool(bindings) and all(
        b.kind == "assign" and isinstance(b.value, cst.Call) and (context.qualname(b.value.func) or "").startswith(_DISTRIBUTIONS)
        for b in bindings
    )
