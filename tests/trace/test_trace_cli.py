"""`torchlint trace` end to end, as a separate process: the program's output, exit code and results are its own."""

from __future__ import annotations

import json
import sys

from trace_helpers import FIXTURES, ROOT, torchlint_cli


def test_stdout_and_exit_code_pass_through() -> None:
    result = torchlint_cli("trace", "--", "python", "fixtures/trace/exits.py", "3")
    assert result.returncode == 3
    assert result.stdout == "output of the program 2.0\n"  # the report is not mixed into it
    assert result.stderr.splitlines()[-1] == "Trace: nothing found."


def test_program_error_exits_one_with_its_own_traceback() -> None:
    result = torchlint_cli("trace", "--", "python", "fixtures/trace/exits.py", "raise")
    assert result.returncode == 1
    assert result.stdout == "output of the program 2.0\n"
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1].startswith('  File "fixtures/trace/exits.py", line 8')  # no frame of the trace above it
    assert "RuntimeError: the program's own error" in lines


def test_traced_run_computes_what_the_untraced_run_computes() -> None:
    import subprocess

    plain = subprocess.run([sys.executable, "fixtures/trace/train_syncs.py"], cwd=ROOT, capture_output=True,
                           text=True, env={"OMP_NUM_THREADS": "1", "PATH": ""}, timeout=300)
    traced = torchlint_cli("trace", "--steps", "0", "--", "python", "fixtures/trace/train_syncs.py")
    assert plain.returncode == traced.returncode == 0
    assert plain.stdout == traced.stdout and "loss " in plain.stdout
    assert "TL201 [confirmed]" in traced.stderr


def test_json_report_to_a_file(tmp_path) -> None:
    out = tmp_path / "trace.json"
    result = torchlint_cli("trace", "--steps", "5", "--output-format", "json", "-o", str(out), "--",
                           sys.executable, "fixtures/trace/train_syncs.py")
    assert result.returncode == 0 and result.stderr == ""
    report = json.loads(out.read_text())
    assert report["steps"]["steps"] == 5 and report["stopped_after_steps"] == 5
    by_line = {(f["location"]["row"], f["code"]): f for f in report["findings"]}
    item = by_line[(27, "TL201")]
    assert (item["status"], item["count"], item["per_step"]) == ("confirmed", 5, 1.0)
    assert item["filename"] == str(FIXTURES / "train_syncs.py") and item["url"].endswith("TL201.md")
    assert by_line[(31, "TL206")]["status"] == "miss"
    assert report["dataloaders"][0]["num_workers"] == 0


def test_sarif_report_and_module_form(tmp_path) -> None:
    out = tmp_path / "trace.sarif"
    result = torchlint_cli("trace", "--output-format", "sarif", "-o", str(out), "--", "python", "-m", "evaluate",
                           cwd=FIXTURES)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("correct ")
    document = json.loads(out.read_text())
    assert document["version"] == "2.1.0"
    results = document["runs"][0]["results"]
    assert sorted((r["ruleId"], r["properties"]["status"]) for r in results) == [
        ("TL301", "confirmed"), ("TL401", "confirmed")]
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "evaluate.py"


def test_bad_command_is_one_line_exit_two() -> None:
    result = torchlint_cli("trace", "--", "python", "no_such_script.py")
    assert result.returncode == 2
    assert result.stderr == "torchlint trace: no_such_script.py: no such file\n"
    result = torchlint_cli("trace", "--", "python", "-c", "print(1)")
    assert result.returncode == 2 and "unsupported python option -c" in result.stderr


def test_without_torch_trace_says_so_and_check_still_works() -> None:
    block_torch = "import sys; sys.modules['torch'] = None; sys.argv = ['torchlint', *sys.argv[1:]]; "
    code = block_torch + "from torchlint.cli import main; main()"
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *args: subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env,  # noqa: E731
                                       capture_output=True, text=True, timeout=120)
    traced = run("trace", "--", "python", "fixtures/trace/exits.py")
    assert traced.returncode == 2
    assert traced.stderr == "torchlint trace: torch is not installed (pip install torch)\n"
    checked = run("check", "--no-cache", "fixtures/trace/evaluate.py")
    assert checked.returncode == 1 and "TL301" in checked.stdout
