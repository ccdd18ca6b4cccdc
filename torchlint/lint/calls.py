"""Reading and rewriting call arguments, for rules and their fixes."""

from __future__ import annotations

from typing import Optional, Union

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
    """`call` with `name=value` set, in the call's own layout (see torchlint.lint.fix.add_keyword)."""
    from torchlint.lint.fix import add_keyword

    return add_keyword(call, name, value)
