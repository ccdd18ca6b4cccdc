"""What the rules of this family share."""

from __future__ import annotations

import re
from typing import Optional, Union

import libcst as cst

from torchlint.lint.placement import insert_after_imports
from torchlint.lint.rule import Fix, InsertBefore, Rule
from torchlint.semantic.devices import accelerator_in

CONV_LAYER = re.compile(r"^torch\.nn\.(?:Lazy)?Conv(?:Transpose)?[123]d$")

CONV_MODEL = re.compile(
    r"^torchvision\.models\.(?:\w+\.)?(?:resnet\d+|resnext\w+|wide_resnet\w+|vgg\d+(?:_bn)?|alexnet|densenet\d+|"
    r"mobilenet_v[23]\w*|efficientnet_\w+|regnet_\w+|convnext_\w+|shufflenet_v2\w*|squeezenet\w+|googlenet|"
    r"inception_v3|mnasnet\w+)$"
)



class TrainingScript(Rule):
    """Facts about a whole file: does it train a model on CUDA, as a script?"""

    def __init__(self, context) -> None:
        super().__init__(context)
        self.uses_cuda = False
        self.loop: Optional[Union[cst.For, cst.While]] = None
        self.is_script = False
        self.off = self._already_decided(context.source.text)

    def _already_decided(self, text: str) -> bool:
        raise NotImplementedError

    def visit_Call(self, node: cst.Call) -> None:
        if self.off:
            return
        func = node.func
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            if attr == "cuda" and self.context.qualname(func) is None:
                self.uses_cuda = True
            elif attr == "backward" and self.loop is None:
                loop = self.semantic.hot_loop(node)
                if loop is not None and self.semantic.is_training_loop(loop):
                    self.loop = loop
        self.facts(node)

    def facts(self, node: cst.Call) -> None:
        pass

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not self.off and not self.uses_cuda and "cuda" in node.value:
            value = self.context.literal(node)
            if isinstance(value, str) and accelerator_in(value) == "cuda":
                self.uses_cuda = True

    def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
        if not self.off and node.value.startswith("cuda:"):
            self.uses_cuda = True

    def visit_If(self, node: cst.If) -> None:
        test = node.test
        if isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == "__name__":
            self.is_script = True

    def training_script(self) -> bool:
        if self.off or self.loop is None or not self.uses_cuda:
            return False
        return self.is_script or self._runs_at_module_level()

    def _runs_at_module_level(self) -> bool:
        """A module-level loop or `parser.parse_args()`: the file is run, not imported."""
        for stmt in self.context.module.body:
            if isinstance(stmt, (cst.For, cst.While)):
                return True
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    value = getattr(small, "value", None)
                    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                        if value.func.attr.value in ("parse_args", "parse_known_args"):
                            return True
        return False

    def setting_fix(self, description: str, line: str) -> Fix:
        """Insert `line` at module level where `torch` is bound: after the docstring and the imports, or, when
        only a later or guarded (`try:`) module-level `import torch` binds it, right after that statement
        (importing torch unguarded would defeat the guard). Otherwise `import torch` is added."""
        module = self.context.module
        binder = self._late_torch_import()
        if binder is not None:
            index = next(i for i, s in enumerate(module.body) if s is binder)
            while index + 1 < len(module.body) and _is_import(module.body[index + 1]):
                index += 1  # after the imports that follow it
            following = module.body[index + 1] if index + 1 < len(module.body) else None
            top = self._top_statement(self.loop) if self.loop is not None else None
            if following is not None and (top is None or any(s is top for s in module.body[index + 1 :])):
                return Fix(description, [InsertBefore(following, line + "\n")], safe=False)
        return Fix(description, [insert_after_imports(module, line)], safe=False, imports=("torch",))

    def _late_torch_import(self) -> Optional[cst.BaseStatement]:
        """The first module-level statement that binds `torch` when it is not one of the leading imports:
        a plain `import torch` further down, or a `try:` whose body imports it. None when the leading
        imports bind it, or nothing at module level does."""
        leading = True
        for statement in self.context.module.body:
            if isinstance(statement, cst.SimpleStatementLine) and _imports_torch(statement):
                return None if leading else statement
            if isinstance(statement, cst.Try) and any(
                isinstance(s, cst.SimpleStatementLine) and _imports_torch(s) for s in statement.body.body
            ):
                return statement
            if not (_is_import(statement) or isinstance(statement, cst.SimpleStatementLine) and all(
                isinstance(small, cst.Expr) for small in statement.body
            )):
                leading = False
        return None

    def _top_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        top = node
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.Module):
                return top
            top = ancestor
        return top

    def loop_anchor(self) -> cst.CSTNode:
        loop = self.loop
        assert loop is not None
        return loop.iter if isinstance(loop, cst.For) else loop.test


def _imports_torch(statement: cst.SimpleStatementLine) -> bool:
    """`import torch` or `import torch.cuda` (no `as`): binds the name `torch`."""
    for small in statement.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                name = cst.helpers.get_full_name_for_node(alias.name) or ""
                if alias.asname is None and name.split(".")[0] == "torch":
                    return True
    return False


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )
