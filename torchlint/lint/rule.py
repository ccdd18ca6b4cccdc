"""The rule base class and the registry."""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING, ClassVar

from torchlint.lint.proposal import Fix, InsertBefore, Replace  # noqa: F401  (rules import them from here)

if TYPE_CHECKING:
    import libcst as cst

    from torchlint.lint.context import Context
    from torchlint.semantic.model import SemanticModel


class FixSafety(str, enum.Enum):
    """Whether a rule can fix what it finds, and whether the fix may change behaviour."""

    NONE = "none"  # no autofix
    SAFE = "safe"  # behaviour-preserving: applied by --fix
    UNSAFE = "unsafe"  # can change behaviour: applied only with --unsafe-fixes
    SOMETIMES = "sometimes"  # some findings get a safe fix, others an unsafe one


_REGISTRY: dict[str, type["Rule"]] = {}
_CODE = re.compile(r"^TL\d{3}$")


class Rule:
    """One lint rule: metadata for `torchlint rule CODE` and the reference page, plus visitor methods.

    Subclasses define `visit_<NodeType>` / `leave_<NodeType>` methods (libcst node class names);
    the engine calls them during its single traversal of each file. A rule instance lives for one file.
    """

    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, e.g. "dataloader-num-workers-zero"
    family: ClassVar[str]  # heading under which `torchlint rules` groups it
    summary: ClassVar[str]  # one line: what it flags
    message: ClassVar[str]  # default finding message: what to do
    explanation: ClassVar[str]  # Markdown: why it is slow, with a figure
    bad: ClassVar[str]  # example that triggers the rule
    good: ClassVar[str]  # what to write instead
    false_positives: ClassVar[str] = ""  # Markdown: when the finding is wrong, how to silence it
    fix_safety: ClassVar[FixSafety] = FixSafety.NONE
    fix_notes: ClassVar[str] = ""  # Markdown: what the fix does and why it is (un)safe
    default_enabled: ClassVar[bool] = True
    # The file must contain one of these substrings for the rule to have anything to find
    # (lets the engine skip parsing files no selected rule can report on). Empty: always run.
    requires: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, register: bool = True, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not register:  # e.g. a rule defined inside a test
            return
        code = cls.__dict__.get("code")
        if not code:
            return
        if not _CODE.match(code):
            raise ValueError(f"{cls.__name__}: rule code {code!r} is not of the form TL123")
        if code in _REGISTRY and _REGISTRY[code] is not cls:
            raise ValueError(f"rule code {code} registered twice ({_REGISTRY[code].__name__}, {cls.__name__})")
        _REGISTRY[code] = cls

    def __init__(self, context: "Context") -> None:
        self.context = context

    def report(self, node: cst.CSTNode, message: str | None = None, *, fix: Fix | None = None) -> None:
        """Report a finding at `node` (with this rule's default message unless one is given)."""
        self.context.add_finding(self.code, node, message or self.message, fix)

    @property
    def semantic(self) -> "SemanticModel":
        """What the file's code means, shared by every rule (see `torchlint.semantic`)."""
        from torchlint.semantic.model import (
            semantic_model,  # libcst loads only when a file is linted
        )

        return semantic_model(self.context)

    @classmethod
    def url(cls) -> str:
        return rule_url(cls.code)


def rule_url(code: str) -> str:
    """Where a rule's reference page is published."""
    return f"https://github.com/torchlint/torchlint/blob/main/rules/{code}.md"


def all_rules() -> dict[str, type[Rule]]:
    """Every registered rule by code, in code order."""
    import torchlint.rules  # noqa: F401  (importing the package registers the rules)

    return dict(sorted(_REGISTRY.items()))
