"""Where new module-level code goes, so that a fix leaves what ruff's import sorting expects.

- `import NAME` joins the block of its kind (standard library, or everything else), in sorted position when
  that block is sorted, after the module docstring and `from __future__` imports; a kind with no block yet
  gets a block of its own, one blank line from its neighbours.
- A module-level statement goes after the docstring and the imports, with the blank lines a formatter puts
  there.
- Nothing is ever put between a comment and the line below it that the comment describes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Optional

import libcst as cst

from torchlint.lint.rule import InsertBefore

LineRange = Callable[[cst.CSTNode], tuple[int, int]]  # a statement's (first line, last line), 1-based

_STDLIB = frozenset(sys.stdlib_module_names)


@dataclass(frozen=True)
class _Import:
    statement: cst.SimpleStatementLine
    first: int  # its first line, comments directly above it included
    last: int
    section: str  # "future", "stdlib" or "other"
    key: tuple[int, str]  # isort's order within a section: `import x` first, then `from x import y`


def section_of(module_name: str) -> str:
    top = module_name.split(".")[0]
    if top == "__future__":
        return "future"
    return "stdlib" if top in _STDLIB else "other"


def comment_lines_above(statement: cst.BaseStatement) -> int:
    """How many comment lines sit directly above `statement` (no blank line between): they describe it."""
    count = 0
    for line in reversed(statement.leading_lines):
        if line.comment is None:
            break
        count += 1
    return count


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_masked_magic(statement: cst.BaseStatement) -> bool:
    """A notebook magic, masked as `...` (see source.py): part of the header, like an import."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.Ellipsis)
    )


def _import_of(statement: cst.BaseStatement) -> Optional[tuple[str, int]]:
    """(module name, 0 for `import`/1 for `from`) of a line holding only imports."""
    if not isinstance(statement, cst.SimpleStatementLine) or not statement.body:
        return None
    if not all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body):
        return None
    first = statement.body[0]
    if isinstance(first, cst.Import):
        return cst.helpers.get_full_name_for_node(first.names[0].name) or "", 0
    assert isinstance(first, cst.ImportFrom)
    module = cst.helpers.get_full_name_for_node(first.module) if first.module is not None else ""
    return "." * len(first.relative) + (module or ""), 1


@dataclass(frozen=True)
class _Header:
    docstring_last: Optional[int]  # last line of the module docstring
    imports: list[_Import]
    first_code: Optional[cst.BaseStatement]  # the first statement after the docstring and imports


def _header(module: cst.Module, lines_of: LineRange) -> _Header:
    imports: list[_Import] = []
    docstring_last = None
    first_code = None
    for index, statement in enumerate(module.body):
        if index == 0 and _is_docstring(statement):
            docstring_last = lines_of(statement)[1]
            continue
        found = _import_of(statement)
        if found is None:
            if _is_masked_magic(statement):
                continue
            first_code = statement
            break
        name, kind = found
        first, last = lines_of(statement)
        section = "other" if name.startswith(".") else section_of(name)
        imports.append(_Import(statement, first - comment_lines_above(statement), last, section, (kind, name.lower())))
    return _Header(docstring_last, imports, first_code)


def _blocks(imports: list[_Import]) -> list[list[_Import]]:
    """Runs of imports with no blank line between them."""
    blocks: list[list[_Import]] = []
    for item in imports:
        blank_above = any(line.comment is None for line in item.statement.leading_lines)
        if blocks and not blank_above and item.first == blocks[-1][-1].last + 1:
            blocks[-1].append(item)
        else:
            blocks.append([item])
    return blocks


def binds_at_top(module: cst.Module, name: str, lines_of: LineRange, before_line: int) -> bool:
    """Whether a plain module-level `import NAME` (or `import NAME.sub`, or `import X as NAME`) runs before
    `before_line`. One inside `try:`, `if`, a function, or further down does not count."""
    for statement in module.body:
        if lines_of(statement)[0] >= before_line:
            break
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.Import):
                continue
            for alias in small.names:
                if alias.asname is not None:
                    bound = cst.helpers.get_full_name_for_node(alias.asname.name)
                else:
                    bound = (cst.helpers.get_full_name_for_node(alias.name) or "").split(".")[0]
                if bound == name:
                    return True
    return False


def import_insertion(module: cst.Module, name: str, lines_of: LineRange, newline: str = "\n") -> tuple[int, str]:
    """(line before which to insert, text) that adds `import NAME` where isort would put it."""
    header = _header(module, lines_of)
    statement = f"import {name}{newline}"
    key = (0, name.lower())
    section = section_of(name)
    blocks = _blocks([i for i in header.imports if i.section != "future"])
    same = [b for b in blocks if all(i.section == section for i in b)]
    if same:
        block = same[0]
        keys = [i.key for i in block]
        if keys == sorted(keys):
            for item in block:
                if item.key > key:
                    return item.first, statement
        return block[-1].last + 1, statement
    if section == "stdlib" and blocks:
        # The standard library comes first: a block of its own above the others.
        return blocks[0][0].first, statement + newline
    if blocks or header.imports:
        last = (blocks[-1] if blocks else header.imports)[-1].last
        return last + 1, newline + statement
    return _after_header(module, header, lines_of, statement, newline)


def _after_header(module: cst.Module, header: _Header, lines_of: LineRange, text: str, newline: str) -> tuple[int, str]:
    """Where a new first block goes when the module has no imports: after its docstring, if any."""
    code = header.first_code
    blank_lines = 2 if isinstance(code, (cst.FunctionDef, cst.ClassDef)) else 1
    if header.docstring_last is not None:
        line = header.docstring_last + 1
        return line, text + newline * _missing_blank_lines(code, blank_lines)
    if code is None:
        return 1, text
    line = lines_of(code)[0] - comment_lines_above(code)
    return line, text + newline * blank_lines


def _missing_blank_lines(code: Optional[cst.BaseStatement], wanted: int) -> int:
    if code is None:
        return 0
    blank = 0
    for line in code.leading_lines:
        if line.comment is not None:
            break
        blank += 1
    return max(0, wanted - blank)


def insert_after_imports(module: cst.Module, code: str) -> InsertBefore:
    """An InsertBefore that puts the statement `code` at module level after the docstring and the imports
    (above any comment that describes the first statement there), with the blank lines ruff expects:
    one after the imports, and as many as there were before the statement that follows."""
    header_code = None
    for index, statement in enumerate(module.body):
        if index == 0 and _is_docstring(statement):
            continue
        if _import_of(statement) is None and not _is_masked_magic(statement):
            header_code = statement
            break
    if header_code is None:
        raise ValueError("no statement after the imports to insert before")
    # The engine follows the text with a line break, so the statement is followed by a blank line; it
    # goes below the first blank line above the statement there, so two before a function stay two.
    text = code.rstrip("\n") + "\n"
    return InsertBefore(header_code, text)
