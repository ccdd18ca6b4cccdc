"""The methods a call runs on an object of a project class: `trainer.train_step(x, y)` where `trainer =
Trainer(...)` is built from a class of this file or of a project module (see `network_methods.receiver_classes`
for how the receiver is followed), each with the context of the file that defines it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.semantic.calls import is_self_attribute

if TYPE_CHECKING:
    from torchlint.lint.context import Context


def methods_called(context: "Context", call: cst.Call) -> list[tuple["Context", cst.FunctionDef]]:
    """The definitions `receiver.method(...)` may run (the method of the receiver's class, or of a base in the
    same file); none for `self.method(...)`, which `functions.called_function` answers, or a receiver whose
    class cannot be found."""
    from torchlint.semantic.model import semantic_model
    from torchlint.semantic.network_methods import method_of, receiver_classes

    func = call.func
    if not isinstance(func, cst.Attribute) or not (isinstance(func.value, cst.Name) or is_self_attribute(func.value)):
        return []
    if isinstance(func.value, cst.Name) and func.value.value == "self":
        return []
    found = []
    for owner, cls in receiver_classes(semantic_model(context).grad, func.value):
        method = method_of(owner, cls, func.attr.value)
        if method is not None:
            found.append((owner.context, method))
    return found
