"""The walk's type test: `is_a` answers as `isinstance` does, for every node of a file."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.walk import descendants, is_a

TEXT = """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        for i in range(3):
            x = x + (lambda y: y)(i)
        while x.sum() > 0:
            x = x - 1
        return x
"""

CLASSES = [
    (cst.Call,),
    (cst.Name, cst.Attribute),
    (cst.SimpleStatementLine, cst.BaseCompoundStatement),  # an abstract class among them
    (cst.FunctionDef, cst.Lambda, cst.ClassDef),
    (cst.BaseExpression,),
    (cst.For, cst.While),
]


def test_is_a_agrees_with_isinstance_on_every_node() -> None:
    nodes = list(descendants(cst.parse_module(TEXT)))
    for types in CLASSES:
        assert [is_a(n, types) for n in nodes] == [isinstance(n, types) for n in nodes]
        assert any(is_a(n, types) for n in nodes) and not all(is_a(n, types) for n in nodes)


def test_the_node_classes_tested_by_exact_type_have_no_subclasses() -> None:
    # `type(node) is cst.Call` stands for `isinstance(node, cst.Call)` in the hottest walks
    for cls in (cst.Call, cst.Name, cst.Attribute, cst.ClassDef, cst.FunctionDef, cst.Lambda, cst.For, cst.Assign, cst.Arg):
        assert cls.__subclasses__() == [], cls
