"""Reading source files (.py, .pyi and .ipynb) into text, and writing fixed text back.

Files are decoded by their PEP 263 cookie (UTF-8 by default) without newline translation, so a fix keeps
the file's encoding and newline style. A notebook's code cells are joined into one text, with IPython
magics turned into comments of the same length, so that offsets map back to each cell unchanged.
"""

from __future__ import annotations

import ast
import codecs
import hashlib
import io
import json
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass, field, replace
from typing import Optional, Sequence

from torchlint.lint.limits import MAX_FILE_BYTES, MAX_NOTEBOOK_BYTES, check_size
from torchlint.lint.notebook import JsonStyle, detect_style, mask_magics

_NEWLINE = re.compile(r"\r\n|\r|\n")


class SourceError(Exception):
    """A file that cannot be linted; the message is one line naming the problem (not the path)."""


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] with `content` (offsets into SourceFile.text)."""

    start: int
    end: int
    content: str


@dataclass(frozen=True)
class Cell:
    index: int  # 1-based position among all the notebook's cells
    start: int  # offset of the cell's first character in the joined text
    end: int  # offset just past its last character (before the joining newline)
    first_line: int  # 1-based line of its first line in the joined text
    original: str  # the cell's source with its magics intact
    # (line in the joined text, column, reason) when the cell is not valid Python on its own (an exercise's
    # `x = ...  # your code here` left blank): it is linted as empty lines so the other cells still are
    syntax_error: Optional[tuple[int, int, str]] = None


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str
    encoding: str = "utf-8"
    bom: bool = False
    notebook: Optional[dict] = None
    cells: tuple[Cell, ...] = ()
    unfixable: Optional[str] = None  # why fixes must not be written back (an encoding that does not round-trip)
    read_digest: Optional[str] = None  # sha256 of the bytes read: a fix is written only over the same bytes
    raw_json: Optional[str] = field(default=None, repr=False)  # a notebook's text as read
    json_style: Optional[JsonStyle] = None  # how to write a fixed notebook (that of the file read)

    @property
    def is_notebook(self) -> bool:
        return self.notebook is not None

    @property
    def newline(self) -> str:
        match = _NEWLINE.search(self.text)
        return match.group(0) if match else "\n"

    def cell_at_line(self, line: int) -> Optional[tuple[int, int]]:
        """(cell index, line within the cell) of a line of the joined notebook text."""
        for cell in reversed(self.cells):
            if line >= cell.first_line:
                return cell.index, line - cell.first_line + 1
        return None

    def cell_of(self, edit: Edit) -> Optional[Cell]:
        """The one cell an edit falls in, or None when it spans cells (an insertion where one cell ends
        and the next begins goes to the earlier one: after a cell's imports, say)."""
        for cell in self.cells:
            if cell.start <= edit.start and edit.end <= cell.end:
                return cell
        return None

    def with_edits(self, edits: Sequence[Edit]) -> "SourceFile":
        """A new SourceFile with `edits` (non-overlapping) applied; in a notebook, an edit that spans
        cells is dropped and only the cells edited change."""
        if not self.is_notebook:
            return replace(self, text=_apply(self.text, edits))
        per_cell: dict[int, list[Edit]] = {}
        for edit in edits:
            cell = self.cell_of(edit)
            if cell is not None:
                per_cell.setdefault(cell.index, []).append(Edit(edit.start - cell.start, edit.end - cell.start, edit.content))
        notebook = dict(self.notebook)  # type: ignore[arg-type]
        notebook["cells"] = list(notebook["cells"])
        for cell in self.cells:
            inside = per_cell.get(cell.index)
            if not inside:
                continue
            new_source = _apply(cell.original, inside)
            if new_source == cell.original:
                continue
            raw = dict(notebook["cells"][cell.index - 1])
            raw["source"] = new_source if isinstance(raw.get("source"), str) else new_source.splitlines(keepends=True)
            notebook["cells"][cell.index - 1] = raw
        return notebook_from_json(self.path, notebook, self.style())

    def style(self) -> Optional[JsonStyle]:
        if self.json_style is None and self.raw_json is not None and self.notebook is not None:
            # Found once per file read (fixing asks for it once per candidate fix); the field only caches it.
            object.__setattr__(self, "json_style", detect_style(self.raw_json, self.notebook))
        return self.json_style

    def edit_spans_cells(self, edit: Edit) -> bool:
        return self.is_notebook and self.cell_of(edit) is None

    def to_bytes(self) -> bytes:
        if self.is_notebook:
            if self.raw_json is not None:
                return self.raw_json.encode("utf-8")  # unchanged: exactly as read
            return (self.json_style or JsonStyle()).dump(self.notebook).encode("utf-8")  # type: ignore[arg-type]
        data = self.text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def line_starts(text: str) -> list[int]:
    """Offset of the first character of each line (1-based line N starts at [N - 1])."""
    return [0, *(m.end() for m in _NEWLINE.finditer(text))]


def _apply(text: str, edits: Sequence[Edit]) -> str:
    out = text
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        out = out[: edit.start] + edit.content + out[edit.end :]
    return out


def decode_python(path: str, data: bytes) -> SourceFile:
    if b"\x00" in data:
        raise SourceError("binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if b"coding" in b"\n".join(data.splitlines()[:2]):
            raise SourceError(f"bad encoding declaration: {exc}") from None
        encoding = "utf-8"  # no declaration: the bytes themselves are not UTF-8, said below
    bom = encoding == "utf-8-sig"
    if bom:
        data = data[len(codecs.BOM_UTF8) :]
        encoding = "utf-8"
    if not codecs.lookup(encoding)._is_text_encoding:  # hex, base64, zlib, rot13...: not a character set
        raise SourceError(f"unsupported encoding declaration: '{encoding}' is not a text encoding")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"not valid {encoding} (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    except (UnicodeError, LookupError, ValueError) as exc:
        raise SourceError(f"cannot be decoded as {encoding}: {exc}") from None
    return SourceFile(path=path, text=text, encoding=encoding, bom=bom, unfixable=_unfixable(encoding, text, data))


# Codecs that read escapes or shifts rather than characters: a fixed text written back in them is not
# the same program (unicode_escape turns every newline into `\n`).
_ESCAPING_CODECS = {"unicode_escape", "raw_unicode_escape", "punycode", "idna", "utf_7"}


def _unfixable(encoding: str, text: str, data: bytes) -> Optional[str]:
    name = codecs.lookup(encoding).name.replace("-", "_")
    if name == "utf_8":
        return None  # decoded without error: encodes back to the same bytes
    reason = f"not fixed: its encoding ({encoding}) cannot be written back safely"
    if name in _ESCAPING_CODECS:
        return reason
    try:
        if text.encode(encoding) != data:
            return reason
    except (UnicodeError, LookupError):
        return reason
    return None


def _cell_source(index: int, raw: dict) -> str:
    source = raw.get("source", "")
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source)
    raise SourceError(f"not a valid notebook: cell {index}'s source is not text")


def notebook_from_json(path: str, notebook: dict, style: Optional[JsonStyle] = None) -> SourceFile:
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise SourceError("not a Jupyter notebook (no 'cells' list)")
    parts: list[str] = []
    cells: list[Cell] = []
    offset, line = 0, 1
    for index, raw in enumerate(notebook["cells"], start=1):
        if not isinstance(raw, dict):
            raise SourceError(f"not a valid notebook: cell {index} is not a JSON object")
        if raw.get("cell_type") != "code":
            continue
        original = _cell_source(index, raw)
        masked = mask_magics(original)
        cells.append(Cell(index, offset, offset + len(masked), line, original))
        joined = masked if masked.endswith("\n") or not masked else masked + "\n"
        parts.append(joined)
        offset += len(joined)
        line += joined.count("\n")
    if _syntax_error("".join(parts)) is not None:
        _blank_broken_cells(parts, cells)
    return SourceFile(path=path, text="".join(parts), notebook=notebook, cells=tuple(cells), json_style=style)


def _syntax_error(text: str) -> Optional[SyntaxError]:
    try:
        compile(text, "<cell>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError):
        return None  # the engine's parse reports these
    return None


def _blank_broken_cells(parts: list[str], cells: list[Cell]) -> None:
    """Each cell that does not parse on its own becomes blank lines of the same length (offsets and lines of
    the others stay put), its error kept on the cell: one unfinished cell no longer hides the notebook."""
    for i, (part, cell) in enumerate(zip(parts, cells)):
        error = _syntax_error(part)
        if error is None:
            continue
        parts[i] = re.sub(r"[^\r\n]", " ", part)
        where = (cell.first_line + (error.lineno or 1) - 1, error.offset or 1, error.msg)
        cells[i] = replace(cell, syntax_error=where)


def decode_notebook(path: str, data: bytes) -> SourceFile:
    try:
        raw = data.decode("utf-8")
        notebook = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise SourceError(f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise SourceError(f"not a valid notebook: invalid JSON at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise SourceError("not a valid notebook: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer too long to convert
        raise SourceError(f"not a valid notebook: {str(exc).splitlines()[0]}") from None
    source = notebook_from_json(path, notebook)
    return replace(source, raw_json=raw)


def read_regular_file(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. Opened without blocking and checked before
    reading, so a FIFO or a device named like a source file cannot hang or flood the run."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SourceError("is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise SourceError("not a regular file")
        too_large = check_size(info.st_size, limit)
        if too_large:
            raise SourceError(too_large)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while being read
        raise SourceError(check_size(len(data), limit) or "file too large")
    return data


def read_source(path: str, display_path: Optional[str] = None) -> SourceFile:
    """Read and decode one file; raises SourceError with a one-line reason."""
    shown = display_path or path
    notebook = path.endswith(".ipynb")
    try:
        data = read_regular_file(path, MAX_NOTEBOOK_BYTES if notebook else MAX_FILE_BYTES)
    except SourceError:
        raise
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except PermissionError:
        raise SourceError("permission denied") from None
    except FileNotFoundError:
        raise SourceError("no such file") from None
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None
    source = decode_notebook(shown, data) if notebook else decode_python(shown, data)
    return replace(source, read_digest=digest(data))


class SourceChanged(SourceError):
    """The file on disk is no longer the one that was read (edited while being fixed)."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_fixed(path: str, data: bytes, read_digest: Optional[str]) -> None:
    """Write fixed content over the file at `path`, as the user's editor would: through a symbolic link
    to its target, keeping the file's mode, owner and hard links. Raises SourceChanged (writing nothing)
    when the file is no longer what was read, so edits made meanwhile are not lost.

    A file with one link that we may own is replaced in one step (a crash leaves the old or the new
    file, never half of one); a hard-linked file, or one owned by someone else, is rewritten in place,
    after the new content is safely on disk beside it."""
    target = os.path.realpath(path)
    info = os.stat(target)
    if read_digest is not None and digest(read_regular_file(target, max(info.st_size, 1))) != read_digest:
        raise SourceChanged("changed on disk while being fixed; not written")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".torchlint-", dir=os.path.dirname(target))
    except PermissionError:  # a read-only directory: the file itself may still be writable
        _overwrite(target, data)
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(info.st_mode))
        in_place = info.st_nlink > 1
        ours = (getattr(os, "geteuid", lambda: info.st_uid)(), getattr(os, "getegid", lambda: info.st_gid)())
        if not in_place and (info.st_uid, info.st_gid) != ours:
            try:
                os.chown(tmp, info.st_uid, info.st_gid)
            except OSError:
                in_place = True  # cannot give the new file the old owner: keep the old inode
        if in_place:
            _overwrite(target, data)
            os.unlink(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _overwrite(target: str, data: bytes) -> None:
    with open(target, "r+b") as handle:
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())
