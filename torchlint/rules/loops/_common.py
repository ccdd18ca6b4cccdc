"""What the rules of this family share."""

from __future__ import annotations

import libcst as cst


def atom(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node`, parenthesised when a method call on it would bind to a part of it."""
    if node.lpar or isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
