"""benchmarks/trace_overhead.py runs end to end and writes its table (one repetition; no timing is checked)."""

from __future__ import annotations

import os
import subprocess
import sys

from trace_helpers import ROOT


def test_benchmark_writes_its_table(tmp_path) -> None:
    out = tmp_path / "trace-overhead.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "benchmarks/trace_overhead.py", "--reps", "1", "--output", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert text.strip() == result.stdout.strip()  # printed and written alike
    rows = [line for line in text.splitlines() if line.startswith("| ") and ".py" in line]
    assert [row.split(" | ")[0][2:] for row in rows] == ["train_syncs.py", "evaluate.py", "clean.py", "convnet.py"]
    # the TL206 mask is the one sync line no enabled rule reports; the helper's read is one finding, at its call
    assert rows[0].endswith("| 4/5 | 48/60 |")
    assert "found 4 of the 5 lines" in text
