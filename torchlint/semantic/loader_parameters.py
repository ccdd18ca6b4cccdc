"""The values a DataLoader setting given as a name may take: a parameter of the function that builds the
loader (what its calls pass, or its default), a command-line switch of the file (`pin_memory=args.pin`), an
entry of a dict built in the file (`pin_memory=CONFIG["pin"]`), or whether CUDA is present
(`pin_memory=torch.cuda.is_available()`: True on every GPU machine)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.lint.calls import argument, has_star_args, has_star_kwargs, keyword
from torchlint.lint.context import UNKNOWN
from torchlint.semantic import project
from torchlint.semantic.functions import is_static
from torchlint.semantic.loader_calls import MISSING


_PIN_MEMORY_AT = 7


class LoaderParameters:
    """Settings that arrive through a parameter or a command-line switch (part of `Flow`)."""

    def pin_options(self, call: cst.Call) -> Optional[frozenset]:
        """The `pin_memory` values a DataLoader(...) call of this file may have. A pinning switch whose value
        this file cannot see (`pin_memory=config["pin_memory"]`, `cfg.DATA.PIN_MEMORY`, `pin_memory=use_gpu`
        handed in by a caller) pins on the runs that turn it on: nobody writes the switch to keep it off."""
        options = self.setting_options(call, "pin_memory", _PIN_MEMORY_AT)  # type: ignore[attr-defined]
        arg = argument(call, "pin_memory", _PIN_MEMORY_AT)
        if options != frozenset([UNKNOWN]) or arg is None:
            return options
        return frozenset([True, UNKNOWN])

    def value_options(self, expr: cst.BaseExpression) -> frozenset:
        """The values `setting=expr` may take: its literal (`UNKNOWN` when not one), or, for a parameter of the
        enclosing function, what its calls pass and its default where they leave it out:
        `def loader(path, pin_memory=True)` called as `loader(path)` gives {True}."""
        value = self.context.literal(expr)
        if value is UNKNOWN and self._cuda_present(expr):
            return frozenset([True, False])
        if value is UNKNOWN and isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            return self._flag_options(expr.attr.value)  # `pin_memory=args.pin_memory`
        if value is UNKNOWN and isinstance(expr, cst.Subscript):
            return self._entry_options(expr) or frozenset([value])  # `pin_memory=CONFIG["pin"]`
        bindings = self.context.lookup(expr) if isinstance(expr, cst.Name) and value is UNKNOWN else None
        if not bindings or len(bindings) != 1 or bindings[0].kind != "param":
            return frozenset([value])
        return self._param_options(bindings[0].node) or frozenset([value])

    def _entry_options(self, expr: cst.Subscript) -> Optional[frozenset]:
        """The values `config["key"]` may hold, where `config` is a dict built in this file that always has
        the key (followed as `**kwargs` dicts are: literals, `update`, `config["key"] = ...`)."""
        if not isinstance(expr.value, cst.Name) or len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return None
        key = self.context.literal(expr.slice[0].slice.value)
        facts = self.dict_facts(expr.value) if isinstance(key, str) else None  # type: ignore[attr-defined]
        options = facts.get(key) if facts is not None else None  # type: ignore[arg-type]
        return None if options is None or MISSING in options else options

    def _cuda_present(self, expr: cst.BaseExpression) -> bool:
        """`torch.cuda.is_available()`, or a name assigned only from it (`use_cuda = torch.cuda.is_available()`)."""
        if isinstance(expr, cst.Name):
            expr = self.context.assigned_value(expr)  # type: ignore[assignment]
        return isinstance(expr, cst.Call) and not expr.args and self.context.qualname(expr) == "torch.cuda.is_available"

    def _flag_options(self, dest: str) -> frozenset:
        """A command-line switch of this file: its default and the other value (`store_true`), or its default
        and whatever the command line gives; `UNKNOWN` alone when it is not one."""
        calls = self._argparse.get(dest, [])
        action = keyword(calls[0], "action") if len(calls) == 1 else None
        switch = self.context.literal(action.value) if action is not None else None
        if switch in ("store_true", "store_false"):
            return frozenset([True, False])
        default = self.argparse_default(dest)
        return frozenset([default, UNKNOWN]) if isinstance(default, bool) else frozenset([UNKNOWN])

    def _param_options(self, param: cst.CSTNode) -> Optional[frozenset]:
        function = self.context.enclosing(param, cst.FunctionDef)
        if not isinstance(param, cst.Param) or not isinstance(function, cst.FunctionDef):
            return None
        ordered = [*function.params.posonly_params, *function.params.params]
        is_method = self.context.enclosing(function, cst.ClassDef) is not None and not is_static(function)
        if param in ordered:
            position: Optional[int] = max(ordered.index(param) - (1 if is_method else 0), -1)
        elif param in function.params.kwonly_params:
            position = None
        else:
            return None
        sites = [(self.context, call) for call in self.call_sites(function)]
        if not sites and function in self.context.module.body:
            sites = [
                (site.summary.model.loaders.context, site.call)
                for site in project.call_sites(self.context.source.path, function.name.value)
            ]
        default = self.context.literal(param.default) if param.default is not None else None
        options: set = set()
        for context, call in sites:
            arg = argument(call, param.name.value, position if position is not None and position >= 0 else None)
            if arg is not None:
                options.add(context.literal(arg.value))
            elif has_star_args(call) or has_star_kwargs(call):
                options.update({UNKNOWN, default})  # `get_loaders(**config)`: the default unless the dict holds it
            elif param.default is None:
                options.add(UNKNOWN)  # a call this reading gets wrong
            else:
                options.add(default)
        if not sites:
            return None  # called nowhere this project shows: any value may come
        return frozenset(options)
