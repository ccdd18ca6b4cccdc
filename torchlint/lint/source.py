"""Reading source files (.py, .pyi and .ipynb) into text, and writing fixed text back.

Files are decoded by their PEP 263 cookie (UTF-8 by default) without newline translation, so a fix keeps
the file's encoding and newline style. A notebook's code cells are joined into one text, with IPython
magics turned into comments of the same length, so that offsets map back to each cell unchanged.
"""

from __future__ import annotations

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

    def with_edits(self, edits: Sequence[Edit]) -> "SourceFile":
        """A new SourceFile with `edits` (non-overlapping) applied."""
        if not self.is_notebook:
            return replace(self, text=_apply(self.text, edits))
        per_cell: list[list[Edit]] = [[] for _ in self.cells]
        for edit in edits:
            for number, cell in enumerate(self.cells):
                if cell.start <= edit.start and edit.end <= cell.end:  # at a boundary: the earlier cell
                    per_cell[number].append(Edit(edit.start - cell.start, edit.end - cell.start, edit.content))
                    break
        sources = [_apply(cell.original, inside) for cell, inside in zip(self.cells, per_cell)]
        notebook = json.loads(json.dumps(self.notebook))
        code_cells = [c for c in notebook["cells"] if c.get("cell_type") == "code"]
        for raw, source in zip(code_cells, sources):
            raw["source"] = source.splitlines(keepends=True)
        return notebook_from_json(self.path, notebook)

    def edit_spans_cells(self, edit: Edit) -> bool:
        if not self.is_notebook:
            return False
        return not any(c.start <= edit.start and edit.end <= c.end for c in self.cells)

    def to_bytes(self) -> bytes:
        if self.is_notebook:
            return (json.dumps(self.notebook, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
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


# A line magic or shell escape, possibly assigned (`files = !ls`), at the start of a line.
_MAGIC = re.compile(r"^(\s*(?:[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*)?)([%!?].*)$")


def _mask_line(line: str) -> str:
    body = line.rstrip("\r\n")
    match = _MAGIC.match(body)
    if match is None:
        return line
    prefix, magic = match.groups()
    # `...` keeps the line a statement (an if-block of magics stays valid); `#` hides the rest.
    if len(magic) >= 4:
        masked = "...#" + magic[4:]
    else:
        masked = "..." if len(magic) == 3 else "#" * len(magic)
    return prefix + masked + line[len(body) :]


def _mask_magics(source: str) -> str:
    """Turn IPython magics and shell escapes into Python of the same length (offsets stay put)."""
    if source.lstrip().startswith("%%"):
        return "".join(("#" + line[1:]) if line.strip() else line for line in source.splitlines(keepends=True))
    return "".join(_mask_line(line) for line in source.splitlines(keepends=True))


def notebook_from_json(path: str, notebook: dict) -> SourceFile:
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise SourceError("not a Jupyter notebook (no 'cells' list)")
    parts: list[str] = []
    cells: list[Cell] = []
    offset, line = 0, 1
    for index, raw in enumerate(notebook["cells"], start=1):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        source = raw.get("source", "")
        original = "".join(source) if isinstance(source, list) else str(source)
        masked = _mask_magics(original)
        cells.append(Cell(index, offset, offset + len(masked), line, original))
        joined = masked if masked.endswith("\n") or not masked else masked + "\n"
        parts.append(joined)
        offset += len(joined)
        line += joined.count("\n")
    return SourceFile(path=path, text="".join(parts), notebook=notebook, cells=tuple(cells))


def decode_notebook(path: str, data: bytes) -> SourceFile:
    try:
        notebook = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SourceError(f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise SourceError(f"not a valid notebook: invalid JSON at line {exc.lineno}, column {exc.colno}") from None
    return notebook_from_json(path, notebook)


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
        if not in_place and (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
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
