"""Configuration: `[tool.torchlint]` in the nearest pyproject.toml, or a torchlint.toml, and rule selection."""

from __future__ import annotations

import difflib
import fnmatch
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from torchlint.lint.rule import Rule, all_rules
from torchlint.lint.time_limit import DEFAULT_SECONDS

DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".torchlint_cache",
    ".tox",
    ".venv",
    "__pycache__",
    "__pypackages__",
    "_build",
    "build",
    "dist",
    "node_modules",
    "venv",
)

_KEYS = {
    "select": list,
    "ignore": list,
    "extend-select": list,
    "per-file-ignores": dict,
    "exclude": list,
    "extend-exclude": list,
    "fix": bool,
    "unsafe-fixes": bool,
    "file-time-limit": float,
}


class ConfigError(Exception):
    """A configuration or usage problem; the message is one line (exit code 2)."""


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ()  # empty: the default rule set
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    fix: bool = False
    unsafe_fixes: bool = False
    file_time_limit: float = DEFAULT_SECONDS  # seconds one file's analysis may take; 0: no limit
    root: str = "."  # directory that relative patterns are relative to
    source: Optional[str] = None  # the config file these came from

    def with_overrides(self, **changes: Any) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def fingerprint(self) -> str:
        """What the cached results of a file depend on, besides its content and torchlint's own code.

        Made from the selectors as written, so a run that finds everything cached never loads a rule."""
        return repr((self.select, self.extend_select, self.ignore, self.per_file_ignores))

    def rules(self) -> list[type[Rule]]:
        return select_rules(self.select, self.extend_select, self.ignore)

    def rules_for(self, path: str) -> list[type[Rule]]:
        ignored = [code for pattern, codes in self.per_file_ignores if self._matches(path, pattern) for code in codes]
        rules = self.rules()
        if not ignored:
            return rules
        return [r for r in rules if not any(r.code.startswith(i) or i == "ALL" for i in ignored)]

    def is_excluded(self, path: str, below: Optional[str] = None) -> bool:
        """Whether an exclude pattern matches `path` or one of its parent directories.

        With `below` (a directory the user named), only the parts under it count, as in ruff: naming
        `build/proj` lints it even though `build` is excluded by default."""
        patterns = (*self.exclude, *self.extend_exclude)
        relative = _relative_posix(path, self.root)
        parts = relative.split("/")
        first = 0
        if below is not None:
            named = _relative_posix(below, self.root)
            named_parts = [] if named == "." else named.split("/")
            if parts[: len(named_parts)] == named_parts:
                first = len(named_parts)
        for end in range(max(first, 0) + 1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            if any(_matches_entry(parts[end - 1], prefix, pattern) for pattern in patterns):
                return True
        return False

    def _matches(self, path: str, pattern: str) -> bool:
        relative = _relative_posix(path, self.root)
        parts = relative.split("/")
        if "/" not in pattern.rstrip("/"):
            name = pattern.rstrip("/")
            return any(fnmatch.fnmatchcase(part, name) for part in parts)
        pattern = pattern.lstrip("./").rstrip("/")
        return fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(relative, pattern + "/*")


def _matches_entry(name: str, relative: str, pattern: str) -> bool:
    """One file or directory against one exclude pattern: a bare name matches the entry's name, a
    pattern with a slash its path from the project root."""
    if "/" not in pattern.rstrip("/"):
        return fnmatch.fnmatchcase(name, pattern.rstrip("/"))
    pattern = pattern.rstrip("/")
    return fnmatch.fnmatchcase(relative, pattern[2:] if pattern.startswith("./") else pattern)


def _relative_posix(path: str, root: str) -> str:
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute, os.path.abspath(root))
    except ValueError:
        relative = absolute
    return relative.replace(os.sep, "/")


def validate_selectors(selectors: Iterable[str], where: str) -> tuple[str, ...]:
    selectors = list(selectors)
    if not selectors:
        return ()
    codes = list(all_rules())
    out = []
    for raw in selectors:
        selector = str(raw).strip().upper()
        if selector == "ALL" or any(code.startswith(selector) for code in codes) and selector.startswith("TL"):
            out.append(selector)
            continue
        hint = difflib.get_close_matches(selector, codes, n=1)
        suggestion = f" (did you mean {hint[0]}?)" if hint else ""
        raise ConfigError(f"{where}: unknown rule code or prefix '{raw}'{suggestion}")
    return tuple(out)


def select_rules(select: Sequence[str], extend_select: Sequence[str], ignore: Sequence[str]) -> list[type[Rule]]:
    """Rules chosen by code or prefix. A prefix picks the rules on by default; an exact code or ALL picks any."""
    rules = all_rules()

    def picks(selector: str, rule: type[Rule]) -> bool:
        if selector == "ALL" or selector == rule.code:
            return True
        return rule.code.startswith(selector) and rule.default_enabled

    base = select or [code for code, rule in rules.items() if rule.default_enabled]
    chosen = [
        rule
        for rule in rules.values()
        if any(picks(s, rule) for s in (*base, *extend_select))
        and not any(rule.code.startswith(i) or i == "ALL" for i in ignore)
    ]
    return chosen


def _tool_table(data: dict, where: str) -> dict:
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{where}: 'tool' must be a table")
    return tool


def find_config(start: str) -> Optional[Path]:
    """The nearest torchlint.toml, or pyproject.toml with a [tool.torchlint] table, from `start` upward."""
    here = Path(start).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "torchlint.toml"
        if candidate.is_file():
            return candidate
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{candidate}: cannot read: {exc}") from None
            if "torchlint" in _tool_table(data, str(candidate)):
                return candidate
    return None


# Rule selection may also sit in a `lint` sub-table, as ruff's `[tool.ruff.lint]` does.
_LINT_KEYS = ("select", "ignore", "extend-select", "per-file-ignores")


def _merge_lint_table(table: dict, where: str) -> dict:
    lint = table.get("lint")
    if lint is None:
        return table
    inner = f"{where[:-1]}.lint]" if where.endswith("]") else f"{where} [lint]"
    if not isinstance(lint, dict):
        raise ConfigError(f"{where}: 'lint' must be a table")
    merged = {k: v for k, v in table.items() if k != "lint"}
    for key, value in lint.items():
        if key not in _LINT_KEYS:
            if key in _KEYS:
                raise ConfigError(f"{inner}: '{key}' belongs in {where}, not in the lint table")
            hint = difflib.get_close_matches(key, _LINT_KEYS, n=1)
            raise ConfigError(f"{inner}: unknown key '{key}'" + (f" (did you mean '{hint[0]}'?)" if hint else ""))
        if key in merged:
            raise ConfigError(f"{where}: '{key}' is set both here and in {inner}; keep one")
        merged[key] = value
    return merged


def load_settings(path: Optional[Path]) -> Settings:
    if path is None:
        return Settings(root=os.getcwd())
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if path.name == "pyproject.toml":
        table = _tool_table(data, str(path)).get("torchlint", {})
        where = f"{path} [tool.torchlint]"
    else:
        table = _tool_table(data, str(path)).get("torchlint", data)
        where = str(path)
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    table = _merge_lint_table(table, where)
    for key, value in table.items():
        expected = _KEYS.get(key)
        if expected is None:
            hint = difflib.get_close_matches(key, list(_KEYS), n=1)
            suggestion = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise ConfigError(f"{where}: unknown key '{key}'{suggestion}")
        if expected is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{where}: '{key}' must be a number of seconds (0 for no limit)")
            continue
        if not isinstance(value, expected):
            raise ConfigError(f"{where}: '{key}' must be a {'list' if expected is list else expected.__name__}")
        if expected is list and not all(isinstance(item, str) for item in value):
            raise ConfigError(f"{where}: '{key}' must be a list of strings")
    per_file = []
    for pattern, codes in table.get("per-file-ignores", {}).items():
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ConfigError(f"{where}: per-file-ignores '{pattern}' must be a list of rule codes")
        per_file.append((pattern, validate_selectors(codes, f"{where} per-file-ignores")))
    return Settings(
        select=validate_selectors(table.get("select", []), f"{where} select"),
        ignore=validate_selectors(table.get("ignore", []), f"{where} ignore"),
        extend_select=validate_selectors(table.get("extend-select", []), f"{where} extend-select"),
        per_file_ignores=tuple(per_file),
        exclude=tuple(table.get("exclude", DEFAULT_EXCLUDE)),
        extend_exclude=tuple(table.get("extend-exclude", [])),
        fix=table.get("fix", False),
        unsafe_fixes=table.get("unsafe-fixes", False),
        file_time_limit=float(table.get("file-time-limit", DEFAULT_SECONDS)),
        root=str(path.parent),
        source=str(path),
    )
