"""Lint one source text: parse once, run every selected rule in one walk, turn reports into findings."""

from __future__ import annotations

import ast
from contextlib import contextmanager
from functools import lru_cache
from typing import Callable, Mapping, Optional, Sequence, Union

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from torchlint.lint import trees
from torchlint.lint.context import Context, RawFinding
from torchlint.lint.finding import FileResult, Finding, FindingFix, FixEdit
from torchlint.lint.fix import LINE_LENGTH, wrap_call
from torchlint.lint.limits import check_shape
from torchlint.lint.names import ImportTable, module_level_bindings
from torchlint.lint.placement import binds_at_top, comment_lines_above, import_insertion
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


class InvalidSyntax(SourceError):
    """A file that does not parse; reported as a TL000 finding at the error's position."""

    def __init__(self, source: SourceFile, line: int, column: int, reason: str) -> None:
        super().__init__(f"syntax error at {_where(source, line, column)}: {reason}")
        self.line, self.column, self.reason = line, column, reason


def _python_syntax_error(source: SourceFile) -> Optional[SourceError]:
    """CPython's own account of a syntax error (clearer than a parser-generator's), if it sees one."""
    try:
        compile(source.text, source.path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return InvalidSyntax(source, exc.lineno or 1, exc.offset or 1, exc.msg)
    except (ValueError, RecursionError, MemoryError) as exc:
        return SourceError(f"cannot be parsed: {exc}")
    return None


# The shape of a text, remembered: a file linted is often read again as a module its importers use.
_shape_problem = lru_cache(maxsize=256)(check_shape)


def _check_limits(source: SourceFile) -> None:
    """Refuse, before parsing, a file too long or too deep to parse in bounded time and memory (deep
    nesting overflows libcst's native parser, which kills the process rather than raising)."""
    problem = _shape_problem(source.text)
    if problem is not None:
        raise SourceError(problem)


def parse(source: SourceFile) -> cst.Module:
    """The file's tree (parsed once per run: see `trees`)."""
    return trees.parsed(source.path, source.text, lambda: _parse(source))


_validate_node = cst.CSTNode.__post_init__


def _trust_node(node: cst.CSTNode) -> None:
    """No check: the parser builds only nodes that stand for the text it read."""


@contextmanager
def _parser_nodes_unchecked():
    """While the parser builds a tree, libcst's check of each new node's fields (`CSTNode.__post_init__`,
    a seventh of a parse) is skipped: the parser only builds nodes of valid code, and some checks even
    refuse valid code (`() if 0 else(lambda: ())` raised TypeError). Nodes built anywhere else (fixes)
    are still checked."""
    cst.CSTNode.__post_init__ = _trust_node  # type: ignore[method-assign]
    try:
        yield
    finally:
        cst.CSTNode.__post_init__ = _validate_node  # type: ignore[method-assign]


def _parse(source: SourceFile) -> cst.Module:
    _check_limits(source)
    try:
        with _parser_nodes_unchecked():
            return cst.parse_module(source.text)
    except cst.ParserSyntaxError as exc:
        clearer = _python_syntax_error(source)
        if clearer is not None:
            raise clearer from None
        reason = exc.message.splitlines()[0] if exc.message else "invalid syntax"
        raise InvalidSyntax(source, exc.raw_line, exc.raw_column + 1, reason) from None
    except RecursionError:
        raise SourceError("too deeply nested to parse") from None


def check_syntax(source: SourceFile) -> None:
    """Raise SourceError for a syntax error, with CPython's fast parser (for files no rule needs to walk)."""
    _check_limits(source)
    error = _python_syntax_error(source)
    if error is not None:
        raise error


@lru_cache(maxsize=None)
def _hooks(rule_type: type, prefix: str) -> tuple[str, ...]:
    """A rule class's methods named `prefix...` (read once per class, not once per file)."""
    return tuple(attr for attr in dir(rule_type) if attr.startswith(prefix))


def _dispatch_table(rules: Sequence[Rule], prefix: str) -> dict[str, list[Callable[[cst.CSTNode], object]]]:
    table: dict[str, list[Callable[[cst.CSTNode], object]]] = {}
    for rule in rules:
        for attr in _hooks(type(rule), prefix):
            table.setdefault(attr[len(prefix) :], []).append(getattr(rule, attr))
    return table


def _run_rules(context: Context, rules: list[Rule], notes: list[str]) -> list[Union[cst.Import, cst.ImportFrom]]:
    """One depth-first walk; each node's visit_/leave_ methods of every rule are called in turn. Returns the
    imports in the order the walk met them."""
    visits = _dispatch_table(rules, "visit_")
    leaves = _dispatch_table(rules, "leave_")
    broken: set[str] = set()
    parents = context.parents
    imports = context.imports
    met: list[Union[cst.Import, cst.ImportFrom]] = []

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
            if kind == "Module":
                context.parents_known()  # every node has been visited
            methods = leaves.get(kind)
            if methods:
                context.current = node
                call(methods, node)
            continue
        if kind in ("Import", "ImportFrom"):
            imports.add(node)  # type: ignore[arg-type]
            met.append(node)  # type: ignore[arg-type]
        methods = visits.get(kind)
        if methods:
            context.current = node
            call(methods, node)
        if kind in leaves:  # a leave entry only where some rule listens
            stack.append((node, True))
        for child in reversed(semantic_children(node)):
            parents[child] = node
            stack.append((child, False))
    context.parents_known()  # also where no rule listens to the module's leave
    return met


def _positions_of(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """Every node's range. The provider's own pass (a code generation that records ranges) where this libcst has
    it: `MetadataWrapper.resolve` also rebuilds every node of the tree in a visit for providers of another kind
    (none here). Those are libcst internals, so the public way is kept for a version without them."""
    provider = PositionProvider()
    try:
        provider._gen_impl(module)
        if provider._computed:
            return provider._computed
    except AttributeError:
        pass
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


class _Positions:
    """Node positions, computed only for files that have something to report."""

    def __init__(self, module: cst.Module, text: str) -> None:
        self._ranges = _positions_of(module)
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


def _open_brackets(text: str) -> int:
    """Brackets `text` leaves open (strings are not looked into: a line prefix rarely holds one with brackets)."""
    depth = 0
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
    return depth


def _split_outer_brackets(line: str, indent: str) -> Optional[str]:
    """`line` with the contents of its first bracket pair on a line of their own, if that pair closes the
    line's code (`x = {...}  # note`, `f(...):`) and the contents then fit; None otherwise."""
    import io
    import tokenize

    code = line.lstrip()
    shift = len(line) - len(code)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    opening = next((t for t in tokens if t.type == tokenize.OP and t.string in "([{"), None)
    if opening is None:
        return None
    depth, closing = 0, None
    for tok in tokens:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
            if depth == 0 and tok.start > opening.start:
                closing = tok
                break
    if closing is None:
        return None
    skipped = (tokenize.COMMENT, tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.DEDENT)
    after = [t for t in tokens if t.start >= closing.end and t.type not in skipped]
    if any(not (t.type == tokenize.OP and t.string == ":") for t in after):
        return None
    open_at, close_at = opening.end[1] + shift, closing.start[1] + shift
    middle = indent + "    " + line[open_at:close_at].strip()
    if len(middle) > LINE_LENGTH:
        return None
    return line[:open_at] + "\n" + middle + "\n" + indent + line[close_at:]


def _has_comment(node: cst.CSTNode) -> bool:
    found = []

    class _Comments(cst.CSTVisitor):
        def visit_Comment(self, comment: cst.Comment) -> None:
            found.append(comment)

    node.visit(_Comments())
    return bool(found)


class _FixBuilder:
    """Turns a rule's node-level Fix into text edits with positions."""

    def __init__(self, context: Context, positions: _Positions) -> None:
        self.context = context
        self.positions = positions
        self.text = context.source.text
        self._imports: dict[str, FixEdit] = {}

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

    def _fit(
        self, old: cst.CSTNode, new: cst.Call, content: str, start: tuple[int, int], end: tuple[int, int]
    ) -> tuple[tuple[int, int], tuple[int, int], str]:
        """The edit that puts `new` in place of `old`: as it is, or split over lines as ruff's formatter would
        split it if the line no longer fits (only where it fitted before: a file written with long lines
        keeps its style)."""
        unchanged = (start, end, content)
        (line, col), (end_line, end_col) = start, end
        before = [self._line_text(n) for n in range(line, end_line + 1)]
        if any(len(text) > LINE_LENGTH for text in before):
            return unchanged
        prefix, suffix = before[0][:col], before[-1][end_col:]
        if all(len(text) <= LINE_LENGTH for text in (prefix + content + suffix).split("\n")):
            return unchanged
        if _has_comment(new):
            return unchanged  # splitting again would lose the comments between the arguments
        leading = before[0][: len(before[0]) - len(before[0].lstrip())]
        if _open_brackets(prefix):
            # Inside other brackets: a formatter splits the outermost ones first.
            whole = _split_outer_brackets(prefix + content + suffix, leading)
            if whole is None or "\n" in content:
                return unchanged
            return (line, 0), (end_line, len(before[-1])), whole
        block = "".join(self.context.block_indents(old))
        extra = leading[len(block) :] if leading.startswith(block) else ""
        for one_per_line in (False, True):
            text = self._render(old, wrap_call(new, extra, one_per_line))
            lines = (prefix + text + suffix).split("\n")
            if one_per_line or all(len(part) <= LINE_LENGTH for part in lines[1:-1]):
                return start, end, text
        return unchanged

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
                    if isinstance(change.new, cst.Call):
                        (line, col), (end_line, end_col), content = self._fit(
                            change.node, change.new, content, (line, col), (end_line, end_col)
                        )
                if is_statement:
                    # A statement's range stops before its trailing comment, which its rendering
                    # repeats: replace through the end of its last line.
                    end_col = len(self._line_text(end_line))
                edits.append(self._edit((line, col), (end_line, end_col), content))
            elif isinstance(change, InsertBefore):
                text = change.text
                if is_statement:
                    (line, col), text = self._statement_insertion(change.node, line, col, text)  # type: ignore[arg-type]
                edits.append(self._edit((line, col), (line, col), text))
        edits = self._drop_emptied_lines(edits)
        first_row = min((e.row for e in edits), default=10**9)
        for module in fix.imports:
            if not binds_at_top(self.context.module, module, self._lines_of, first_row):
                edits.append(self._import_edit(module))
        return FindingFix(message=fix.description, safe=fix.safe, edits=tuple(edits))

    def _drop_emptied_lines(self, edits: list[FixEdit]) -> list[FixEdit]:
        """Deletions that leave a line blank (an argument on a line of its own) delete the whole line,
        rather than leave the whitespace-only line a formatter would remove."""
        by_row: dict[int, list[FixEdit]] = {}
        for edit in edits:
            if edit.content == "" and edit.row == edit.end_row:
                by_row.setdefault(edit.row, []).append(edit)
        for row, deletions in by_row.items():
            if any(e.row <= row <= e.end_row for e in edits if e not in deletions):
                continue
            text = self._line_text(row)
            start = self.positions.offset_of_line(row)
            kept = text
            for edit in sorted(deletions, key=lambda e: e.start, reverse=True):
                kept = kept[: edit.start - start] + kept[edit.end - start :]
            if kept.strip() or not text.strip():
                continue
            whole = FixEdit(start, self.positions.offset_of_line(row + 1), "", row, 1, row + 1, 1)
            edits = [e for e in edits if e not in deletions] + [whole]
        return edits

    def _statement_insertion(
        self, statement: cst.BaseStatement, line: int, col: int, text: str
    ) -> tuple[tuple[int, int], str]:
        """Where and what to insert for `text` to stand as its own lines before `statement`.

        Never between the statement and the comment lines right above it, which describe it (a decorator
        is the exception: it goes on the definition itself). At module
        level the text goes after the first blank line above (so the blank lines below an import block
        stay one, and those above a function stay two)."""
        newline = self.context.source.newline
        indent = self._indent_of(line, col)
        body = text.replace("\n", newline)
        if text.lstrip().startswith("@"):  # a decorator belongs right on its definition
            return (line, col), body + newline + indent
        leading = statement.leading_lines
        at_module_level = any(statement is s for s in self.context.module.body)
        if at_module_level and leading and leading[0].comment is None:
            # One blank line after the text; the blank lines that stood above the statement follow it.
            return (line - len(leading) + 1, 0), body.rstrip("\r\n") + newline + newline
        above = comment_lines_above(statement)
        if above:
            return (line - above, 0), indent + body + newline
        return (line, col), body + newline + indent

    def _lines_of(self, statement: cst.CSTNode) -> tuple[int, int]:
        line, _, end_line, _ = self.positions.range(statement)
        return line, end_line

    def _import_edit(self, module: str) -> FixEdit:
        """The one edit that adds `import module` (shared by every fix that needs it)."""
        edit = self._imports.get(module)
        if edit is None:
            line, text = import_insertion(self.context.module, module, self._lines_of, self.context.source.newline)
            at = self.positions.offset_of_line(line)
            edit = self._imports[module] = FixEdit(at, at, text, line, 1, line, 1)
        return edit


def prepare_context(source: SourceFile, *, walk: bool = False) -> Context:
    """Parse a file and resolve its top-level imports; with `walk`, also record every node's parent and the
    imports inside functions (what the rules' walk does as it goes)."""
    module = parse(source)
    imports = ImportTable()
    top_imports, rebound = module_level_bindings(module)
    for node in top_imports:
        imports.add(node)
    imports.shadow(rebound)
    context = Context(source, module, imports)
    walked = trees.walk_of(source.path, source.text, module)
    if walked is not None:  # the tree was walked whole before (linted, or summarised)
        context.take_parents(walked.parents)
        if walk:
            for node in walked.imports:
                imports.add(node)
    elif walk:
        _record_parents_and_imports(context)
    return context


def _record_parents_and_imports(context: Context) -> None:
    """What the rules' walk records with no rule to run: every node's parent, and the imports in the order
    the walk meets them."""
    parents = context.parents
    imports = context.imports
    met: list[Union[cst.Import, cst.ImportFrom]] = []
    stack: list[cst.CSTNode] = [context.module]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Import or kind is cst.ImportFrom:
            imports.add(node)  # type: ignore[arg-type]
            met.append(node)  # type: ignore[arg-type]
        for child in reversed(semantic_children(node)):
            parents[child] = node
            stack.append(child)
    context.parents_known()
    _keep_walk(context, met)


def _keep_walk(context: Context, imports: list[Union[cst.Import, cst.ImportFrom]]) -> None:
    source = context.source
    trees.keep_walk(source.path, source.text, context.module, trees.Walk(context.parents, tuple(imports)))


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

    context = prepare_context(source)
    try:
        with trees.in_use(source.path, text):
            rules = [cls(context) for cls in active]
            met = _run_rules(context, rules, result.notes)
            _keep_walk(context, met)
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
