"""The torch versions a project says it supports, read from its declared dependencies.

A fix that needs a newer torch than the project promises to run on is not safe. The declarations are read
at the project's root (the nearest directory upward holding `pyproject.toml`, `setup.cfg`, `setup.py`,
`requirements.txt` or `.git`): `[project] dependencies` and `optional-dependencies`, `[tool.poetry.dependencies]` (and its
groups), `setup.cfg`'s `install_requires` and `extras_require`, and every `requirements*.txt`. Each root is
read once per process.
"""

from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Optional

from torchlint.lint.discovery import marked_ancestor

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

Version = tuple[int, ...]

_ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", "requirements.txt", ".git")
_REQUIREMENT = re.compile(r"^\s*torch\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;#@]*)", re.IGNORECASE)
_CLAUSE = re.compile(r"^\s*(?P<op>===|==|~=|>=|<=|!=|>|<|\^|~)?\s*(?P<version>[0-9][0-9.*]*)")


@dataclass(frozen=True)
class TorchRequirement:
    """The oldest torch one declaration allows (None: no lower bound) and where it is written."""

    floor: Optional[Version]
    where: str  # e.g. "requirements.txt: torch>=1.8"


def project_root(path: str) -> Optional[str]:
    """The root of the project a file on disk belongs to (None for text not read from a file)."""
    if not os.path.isfile(path):
        return None
    return _root(os.path.dirname(os.path.abspath(path)))


@lru_cache(maxsize=1024)
def _root(directory: str) -> Optional[str]:
    return marked_ancestor(directory, _ROOT_MARKERS)


def declaration_files(path: str) -> list[str]:
    """The files at the project's root that may declare torch (for cache invalidation)."""
    root = project_root(path)
    return [] if root is None else list(_declarations(root)[0])


def oldest_allowed(path: str) -> Optional[TorchRequirement]:
    """The declaration, among the project's, that allows the oldest torch; None when none names torch
    with a lower bound."""
    root = project_root(path)
    if root is None:
        return None
    requirements = _declarations(root)[1]
    bounded = [r for r in requirements if r.floor is not None]
    return min(bounded, key=lambda r: r.floor) if bounded else None  # type: ignore[arg-type, return-value]


def allows_older_than(path: str, needed: Version) -> Optional[TorchRequirement]:
    """The declaration that lets the project run on a torch older than `needed`, if there is one."""
    oldest = oldest_allowed(path)
    return oldest if oldest is not None and oldest.floor < needed else None  # type: ignore[operator]


@lru_cache(maxsize=256)
def _declarations(root: str) -> tuple[tuple[str, ...], tuple[TorchRequirement, ...]]:
    files: list[str] = []
    found: list[TorchRequirement] = []
    pyproject = os.path.join(root, "pyproject.toml")
    if os.path.isfile(pyproject):
        files.append(pyproject)
        found.extend(_from_pyproject(pyproject))
    setup_cfg = os.path.join(root, "setup.cfg")
    if os.path.isfile(setup_cfg):
        files.append(setup_cfg)
        found.extend(_from_setup_cfg(setup_cfg))
    try:
        names = sorted(os.listdir(root))
    except OSError:
        names = []
    for name in names:
        if name.startswith("requirements") and name.endswith(".txt"):
            path = os.path.join(root, name)
            files.append(path)
            found.extend(_from_lines(_read(path).splitlines(), name))
    return tuple(files), tuple(found)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(1_000_000)
    except OSError:
        return ""


def _from_lines(lines: Iterable[object], where: str) -> list[TorchRequirement]:
    found = []
    for line in lines:
        if not isinstance(line, str):
            continue
        match = _REQUIREMENT.match(line)
        if match is None:
            continue
        rest = line[match.start("spec") :]
        if rest[:1].isalnum() or rest[:1] in "_-.":
            continue  # another package whose name starts with "torch" (torch_geometric, torchmetrics)
        found.append(TorchRequirement(_floor(match.group("spec")), f"{where}: {line.strip()}"))
    return found


def _floor(spec: str) -> Optional[Version]:
    """The lowest version a specifier allows (`>=1.8,<3` -> (1, 8); `==2.1.*` -> (2, 1); `^1.13` -> (1, 13))."""
    lowest: Optional[Version] = None
    for clause in spec.split(","):
        match = _CLAUSE.match(clause)
        if match is None:
            continue
        op = match.group("op") or "=="
        if op in ("<", "<=", "!="):
            continue
        version = _version(match.group("version"))
        if version and (lowest is None or version > lowest):
            lowest = version
    return lowest


def _version(text: str) -> Version:
    parts = []
    for part in text.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def _from_pyproject(path: str) -> list[TorchRequirement]:
    try:
        data = tomllib.loads(_read(path))
    except tomllib.TOMLDecodeError:
        return []
    where = os.path.basename(path)
    found: list[TorchRequirement] = []
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    found.extend(_from_lines(_list(project.get("dependencies")), where))
    optional = project.get("optional-dependencies")
    if isinstance(optional, dict):
        for group in optional.values():
            found.extend(_from_lines(_list(group), where))
    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    if isinstance(poetry, dict):
        tables = [poetry.get("dependencies")]
        groups = poetry.get("group")
        if isinstance(groups, dict):
            tables.extend(g.get("dependencies") for g in groups.values() if isinstance(g, dict))
        for table in tables:
            if isinstance(table, dict):
                found.extend(_from_poetry(table, where))
    return found


def _from_poetry(table: dict, where: str) -> list[TorchRequirement]:
    entries = table.get("torch")
    if entries is None:
        return []
    found = []
    for entry in entries if isinstance(entries, list) else [entries]:
        spec = entry.get("version") if isinstance(entry, dict) else entry
        if isinstance(spec, str):
            found.append(TorchRequirement(_floor(spec), f"{where}: torch = \"{spec}\""))
    return found


def _from_setup_cfg(path: str) -> list[TorchRequirement]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(_read(path))
    except configparser.Error:
        return []
    where = os.path.basename(path)
    found = []
    if parser.has_option("options", "install_requires"):
        found.extend(_from_lines(parser.get("options", "install_requires").splitlines(), where))
    if parser.has_section("options.extras_require"):
        for _, value in parser.items("options.extras_require"):
            found.extend(_from_lines(value.splitlines(), where))
    return found


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def version_text(version: Version) -> str:
    return ".".join(map(str, version))
