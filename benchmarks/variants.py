"""How many spellings of each shape the rules get right: every `Shape` of tests/generalisation, up to
`--limit` combinations each (all of them when fewer), printed per shape and per test module.

    python benchmarks/variants.py [--limit 200]
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.generalisation.variants import check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=200)
    args = parser.parse_args()
    for path in sorted((ROOT / "tests" / "generalisation").glob("test_variants_*.py")):
        module = importlib.import_module(f"tests.generalisation.{path.stem}")
        right = total = 0
        for shape in module.SHAPES:
            choices = shape.choices(args.limit)
            ok = sum(check(shape, c) is None for c in choices)
            right, total = right + ok, total + len(choices)
            print(
                f"  {shape.name:<40} {ok:>4}/{len(choices):<4} of {shape.size()} spellings"
            )
        print(f"{path.stem}: {right}/{total} ({right / max(total, 1):.0%})")


if __name__ == "__main__":
    main()
