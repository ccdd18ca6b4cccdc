#!/usr/bin/env python3
"""Fuzz the linter: mutated fixture files, generated modules, notebooks and hostile inputs, each linted
and fixed; reports crashes, hangs, tracebacks, files changed wrongly and fixes that do not parse.

    python benchmarks/fuzz.py                 # default budget: writes benchmarks/results/fuzz.md
    python benchmarks/fuzz.py --per-class 50  # quicker

Every input runs in a child process (`--worker`) that reports each input before and after handling it,
so a native crash or a hang costs only that input, and is counted. The properties checked for each input:

* no exception escapes linting or fixing (a file that cannot be linted is a one-line error, not a traceback);
* a fix always parses (and, in a notebook, leaves every cell that parsed on its own still parsing);
* fixing the fixed text again changes nothing;
* nothing changes unless a fix was counted, and notebook cells no fix touched stay byte-identical in JSON.

A final class runs the command line (`check --fix --unsafe-fixes -j2`, twice) over trees of such files
with FIFOs, symbolic links and malformed notebooks among them.

The mutation and checking functions are imported by tests/test_fuzz.py, which drives them with
hypothesis on a small budget.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "lint"
RESULTS = ROOT / "benchmarks" / "results" / "fuzz.md"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

VALID_SNIPPETS = (
    "for batch in loader:\n    loss = model(batch)\n    print(loss.item())\n",
    "model.eval()\nout = model(x)\n",
    "with torch.no_grad():\n    y = model(x)\n",
    "loader = DataLoader(ds, batch_size=8)\n",
    "x = torch.zeros(3).cuda()\n",
    "torch.cuda.synchronize()\n",
    "import torch\n",
    "from torch.utils.data import DataLoader\n",
    "%matplotlib inline\n",
    "!nvidia-smi\n",
    "files = !ls \\\n    -la\n",
    "torch.zeros?\n",
    "x = 1  # noqa: TL101\n",
    "y = 2  # noqa: TL101 # type: ignore\n",
    "# torchlint: noqa\n",
    's = "# torchlint: noqa"\n',
    "f'{x!r:>{w}} # noqa: TL101'\n",
    'f"{d["k"]}"\n',
    "lambda: 0\n",
    "async def f():\n    await g()\n",
    "def evaluate(model, loader):\n    model.eval()\n    for x in loader:\n        model(x)\n",
    "class Net(torch.nn.Module):\n    def forward(self, x):\n        return x.cpu().numpy()\n",
    "print('%d' \n      % (1,))\n",
    "\u00e9 = '\u2014'\n",
    "\r\n",
    "x = [" + "[" * 30 + "]" * 30 + "]\n",
)
BREAKING_SNIPPETS = ("x = (\n", ")\n", "'''\n", '"', "\\\n", "\t", "    ")
SNIPPETS = VALID_SNIPPETS + BREAKING_SNIPPETS
# Valid in a .py file on every supported Python (no magics, no 3.12 f-strings).
PY_SNIPPETS = tuple(s for s in VALID_SNIPPETS if s[:1] not in "%!" and "!ls" not in s and "?" not in s and 'd["k"]' not in s)
MUTATIONS = ("delete", "duplicate", "swap", "insert", "truncate", "indent", "dedent", "char", "join", "crlf", "valid")
GENTLE = ("duplicate", "valid", "crlf")  # mutations that mostly keep the file valid Python


def corpus() -> list[str]:
    """The texts of every rule fixture (bad, good and fixed)."""
    texts = []
    for path in sorted(FIXTURES.glob("*/*.py")):
        texts.append(path.read_text(encoding="utf-8"))
    return texts


def mutate(text: str, steps: list[tuple[str, float, int]]) -> str:
    """Apply mutations: (kind, where as a fraction of the lines, a number choosing the payload)."""
    for kind, where, pick in steps:
        lines = text.splitlines(keepends=True) or [""]
        at = min(len(lines) - 1, int(where * len(lines)))
        if kind == "delete":
            del lines[at]
        elif kind == "duplicate":
            lines.insert(at, lines[at])
        elif kind == "swap" and len(lines) > 1:
            other = pick % len(lines)
            lines[at], lines[other] = lines[other], lines[at]
        elif kind == "insert":
            lines.insert(at, SNIPPETS[pick % len(SNIPPETS)])
        elif kind == "valid":
            indent = lines[at][: len(lines[at]) - len(lines[at].lstrip(" "))]
            snippet = VALID_SNIPPETS[pick % len(VALID_SNIPPETS)]
            lines.insert(at, "".join(indent + line for line in snippet.splitlines(keepends=True)))
        elif kind == "truncate":
            flat = "".join(lines)
            lines = [flat[: int(where * len(flat))]]
        elif kind == "indent":
            lines[at] = "    " + lines[at]
        elif kind == "dedent":
            lines[at] = lines[at].lstrip(" ")
        elif kind == "char":
            line = lines[at]
            col = pick % (len(line) + 1)
            lines[at] = line[:col] + "()[]{}:#'\"\\%!?=,. \t\n"[pick % 20] + line[col:]
        elif kind == "join" and at + 1 < len(lines):
            lines[at] = lines[at].rstrip("\r\n") + " " + lines.pop(at + 1)
        elif kind == "crlf":
            lines[at] = lines[at].replace("\n", "\r\n")
        text = "".join(lines)
    return text


def generated_module(picks: list[int], nest: list[int]) -> str:
    """A module of snippets, some of them nested in functions, loops and `with` blocks."""
    out = ["import torch\n"]
    for pick, depth in zip(picks, nest):
        snippet = PY_SNIPPETS[pick % len(PY_SNIPPETS)]
        indent = ""
        for level in range(depth % 4):
            header = ("def f():\n", "for x in loader:\n", "with torch.no_grad():\n")[(pick + level) % 3]
            out.append(indent + header)
            indent += "    "
        out.extend(indent + line for line in snippet.splitlines(keepends=True))
        if snippet and not snippet.endswith("\n"):
            out.append("\n")
    return "".join(out)


def notebook(text: str, style: int, magics: list[int]) -> bytes:
    """The text split into code cells at blank lines (with markdown between), written in one of several
    JSON styles, with magic lines put at the start of some cells."""
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()] or [""]
    cells = []
    for number, block in enumerate(blocks):
        source = block + "\n"
        if number < len(magics):
            source = ("%time\n", "!pip list\n", "files = !ls\n", "torch.zeros?\n", "")[magics[number] % 5] + source
        if number % 3 == 2:
            cells.append({"cell_type": "markdown", "metadata": {}, "source": ["# notes\n"]})
        as_string = style & 4
        cells.append(
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": source if as_string else source.splitlines(keepends=True),
            }
        )
    document = {"cells": cells, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    indent = (1, 2, 4, None)[style & 3]
    dumped = json.dumps(document, indent=indent, ensure_ascii=bool(style & 8))
    return (dumped + ("\n" if style & 16 else "")).encode("utf-8")


HOSTILE = (
    lambda n: ("x = " + "[" * n + "]" * n + "\n").encode(),
    lambda n: ("x = " + "(" * n + "1" + ")" * n + "\n").encode(),
    lambda n: ("x = " + " + ".join(["a"] * n) + "\n").encode(),
    lambda n: ("x = a" + ".b" * n + "\n").encode(),
    lambda n: ("x = " + "not " * n + "y\n").encode(),
    lambda n: ("x = " + "lambda: " * n + "0\n").encode(),
    lambda n: "".join(" " * i + "if x:\n" for i in range(min(n, 400))).encode() + b" " * min(n, 400) + b"pass\n",
    lambda n: f"# -*- coding: {('hex', 'base64', 'zlib', 'uu', 'rot13', 'punycode', 'unicode_escape', 'utf-16', 'idna', 'cp1252', 'bogus')[n % 11]} -*-\nimport torch\nx = torch.zeros(3).cuda()\n".encode(),
    lambda n: bytes((n * 7919 + i * 31) % 256 for i in range(n % 500 + 1)),
    lambda n: b"x = 1\n\x00",
    lambda n: ('{"cells": [' + ",".join(["5", "null", '{"cell_type": "code", "source": [1, 2]}'][: n % 3 + 1]) + "]}").encode(),
    lambda n: ("[" * (n * 50)).encode(),
    lambda n: ('{"cells": [], "n": ' + "9" * (n * 10 + 4400) + "}").encode(),
    lambda n: ("x = '" + "a" * (n * 1000) + "'\n").encode(),
)


def hostile(kind: int, size: int) -> tuple[str, bytes]:
    """A hostile input: (file name, bytes)."""
    kind %= len(HOSTILE)
    name = "hostile.ipynb" if kind in (10, 11, 12) else "hostile.py"
    return name, HOSTILE[kind](size)


# --- checking ------------------------------------------------------------------------------------------


def _job(fix: bool):
    from torchlint.config import Settings
    from torchlint.lint.runner import Job

    settings = Settings(select=("ALL",))
    return Job(settings=settings, fix=fix, unsafe_fixes=fix, diff=fix, use_cache=False)


def _decode(name: str, data: bytes):
    from torchlint.lint.source import decode_notebook, decode_python

    return decode_notebook(name, data) if name.endswith(".ipynb") else decode_python(name, data)


def _parses(source) -> bool:
    from torchlint.lint.engine import parse

    try:
        parse(source)
    except Exception:
        return False
    return True


def _cell_compiles(text: str) -> bool:
    from torchlint.lint.notebook import mask_magics

    try:
        compile(mask_magics(text), "<cell>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def examine(name: str, data: bytes, outcome: Optional[list] = None) -> list[str]:
    """Lint and fix one input in this process; the properties it breaks (empty: none). `outcome`, if
    given, receives what happened: "refused" (a one-line error), "clean" or "fixed"."""
    outcome = outcome if outcome is not None else []
    from torchlint.lint.runner import process_source
    from torchlint.lint.source import SourceError

    try:
        source = _decode(name, data)
    except SourceError:
        outcome.append("refused")
        return []
    except Exception as exc:  # noqa: BLE001 - the point is to catch anything
        return [f"traceback decoding: {type(exc).__name__}: {exc}"]
    problems: list[str] = []
    try:
        process_source(source, _job(False))
        result = process_source(source, _job(True))
    except Exception as exc:  # noqa: BLE001
        return [f"traceback: {type(exc).__name__}: {exc}"]
    if result.new_text is None:
        outcome.append("refused" if result.error else "clean")
        return problems
    outcome.append("fixed")
    if result.fixed == 0:
        problems.append("changed although no fix was counted")
    try:
        fixed = _decode(name, result.new_text)
    except Exception as exc:  # noqa: BLE001
        return problems + [f"fixed file does not decode: {exc}"]
    if not _parses(fixed):
        problems.append("fixed file does not parse")
    if fixed.is_notebook:
        problems.extend(_notebook_problems(source, fixed))
    try:
        again = process_source(fixed, _job(True))
    except Exception as exc:  # noqa: BLE001
        return problems + [f"traceback on second fix: {type(exc).__name__}: {exc}"]
    if again.new_text is not None and again.new_text != result.new_text:
        problems.append("fixing twice changes the file again")
    return problems


def _notebook_problems(before, after) -> list[str]:
    problems = []
    old = json.loads(before.raw_json)
    new = json.loads(after.to_bytes())
    if {k: v for k, v in old.items() if k != "cells"} != {k: v for k, v in new.items() if k != "cells"}:
        problems.append("notebook metadata changed")
    if len(old["cells"]) != len(new["cells"]):
        return problems + ["notebook cell count changed"]
    for index, (a, b) in enumerate(zip(old["cells"], new["cells"]), start=1):
        if a == b:
            continue
        if {k: v for k, v in a.items() if k != "source"} != {k: v for k, v in b.items() if k != "source"}:
            problems.append(f"cell {index}: more than its source changed")
        if type(a["source"]) is not type(b["source"]):
            problems.append(f"cell {index}: source changed type")
        old_text = "".join(a["source"]) if isinstance(a["source"], list) else a["source"]
        new_text = "".join(b["source"]) if isinstance(b["source"], list) else b["source"]
        if _cell_compiles(old_text) and not _cell_compiles(new_text):
            problems.append(f"cell {index}: parsed on its own before the fix, not after")
    return problems


# --- generating inputs ---------------------------------------------------------------------------------


def inputs(kind: str, count: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    texts = corpus()
    out = []
    for _ in range(count):
        if kind == "mutated":
            kinds = GENTLE if rng.random() < 0.6 else MUTATIONS
            steps = [(rng.choice(kinds), rng.random(), rng.randrange(1000)) for _ in range(rng.randrange(1, 6))]
            out.append(("mutated.py", mutate(rng.choice(texts), steps).encode("utf-8", "surrogatepass")))
        elif kind == "generated":
            n = rng.randrange(1, 25)
            picks = [rng.randrange(1000) for _ in range(n)]
            out.append(("generated.py", generated_module(picks, [rng.randrange(8) for _ in range(n)]).encode()))
        elif kind == "notebooks":
            text = rng.choice(texts)
            if rng.random() < 0.5:
                text = mutate(text, [(rng.choice(GENTLE), rng.random(), rng.randrange(1000))])
            magics = [rng.randrange(10) for _ in range(rng.randrange(4))]
            out.append(("nb.ipynb", notebook(text, rng.randrange(32), magics)))
        elif kind == "hostile":
            out.append(hostile(rng.randrange(len(HOSTILE)), rng.choice((1, 10, 100, 250, 1500, 3000, 6000))))
    return out


def worker(kind: str, count: int, seed: int, start: int) -> None:
    """Child process: examine inputs[start:], reporting each before and after (one JSON line each)."""
    from torchlint.lint.rule import all_rules

    all_rules()
    for index, (name, data) in enumerate(inputs(kind, count, seed)):
        if index < start:
            continue
        print(json.dumps({"start": index}), flush=True)
        outcome: list = []
        problems = examine(name, data, outcome)
        print(json.dumps({"done": index, "problems": problems, "outcome": outcome[0] if outcome else "?"}), flush=True)


def run_class(kind: str, count: int, seed: int, timeout: float) -> dict:
    """Run one class of inputs in child processes; a crash or a hang costs the input that caused it."""
    tally = {"inputs": count, "refused": 0, "clean": 0, "fixed": 0, "crashes": 0, "hangs": 0, "tracebacks": 0, "changed wrongly": 0, "fixes not parsing": 0,
             "not idempotent": 0, "examples": []}
    start = 0
    while start < count:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", kind, str(count), str(seed), str(start)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
        )
        lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=lambda: ([lines.put(l) for l in proc.stdout], lines.put(None)), daemon=True).start()
        current = start
        while True:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                proc.kill()
                tally["hangs"] += 1
                tally["examples"].append(f"{kind} #{current}: no answer in {timeout:.0f} s")
                start = current + 1
                break
            if line is None:
                proc.wait()
                if current < count and proc.returncode != 0:
                    tally["crashes"] += 1
                    tally["examples"].append(f"{kind} #{current}: process died ({proc.returncode})")
                    start = current + 1
                else:
                    start = count
                break
            message = json.loads(line)
            if "start" in message:
                current = message["start"]
                continue
            current = message["done"] + 1
            tally[message["outcome"]] = tally.get(message["outcome"], 0) + 1
            for problem in message["problems"]:
                key = (
                    "tracebacks" if "traceback" in problem
                    else "fixes not parsing" if "parse" in problem
                    else "not idempotent" if "twice" in problem
                    else "changed wrongly"
                )
                tally[key] += 1
                if len(tally["examples"]) < 20:
                    tally["examples"].append(f"{kind} #{message['done']} (seed {seed}): {problem}")
        proc.wait()
    return tally


def run_cli(trees: int, seed: int, timeout: float) -> dict:
    """The command line over whole trees, twice, with hostile files among the others."""
    rng = random.Random(seed)
    tally = {"inputs": 0, "refused": "", "clean": "", "fixed": "", "crashes": 0, "hangs": 0, "tracebacks": 0, "changed wrongly": 0, "fixes not parsing": 0,
             "not idempotent": 0, "examples": []}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for number in range(trees):
        with tempfile.TemporaryDirectory() as scratch:
            tree = Path(scratch)
            files = inputs("mutated", 12, rng.randrange(10**9)) + inputs("notebooks", 4, rng.randrange(10**9))
            files += inputs("hostile", 4, rng.randrange(10**9))
            for index, (name, data) in enumerate(files):
                (tree / f"f{index}_{name}").write_bytes(data)
            if hasattr(os, "mkfifo"):
                os.mkfifo(tree / "pipe.py")
            os.symlink("f0_mutated.py", tree / "link.py")
            tally["inputs"] += len(files) + 2
            outputs = []
            for attempt in range(2):
                try:
                    done = subprocess.run(
                        [sys.executable, "-m", "torchlint", "check", "--fix", "--unsafe-fixes", "--select", "ALL", "-j", "2", "."],
                        cwd=tree, env=env, capture_output=True, text=True, timeout=timeout,
                    )
                except subprocess.TimeoutExpired:
                    tally["hangs"] += 1
                    tally["examples"].append(f"cli tree {number}: no answer in {timeout:.0f} s")
                    break
                if done.returncode not in (0, 1):
                    tally["crashes"] += 1
                    tally["examples"].append(f"cli tree {number}: exit {done.returncode}: {done.stderr[-300:]}")
                if "Traceback" in done.stderr or "Traceback" in done.stdout:
                    tally["tracebacks"] += 1
                    tally["examples"].append(f"cli tree {number}: traceback: {done.stderr[-300:]}")
                outputs.append(done.stdout)
            if len(outputs) == 2 and "Fixed 0 problems" not in outputs[1] and "Fixed" in outputs[1]:
                tally["not idempotent"] += 1
                tally["examples"].append(f"cli tree {number}: the second --fix run fixed more: {outputs[1][-200:]}")
            if not (tree / "link.py").is_symlink():
                tally["changed wrongly"] += 1
                tally["examples"].append(f"cli tree {number}: the symbolic link was replaced by a file")
    return tally


def render(results: dict[str, dict], seconds: float, seed: int) -> str:
    columns = ["inputs", "refused", "clean", "fixed", "crashes", "hangs", "tracebacks", "changed wrongly", "fixes not parsing", "not idempotent"]
    lines = [
        "# Fuzzing the linter",
        "",
        f"`python benchmarks/fuzz.py` (seed {seed}), {time.strftime('%Y-%m-%d')}, {seconds:.0f} s on this machine. "
        "Each input is linted and then fixed (`--unsafe-fixes`, every rule selected) in a child process;",
        "a child that dies is a crash, one that does not answer within the time limit a hang. *refused*: a one-line",
        "error (syntax error, a limit passed, an unsupported encoding); *clean*: linted, nothing to fix; *fixed*: fixes",
        "were applied (and then checked: parse, cells, idempotence, nothing else changed).",
        "",
        "| class | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for kind, tally in results.items():
        lines.append(f"| {kind} | " + " | ".join(str(tally[c]) for c in columns) + " |")
    lines += [
        "",
        "Classes: *mutated* are rule fixtures with lines deleted, duplicated, swapped, joined, indented or cut and",
        "snippets (magics, noqa comments, open brackets, quotes, f-strings) inserted; *generated* are modules of",
        "snippets nested in functions, loops and `with` blocks; *notebooks* are fixtures split into cells, with",
        "magics, in every JSON style (indent 1/2/4/none, ASCII or not, string or list sources, with or without a",
        "final newline); *hostile* are deep brackets and blocks, long operator chains, odd coding cookies, random",
        "bytes, NUL bytes, malformed notebook JSON; *cli* runs `torchlint check --fix --unsafe-fixes -j2` twice",
        "over trees of such files with a FIFO and a symbolic link among them (inputs counts files).",
        "",
    ]
    examples = [e for tally in results.values() for e in tally["examples"]]
    if examples:
        lines += ["Problems found:", ""] + [f"- {e}" for e in examples] + [""]
    else:
        lines += ["No problem found.", ""]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=400, help="inputs per class (default 400)")
    parser.add_argument("--cli-trees", type=int, default=6, help="trees for the command-line class")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds an input may take")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--worker", nargs=4, metavar=("KIND", "COUNT", "SEED", "START"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        kind, count, seed, start = args.worker
        worker(kind, int(count), int(seed), int(start))
        return 0
    started = time.monotonic()
    results = {}
    for kind in ("mutated", "generated", "notebooks", "hostile"):
        results[kind] = run_class(kind, args.per_class, args.seed, args.timeout)
        print(kind, {k: v for k, v in results[kind].items() if k != "examples"}, flush=True)
    results["cli"] = run_cli(args.cli_trees, args.seed, args.timeout * 10)
    print("cli", {k: v for k, v in results["cli"].items() if k != "examples"}, flush=True)
    text = render(results, time.monotonic() - started, args.seed)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)
    counted = ("crashes", "hangs", "tracebacks", "changed wrongly", "fixes not parsing", "not idempotent")
    problems = sum(t[c] for t in results.values() for c in counted)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
