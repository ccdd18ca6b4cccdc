"""The walk: `is_a` answers as `isinstance` does, for every node of a file; a subtree walked again (its nodes
read from a kept list) yields what the first walk did."""

from __future__ import annotations

import libcst as cst

from torchlint.lint.walk import descendants, forget_children, is_a, semantic_children

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


def _walked_by_hand(node: cst.CSTNode) -> list[cst.CSTNode]:
    found = []
    for child in semantic_children(node):
        found.append(child)
        found.extend(_walked_by_hand(child))
    return found


def test_a_subtree_walked_again_yields_the_same_nodes_in_the_same_order() -> None:
    module = cst.parse_module(TEXT)
    forward = next(n for n in descendants(module) if isinstance(n, cst.FunctionDef))
    try:
        next(iter(descendants(module)))  # a first walk cut short
        for node in (module, forward, forward.body):
            expected = _walked_by_hand(node)
            assert len(expected) > 10
            for _ in range(3):  # first walk, the walk that keeps the list, a walk that reads it
                assert list(descendants(node)) == expected
                assert [id(n) for n in descendants(node)] == [id(n) for n in expected]
    finally:
        forget_children()
    other = cst.parse_module(TEXT)  # equal text, other nodes: nothing kept for one serves the other
    assert all(a is not b for a, b in zip(descendants(other), descendants(module)))


def test_nodes_hash_by_identity_in_c_and_compare_by_identity() -> None:
    first, second = cst.parse_module(TEXT), cst.parse_module(TEXT)
    assert first.deep_equals(second) and first != second
    assert hash(first) == object.__hash__(first) and hash(first) != hash(second)
    assert cst.Name.__hash__ is object.__hash__  # a concrete node class, set when the walk module loaded
    nodes = list(descendants(first))
    table = {node: index for index, node in enumerate(nodes)}
    assert [table[node] for node in nodes] == list(range(len(nodes)))
    assert not any(node in table for node in descendants(second))
