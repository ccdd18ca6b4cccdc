"""`torchlint optimize` through click's CliRunner: report and timing printed, errors are one line with exit 2."""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from torchlint.optimizer.command import optimize_command  # noqa: E402

FIXTURE = "fixtures/models/resnet.py:resnet18"


def _run(*args):
    return CliRunner().invoke(optimize_command, list(args))


def test_prints_report_and_timing():
    result = _run(FIXTURE, "--input-shape", "2,3,32,32", "--runs", "2", "--warmup", "1")
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("torchlint.optimize (eval, cpu")
    assert "fold_batchnorm" in out and "verified" in out
    assert "Timing: input 2x3x32x32 on cpu, median of 2 interleaved runs" in out
    assert "eager (no_grad)" in out and "torchlint" in out and "x\n" in out
    assert "max relative error" in out.splitlines()[-1]


def test_time_budget_flag_bounds_the_transform_and_the_report_says_what_was_left():
    result = _run(FIXTURE, "--input-shape", "2,3,32,32", "--runs", "1", "--warmup", "0", "--time-budget", "0.000001")
    assert result.exit_code == 0, result.output
    assert "note: time budget of 1e-06 s spent" in result.output
    assert "passes not tried (optimize(time_budget=...) gives more)" in result.output
    assert "time: capture" in result.output
    unbounded = _run(FIXTURE, "--input-shape", "2,3,32,32", "--runs", "1", "--warmup", "0", "--time-budget", "0")
    assert unbounded.exit_code == 0, unbounded.output
    assert "time budget" not in unbounded.output and "fold_batchnorm" in unbounded.output
    bad = _run(FIXTURE, "--input-shape", "2,3,32,32", "--time-budget", "-1")
    assert bad.exit_code == 2 and "--time-budget" in bad.output


def test_untraceable_model_and_autocast(tmp_path):
    result = _run("fixtures/models/branchy.py:branchy", "--input-shape", "2,3,16,16", "--runs", "1",
                  "--warmup", "0", "--autocast", "fp16")
    assert result.exit_code == 0, result.output
    assert "not traced" in result.output and "x.mean() > 0.5" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.py:build", "--input-shape", "1,3"], "no such file: missing.py"),
        (["fixtures/models/resnet.py:nope", "--input-shape", "1,3"], "has no 'nope'"),
        (["fixtures/models/resnet.py", "--input-shape", "1,3"], "expected FILE.py:FACTORY"),
        ([FIXTURE, "--input-shape", "16,three"], "bad --input-shape"),
        ([FIXTURE, "--input-shape", "0,3"], "bad --input-shape"),
        ([FIXTURE, "--input-shape", "2,5,16,16"], "the model fails on input 2x5x16x16"),
        (["fixtures/models/resnet.py:BasicBlock", "--input-shape", "1,3"], "failed: TypeError"),
        (["fixtures/models/vgg.py:CONFIG", "--input-shape", "1,3"], "is not callable"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(args, message):
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_factory_returning_something_else(tmp_path):
    path = tmp_path / "notamodel.py"
    path.write_text("def build():\n    return 42\n")
    result = _run(f"{path}:build", "--input-shape", "1")
    assert result.exit_code == 2 and "not a torch.nn.Module" in result.output


def test_module_imports_no_torch():
    code = "import sys, torchlint.optimizer.command; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
    code = "import sys, torchlint.optimizer; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
