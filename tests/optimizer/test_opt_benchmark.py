"""The optimize benchmark script runs end to end on a small model and writes its Markdown table."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_benchmark_quick_run(tmp_path):
    output = tmp_path / "table.md"
    subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "optimize.py"), "--models", "mlp", "--batches", "2",
         "--runs", "1", "--skip-compile", "--threads", "1", "--output", str(output)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    text = output.read_text()
    assert "MALLOC_TRIM_THRESHOLD_=68719476736" in text  # re-executed with the tuned allocator
    assert "| mlp | 2 |" in text and "torchlint fp32" in text and "jit freeze+ofi" in text
