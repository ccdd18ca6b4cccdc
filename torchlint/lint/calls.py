"""Reading and rewriting call arguments, for rules and their fixes."""

from __future__ import annotations

from typing import Optional, Sequence, Union

import libcst as cst


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    """The `name=...` argument of `call`, if written."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    """`f(**options)`: any keyword may be in there."""
    return any(arg.star == "**" for arg in call.args)


def has_star_args(call: cst.Call) -> bool:
    return any(arg.star == "*" for arg in call.args)


def positional(call: cst.Call) -> list[cst.Arg]:
    return [arg for arg in call.args if arg.keyword is None and arg.star == ""]


def argument(call: cst.Call, name: str, position: Optional[int] = None) -> Optional[cst.Arg]:
    """The argument bound to parameter `name` (by keyword, or by position when `position` is given)."""
    found = keyword(call, name)
    if found is not None or position is None:
        return found
    given = positional(call)
    return given[position] if position < len(given) and not has_star_args(call) else None


def with_keyword(call: cst.Call, name: str, value: Union[str, cst.BaseExpression]) -> cst.Call:
    """`call` with `name=value` set: replaces an existing keyword, or appends one in the call's own style."""
    expression = cst.parse_expression(value) if isinstance(value, str) else value
    existing = keyword(call, name)
    if existing is not None:
        return call.with_changes(
            args=[arg.with_changes(value=expression) if arg is existing else arg for arg in call.args]
        )
    new = cst.Arg(
        value=expression,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    return call.with_changes(args=_append(list(call.args), new))


def _append(args: list[cst.Arg], new: cst.Arg) -> Sequence[cst.Arg]:
    if not args:
        return [new]
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # Trailing comma (usually one argument per line): the new argument takes the last one's place in
        # the layout, and the last one is separated from it like the arguments before it.
        if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
            separator = args[-2].comma
        else:
            separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return [*args[:-1], last.with_changes(comma=separator), new.with_changes(comma=last.comma)]
    return [*args[:-1], last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), new]
