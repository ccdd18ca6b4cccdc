"""Lint one source text: parse once, run every selected rule in one walk, turn reports into findings."""

from __future__ import annotations

import ast
from typing import Callable, Optional, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.lint.context import Context, RawFinding
from torchlint.lint.finding import FileResult, Finding, FindingFix, FixEdit
from torchlint.lint.limits import check_shape
from torchlint.lint.names import ImportTable, module_level_bindings
from torchlint.lint.rule import Fix, InsertBefore, Replace, Rule
from torchlint.lint.source import SourceError, SourceFile, line_starts
from torchlint.lint.suppress import Suppressions, find_suppressions
from torchlint.lint.walk import forget_children, semantic_children

UNUSED_NOQA = "TL001"


def _where(source: SourceFile, line: int, column: int) -> str:
    if source.is_notebook:
        cell = source.cell_at_line(line)
        if cell:
            return f"cell {cell[0]}, line {cell[1]}, column {column}"
    return f"line {line}, column {column}"


def _python_syntax_error(source: SourceFile) -> Optional[SourceError]:
    """CPython's own account of a syntax error (clearer than a parser-generator's), if it sees one."""
    try:
        compile(source.text, source.path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return SourceError(f"syntax error at {_where(source, exc.lineno or 1, exc.offset or 1)}: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:
        return SourceError(f"cannot be parsed: {exc}")
    return None


def _check_limits(source: SourceFile) -> None:
    """Refuse, before parsing, a file too long or too deep to parse in bounded time and memory (deep
    nesting overflows libcst's native parser, which kills the process rather than raising)."""
    problem = check_shape(source.text)
    if problem is not None:
        raise SourceError(problem)


def parse(source: SourceFile) -> cst.Module:
    _check_limits(source)
    try:
        return cst.parse_module(source.text)
    except cst.ParserSyntaxError as exc:
        clearer = _python_syntax_error(source)
        if clearer is not None:
            raise clearer from None
        reason = exc.message.splitlines()[0] if exc.message else "invalid syntax"
        raise SourceError(f"syntax error at {_where(source, exc.raw_line, exc.raw_column + 1)}: {reason}") from None
    except RecursionError:
        raise SourceError("too deeply nested to parse") from None


def check_syntax(source: SourceFile) -> None:
    """Raise SourceError for a syntax error, with CPython's fast parser (for files no rule needs to walk)."""
    _check_limits(source)
    error = _python_syntax_error(source)
    if error is not None:
        raise error


def _dispatch_table(rules: Sequence[Rule], prefix: str) -> dict[str, list[Callable[[cst.CSTNode], object]]]:
    table: dict[str, list[Callable[[cst.CSTNode], object]]] = {}
    for rule in rules:
        for attr in dir(type(rule)):
            if attr.startswith(prefix):
                table.setdefault(attr[len(prefix) :], []).append(getattr(rule, attr))
    return table


def _run_rules(context: Context, rules: list[Rule], notes: list[str]) -> None:
    """One depth-first walk; each node's visit_/leave_ methods of every rule are called in turn."""
    visits = _dispatch_table(rules, "visit_")
    leaves = _dispatch_table(rules, "leave_")
    broken: set[str] = set()
    parents = context.parents
    imports = context.imports

    def call(methods: list[Callable[[cst.CSTNode], object]], node: cst.CSTNode) -> None:
        for method in methods:
            code = method.__self__.code  # type: ignore[attr-defined]
            if code in broken:
                continue
            try:
                method(node)
            except Exception as exc:  # a rule bug must not cost the user the other findings
                broken.add(code)
                notes.append(f"internal error in rule {code} ({type(exc).__name__}: {exc}); its findings are skipped")

    stack: list[tuple[cst.CSTNode, bool]] = [(context.module, False)]
    while stack:
        node, leaving = stack.pop()
        kind = type(node).__name__
        if leaving:
            methods = leaves.get(kind)
            if methods:
                context.current = node
                call(methods, node)
            continue
        if kind in ("Import", "ImportFrom"):
            imports.add(node)  # type: ignore[arg-type]
        methods = visits.get(kind)
        if methods:
            context.current = node
            call(methods, node)
        stack.append((node, True))
        for child in reversed(semantic_children(node)):
            parents[child] = node
            stack.append((child, False))


class _Positions:
    """Node positions, computed only for files that have something to report."""

    def __init__(self, module: cst.Module, text: str) -> None:
        self._ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        self._starts = line_starts(text)
        self._text_length = len(text)

    def range(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        """(line, column, end line, end column): 1-based lines, 0-based columns."""
        found = self._ranges[node]
        return found.start.line, found.start.column, found.end.line, found.end.column

    def offset(self, line: int, column: int) -> int:
        return self._starts[line - 1] + column

    def offset_of_line(self, line: int) -> int:
        """Start of `line`; the end of the text for the line after the last one."""
        return self._starts[line - 1] if line - 1 < len(self._starts) else self._text_length


def _import_insertion(module: cst.Module, positions: _Positions) -> tuple[int, int]:
    """(line, offset) where a new top-level `import` goes: after the leading docstring and imports."""
    line = None
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            break
        small = stmt.body[0] if stmt.body else None
        is_docstring = line is None and isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)
        is_magic = line is None and isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis)  # a magic
        if not (isinstance(small, (cst.Import, cst.ImportFrom)) or is_docstring or is_magic):
            break
        line = positions.range(stmt)[2] + 1
    if line is None:
        first = module.body[0] if module.body else None
        line = positions.range(first)[0] if first is not None else 1
    return line, positions.offset_of_line(line)


class _FixBuilder:
    """Turns a rule's node-level Fix into text edits with positions."""

    def __init__(self, context: Context, positions: _Positions) -> None:
        self.context = context
        self.positions = positions
        self.text = context.source.text
        self._import_at: Optional[tuple[int, int]] = None

    def _edit(self, start: tuple[int, int], end: tuple[int, int], content: str) -> FixEdit:
        return FixEdit(
            start=self.positions.offset(*start),
            end=self.positions.offset(*end),
            content=content,
            row=start[0],
            column=start[1] + 1,
            end_row=end[0],
            end_column=end[1] + 1,
        )

    def _line_text(self, line: int) -> str:
        """The text of `line` without its newline."""
        start = self.positions.offset_of_line(line)
        end = self.positions.offset_of_line(line + 1)
        return self.text[start:end].rstrip("\r\n")

    def _indent_of(self, line: int, column: int) -> str:
        line_start = self.positions.offset(line, 0)
        prefix = self.text[line_start : line_start + column]
        return prefix if prefix.strip() == "" else ""

    def _render(self, old: cst.CSTNode, new: cst.CSTNode) -> str:
        """Source for `new` standing where `old` stands."""
        if isinstance(new, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            new = new.with_changes(leading_lines=())  # comments above the statement stay where they are
        text = self.context.code(new, at=old)
        if isinstance(old, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            text = text.rstrip("\r\n")
        return text

    def build(self, fix: Fix) -> FindingFix:
        newline = self.context.source.newline
        edits: list[FixEdit] = []
        for change in fix.changes:
            line, col, end_line, end_col = self.positions.range(change.node)
            is_statement = isinstance(change.node, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
            if isinstance(change, Replace):
                if isinstance(change.new, str):
                    content = change.new
                    if is_statement and "\n" in content:
                        indent = self._indent_of(line, col)
                        content = content.rstrip("\r\n").replace("\n", newline + indent)
                else:
                    content = self._render(change.node, change.new)
                if is_statement:
                    # A statement's range stops before its trailing comment, which its rendering
                    # repeats: replace through the end of its last line.
                    end_col = len(self._line_text(end_line))
                edits.append(self._edit((line, col), (end_line, end_col), content))
            elif isinstance(change, InsertBefore):
                text = change.text
                if is_statement:
                    text = text + newline + self._indent_of(line, col)
                edits.append(self._edit((line, col), (line, col), text))
        for module in fix.imports:
            if self.context.imports.local_name_for(module) is None:
                if self._import_at is None:
                    self._import_at = _import_insertion(self.context.module, self.positions)
                at_line, at = self._import_at
                edits.append(FixEdit(at, at, f"import {module}{newline}", at_line, 1, at_line, 1))
        return FindingFix(message=fix.description, safe=fix.safe, edits=tuple(edits))


def lint_text(source: SourceFile, rule_classes: Sequence[type[Rule]]) -> FileResult:
    """All findings for one file's text (raises SourceError when it cannot be parsed)."""
    result = FileResult(path=source.path)
    text = source.text
    check_noqa = any(r.code == UNUSED_NOQA for r in rule_classes)
    active = [r for r in rule_classes if r.code != UNUSED_NOQA and (not r.requires or any(s in text for s in r.requires))]
    suppressions = find_suppressions(text)
    if suppressions.whole_file:
        return result
    if not active and not (check_noqa and suppressions.by_line):
        check_syntax(source)  # nothing to look for, but a broken file is still worth a line
        return result

    module = parse(source)
    imports = ImportTable()
    top_imports, rebound = module_level_bindings(module)
    for node in top_imports:
        imports.add(node)
    imports.shadow(rebound)
    context = Context(source, module, imports)
    try:
        rules = [cls(context) for cls in active]
        _run_rules(context, rules, result.notes)
        if context.raw_findings or (check_noqa and suppressions.by_line):
            _collect(context, rule_classes, suppressions, check_noqa, result)
    finally:
        # Trees are large and rules, analyses and the context refer to each other: free them now rather
        # than at the next full garbage collection, so a worker's memory stays flat across files.
        context.release()
        forget_children()
    return result


def _collect(
    context: Context,
    rule_classes: Sequence[type[Rule]],
    suppressions: Suppressions,
    check_noqa: bool,
    result: FileResult,
) -> None:
    """Turn the rules' reports into findings with positions and fixes, minus the suppressed ones."""
    positions = _Positions(context.module, context.source.text)
    fixes = _FixBuilder(context, positions)
    used: dict[int, set[str]] = {}
    for raw in context.raw_findings:
        finding = _to_finding(raw, positions, fixes, result.notes)
        if finding is None:
            continue
        directive = suppressions.by_line.get(finding.noqa_line) or suppressions.by_line.get(finding.line)
        if directive is not None and directive.matches(finding.code):
            used.setdefault(directive.line, set()).add(finding.code)
            continue
        result.findings.append(finding)
    if check_noqa:
        selected = {r.code for r in rule_classes}
        result.findings.extend(_unused_noqa(suppressions, used, selected, positions, context.source))
    result.findings.sort(key=lambda f: f.sort_key)


def _to_finding(raw: RawFinding, positions: _Positions, fixes: _FixBuilder, notes: list[str]) -> Optional[Finding]:
    try:
        line, col, end_line, end_col = positions.range(raw.node)
    except KeyError:
        notes.append(f"rule {raw.code} reported a node that is not in the file; skipped")
        return None
    noqa_line = positions.range(raw.statement)[0] if raw.statement is not None else line
    fix = None
    if raw.fix is not None:
        try:
            fix = fixes.build(raw.fix)
        except Exception as exc:
            notes.append(f"could not build the fix for {raw.code} at line {line} ({type(exc).__name__}: {exc})")
    return Finding(raw.code, raw.message, line, col + 1, end_line, end_col + 1, noqa_line, fix)


def _unused_noqa(
    suppressions: Suppressions, used: dict[int, set[str]], selected: set[str], positions: _Positions, source: SourceFile
) -> list[Finding]:
    """A `# noqa: TL...` naming selected codes that silenced nothing on its line."""
    findings = []
    for line, directive in suppressions.by_line.items():
        own = directive.own_codes()
        unused = [c for c in own if any(s.startswith(c) for s in selected) and not any(u.startswith(c) for u in used.get(line, ()))]
        if not unused:
            continue
        codes = directive.codes or ()
        keep = [c for c in codes if c not in unused]
        text = source.text
        start, end = directive.start, directive.end
        line_end = positions.offset_of_line(line + 1)
        rest_blank = text[end:line_end].strip() == ""
        rest = text[end:line_end].lstrip(" \t")
        if keep:
            content = "# noqa: " + ", ".join(keep)
        elif rest_blank:
            content = ""
            while start > 0 and text[start - 1] in " \t":  # drop the spaces before the comment too
                start -= 1
        elif rest.startswith("#"):
            content = ""  # another tool's comment follows (`# type: ignore`): it takes the directive's place
            end = line_end - len(rest)
        else:
            content = "#"  # more comment text follows: keep it a comment
        start_line = line
        start_col = start - positions.offset(line, 0)
        end_col = end - positions.offset(line, 0)
        edit = FixEdit(start, end, content, start_line, start_col + 1, start_line, end_col + 1)
        names = ", ".join(unused)
        findings.append(
            Finding(
                UNUSED_NOQA,
                f"Unused `noqa` directive for {names}: nothing is reported here; remove it",
                line,
                directive.start - positions.offset(line, 0) + 1,
                line,
                end_col + 1,
                line,
                FindingFix(f"Remove unused {names}", True, (edit,)),
            )
        )
    return findings
