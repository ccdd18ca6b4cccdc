"""Programs of one shape written many ways: the findings must not depend on how a user spells it.

A `Shape` is a small project (file name -> template) with `$slot` placeholders and `# expect: CODE`
markers on the lines that must be reported. Each slot has alternatives that keep the program's meaning
(a name from a neutral pool, a loop header, where a batch or a model comes from, a helper in another
file). A slot alone on a line takes a block and is indented to that line; slot values may use other slots.
`render` picks one alternative per slot; `check` lints the rendered project and returns what differs from
the markers. Every combination of a shape is one program a real user could have written."""

from __future__ import annotations

import itertools
import random
import re
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

_MARKER = re.compile(r"#\s*expect:\s*(TL\d{3})")
_ALONE = re.compile(r"^(\s*)\$(\w+)\s*$")


@dataclass(frozen=True)
class Shape:
    name: str
    files: dict[str, str]
    slots: dict[str, tuple[str, ...]] = field(default_factory=dict)
    select: tuple[str, ...] = ()

    def size(self) -> int:
        total = 1
        for options in self.slots.values():
            total *= len(options)
        return total

    def choices(self, limit: int, seed: int = 0) -> list[dict[str, int]]:
        """Every combination when there are at most `limit`, else `limit` drawn at random (fixed seed),
        the first one always the base (every slot's first alternative)."""
        names = sorted(self.slots)
        if self.size() <= limit:
            return [
                dict(zip(names, pick))
                for pick in itertools.product(
                    *(range(len(self.slots[n])) for n in names)
                )
            ]
        rng = random.Random(f"{self.name}:{seed}")
        picks = [{n: 0 for n in names}]
        picks += [
            {n: rng.randrange(len(self.slots[n])) for n in names}
            for _ in range(limit - 1)
        ]
        return picks


def _fill(text: str, values: dict[str, str]) -> str:
    out = []
    for line in text.splitlines():
        alone = _ALONE.match(line)
        if alone and alone.group(2) in values:
            block = textwrap.dedent(values[alone.group(2)]).strip("\n")
            out.append(textwrap.indent(block, alone.group(1)) if block else "")
        else:
            out.append(Template(line).safe_substitute(values))
    return "\n".join(out) + "\n"


def render(shape: Shape, choice: dict[str, int]) -> dict[str, str]:
    """File name -> program text for one alternative per slot (slots inside slot values are filled too)."""
    values = {name: shape.slots[name][index] for name, index in choice.items()}
    rendered = {}
    for name, template in shape.files.items():
        text = textwrap.dedent(template)
        for _ in range(4):
            filled = _fill(text, values)
            if filled == text:
                break
            text = filled
        assert "$" not in re.sub(r"#.*", "", text), f"unfilled slot in {name}:\n{text}"
        rendered[name] = text
    return rendered


def expected(files: dict[str, str]) -> set[tuple[str, int, str]]:
    return {
        (name, number, m.group(1))
        for name, text in files.items()
        for number, line in enumerate(text.splitlines(), 1)
        for m in _MARKER.finditer(line)
    }


def findings(
    files: dict[str, str], select: tuple[str, ...]
) -> set[tuple[str, int, str]]:
    from torchlint.lint.api import lint_paths

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        results = lint_paths([str(root / name) for name in files], select=list(select))
        errors = [(r.path, r.error) for r in results if r.error]
        assert not errors, errors
        return {
            (str(Path(r.path).relative_to(root)), f.line, f.code)
            for r in results
            for f in r.findings
        }


def check(shape: Shape, choice: dict[str, int]) -> str | None:
    """None when the findings are exactly the markers; else a report of the program and what differs."""
    files = render(shape, choice)
    want, got = expected(files), findings(files, shape.select)
    if want == got:
        return None
    listing = "\n".join(f"--- {name}\n{text}" for name, text in files.items())
    return f"{shape.name} {choice}: missed {sorted(want - got)}, extra {sorted(got - want)}\n{listing}"


def differing(shape: Shape, limit: int) -> str | None:
    """None when every variant of `shape` (at most `limit`) gives exactly its markers; else how many differ and
    the first one's report."""
    choices = shape.choices(limit=limit)
    failures = [report for choice in choices if (report := check(shape, choice))]
    return f"{len(failures)} of {len(choices)} variants differ; first:\n{failures[0]}" if failures else None
