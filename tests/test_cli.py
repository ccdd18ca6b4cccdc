"""`torchlint check` end to end, through click's runner and the installed console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lint_testing import CLEAN, LOADER_ZERO, write
from torchlint.cli import cli


def test_clean_project_exits_zero(runner, project: Path) -> None:
    write(project / "a.py", CLEAN)
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 0, result.output
    assert "All checks passed!" in result.output


def test_findings_exit_one_with_location_and_summary(runner, project: Path) -> None:
    write(project / "pkg" / "train.py", LOADER_ZERO)
    result = runner.invoke(cli, ["check", "--output-format", "concise", "pkg"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith("pkg/train.py:3:10: TL101 DataLoader ")
    assert lines[-1] == "Found 1 problem (1 more with --unsafe-fixes)."


def test_exit_zero_quiet_and_statistics(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO + LOADER_ZERO.splitlines()[-1] + "\n")
    result = runner.invoke(cli, ["check", "--exit-zero", "-q", "--output-format", "concise"])
    assert result.exit_code == 0
    assert len(result.output.splitlines()) == 2 and "Found" not in result.output
    result = runner.invoke(cli, ["check", "--statistics"])
    assert result.output.splitlines()[0].split("\t") == ["2", "TL101", "[ ] dataloader-num-workers-zero"]


def test_select_ignore_and_extend_select(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    assert runner.invoke(cli, ["check", "--ignore", "TL101"]).exit_code == 0
    assert runner.invoke(cli, ["check", "--ignore", "TL1"]).exit_code == 0
    assert runner.invoke(cli, ["check", "--select", "TL0"]).exit_code == 0
    assert runner.invoke(cli, ["check", "--select", "TL0", "--extend-select", "TL101"]).exit_code == 1
    bad = runner.invoke(cli, ["check", "--select", "TL9999"])
    assert bad.exit_code == 2 and "unknown rule code or prefix 'TL9999'" in bad.output


def test_fix_diff_and_idempotency(runner, project: Path) -> None:
    target = write(project / "a.py", LOADER_ZERO)
    diff = runner.invoke(cli, ["check", "--diff", "--unsafe-fixes", "--no-cache"])
    assert diff.exit_code == 1
    assert "+loader = DataLoader(ds, batch_size=8, num_workers=min(8, os.cpu_count() or 1))" in diff.output
    assert target.read_text() == LOADER_ZERO  # --diff writes nothing
    safe_only = runner.invoke(cli, ["check", "--fix", "--no-cache"])
    assert safe_only.exit_code == 1 and target.read_text() == LOADER_ZERO  # the fix is unsafe
    fixed = runner.invoke(cli, ["check", "--fix", "--unsafe-fixes", "--no-cache"])
    assert fixed.exit_code == 0, fixed.output
    assert "Fixed 1 problem" in fixed.output
    after = target.read_text()
    assert "import os" in after
    again = runner.invoke(cli, ["check", "--fix", "--unsafe-fixes", "--no-cache"])
    assert again.exit_code == 0 and target.read_text() == after
    assert runner.invoke(cli, ["check", "--diff", "--unsafe-fixes"]).exit_code == 0


def test_fix_keeps_encoding_and_mode(runner, project: Path) -> None:
    text = "# -*- coding: latin-1 -*-\n# café\n" + LOADER_ZERO
    target = write(project / "a.py", text.encode("latin-1"))
    target.chmod(0o750)
    assert runner.invoke(cli, ["check", "--fix", "--unsafe-fixes"]).exit_code == 0
    data = target.read_bytes()
    assert "# café".encode("latin-1") in data and b"num_workers=min(8" in data
    assert target.stat().st_mode & 0o777 == 0o750


def test_config_file_is_used_and_cli_overrides(runner, project: Path) -> None:
    write(project / "pyproject.toml", '[tool.torchlint]\nignore = ["TL101"]\n')
    write(project / "a.py", LOADER_ZERO)
    assert runner.invoke(cli, ["check"]).exit_code == 0
    assert runner.invoke(cli, ["check", "--select", "TL101"]).exit_code == 1


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ('[tool.torchlint]\nselct = ["TL1"]\n', "unknown key 'selct' (did you mean 'select'?)"),
        ('[tool.torchlint]\nselect = ["TL777"]\n', "unknown rule code or prefix 'TL777'"),
        ('[tool.torchlint]\nselect = "TL1"\n', "'select' must be a list"),
        ('[tool.torchlint]\nper-file-ignores = {"tests/*" = ["XX1"]}\n', "unknown rule code or prefix 'XX1'"),
        ("[tool.torchlint\n", "cannot read"),
    ],
)
def test_bad_config_is_a_clear_usage_error(runner, project: Path, config: str, message: str) -> None:
    write(project / "pyproject.toml", config)
    write(project / "a.py", CLEAN)
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_per_file_ignores_and_excludes(runner, project: Path) -> None:
    write(
        project / "torchlint.toml",
        'per-file-ignores = {"tests/*" = ["TL101"]}\nextend-exclude = ["generated"]\n',
    )
    write(project / "tests" / "test_a.py", LOADER_ZERO)
    write(project / "generated" / "b.py", LOADER_ZERO)
    write(project / "build" / "c.py", LOADER_ZERO)  # excluded by default
    assert runner.invoke(cli, ["check"]).exit_code == 0
    write(project / "src" / "d.py", LOADER_ZERO)
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 1 and "src/d.py" in result.output and "generated" not in result.output


def test_gitignore_is_respected(runner, project: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    write(project / ".gitignore", "ignored/\n")
    write(project / "ignored" / "a.py", LOADER_ZERO)
    write(project / "kept.py", CLEAN)
    assert runner.invoke(cli, ["check"]).exit_code == 0
    write(project / "kept.py", LOADER_ZERO)
    assert runner.invoke(cli, ["check"]).exit_code == 1


def test_notebook_is_linted_with_cells(runner, project: Path) -> None:
    notebook = {
        "cells": [
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": ["import torch\n"]},
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": LOADER_ZERO.splitlines(keepends=True)},
            # a notebook that never uses an accelerator is a CPU program: TL101 stays silent there
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": ["model = model.cuda()\n"]},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    write(project / "nb.ipynb", json.dumps(notebook))
    result = runner.invoke(cli, ["check", "--output-format", "concise"])
    assert result.exit_code == 1
    assert result.output.startswith("nb.ipynb:cell 2:3:10: TL101")
    data = json.loads(runner.invoke(cli, ["check", "--output-format", "json"]).stdout)
    assert data[0]["cell"] == 2 and data[0]["location"] == {"row": 3, "column": 10}


def test_cache_is_filled_and_reused(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    first = runner.invoke(cli, ["check"])
    assert (project / ".torchlint_cache").is_dir()
    assert runner.invoke(cli, ["check"]).output == first.output
    write(project / "a.py", CLEAN)
    assert runner.invoke(cli, ["check"]).exit_code == 0


def test_pool_gives_the_same_results_as_one_process(runner, project: Path) -> None:
    for i in range(12):
        write(project / f"m{i}.py", LOADER_ZERO if i % 3 == 0 else CLEAN)
    serial = runner.invoke(cli, ["check", "--no-cache", "-j", "1", "--output-format", "concise"])
    pooled = runner.invoke(cli, ["check", "--no-cache", "-j", "2", "--output-format", "concise"])
    assert serial.output == pooled.output and serial.exit_code == pooled.exit_code == 1
    assert serial.output.count("TL101") == 4


def test_add_noqa_then_clean(runner, project: Path) -> None:
    target = write(project / "a.py", LOADER_ZERO + 'x = DataLoader(\n    ds,\n)\ns = """\nDataLoader(ds)\n"""\n')
    result = runner.invoke(cli, ["check", "--add-noqa", "--no-cache"])
    assert result.exit_code == 0 and "Added 2 noqa directives" in result.output
    assert "loader = DataLoader(ds, batch_size=8)  # noqa: TL101\n" in target.read_text()
    assert "x = DataLoader(  # noqa: TL101\n" in target.read_text()
    assert runner.invoke(cli, ["check", "--no-cache"]).exit_code == 0


def test_stdin(runner, project: Path) -> None:
    result = runner.invoke(cli, ["check", "--stdin-filename", "x.py", "--output-format", "concise"], input=LOADER_ZERO)
    assert result.exit_code == 1 and result.output.startswith("x.py:3:10: TL101")
    fixed = runner.invoke(cli, ["check", "--stdin-filename", "x.py", "--fix", "--unsafe-fixes"], input=LOADER_ZERO)
    assert "num_workers=min(8" in fixed.output and fixed.exit_code == 0


def test_rules_and_rule_commands(runner) -> None:
    listing = runner.invoke(cli, ["rules"])
    assert listing.exit_code == 0 and "TL101" in listing.output and "Data loading" in listing.output
    data = json.loads(runner.invoke(cli, ["rules", "--output-format", "json"]).output)
    assert {"code", "name", "family", "summary", "fix"} <= set(data[0])
    page = runner.invoke(cli, ["rule", "tl101"])
    assert page.exit_code == 0 and page.output.startswith("# TL101: dataloader-num-workers-zero")
    missing = runner.invoke(cli, ["rule", "TL555"])
    assert missing.exit_code == 2 and "unknown rule 'TL555'" in missing.output


def test_console_script_in_subprocess(project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    exe = shutil.which("torchlint")
    command = [exe] if exe else [sys.executable, "-m", "torchlint"]
    proc = subprocess.run([*command, "check", "--no-cache", "--output-format", "concise"], capture_output=True, text=True, cwd=project)
    assert proc.returncode == 1 and "a.py:3:10: TL101" in proc.stdout
    module = subprocess.run([sys.executable, "-m", "torchlint", "--version"], capture_output=True, text=True)
    assert module.returncode == 0 and "torchlint" in module.stdout


def test_import_and_lint_without_torch(project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    code = (
        "import sys; sys.modules['torch'] = None\n"  # any import of torch now fails
        "import torchlint\n"
        "from torchlint.cli import main\n"
        "sys.argv = ['torchlint', 'check', '--no-cache', '.']\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project)
    assert proc.returncode == 1, proc.stderr
    assert "TL101" in proc.stdout


def test_progress_bar_only_for_long_runs(monkeypatch, capsys) -> None:
    from torchlint import cli as cli_module

    clock = iter([0.0, 0.5, 3.0, 3.5, 4.0])
    monkeypatch.setattr(cli_module.time, "monotonic", lambda: next(clock))
    progress = cli_module._Progress(enabled=True)  # started at t=0
    progress(1, 16)  # t=0.5: too early to show anything
    assert capsys.readouterr().err == ""
    progress(8, 16)  # t=3.0: a long run, shown
    assert "8/16 files" in capsys.readouterr().err
    progress(16, 16)
    progress.close()
    assert "16/16 files" in capsys.readouterr().err
    silent = cli_module._Progress(enabled=False)
    silent(16, 16)
    assert capsys.readouterr().err == ""


def test_unchanged_tree_loads_no_rule(project: Path) -> None:
    for i in range(6):
        write(project / f"m{i}.py", LOADER_ZERO)
    code = (
        "import sys\n"
        "from torchlint.cli import main\n"
        "sys.argv = ['torchlint', 'check', '-q', '-j', '2', '.']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED' if any(m.startswith(('libcst', 'torchlint.rules')) for m in sys.modules) else 'LEAN')\n"
    )
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project)
    assert first.stdout.strip().endswith("LOADED")  # the cold run lints
    assert second.stdout.strip().endswith("LEAN"), second.stdout  # the warm run only reads the cache
    assert first.stdout.count("TL101") == second.stdout.count("TL101") == 6


@pytest.mark.parametrize("excluded", ["build", "venv", "dist", ".venv/lib/site-packages"])
def test_directory_named_below_a_default_exclude_is_linted(runner, project: Path, excluded: str) -> None:
    write(project / excluded / "proj" / "train.py", LOADER_ZERO)
    write(project / excluded / "proj" / "build" / "gen.py", LOADER_ZERO)  # excluded below the named path
    result = runner.invoke(cli, ["check", "--no-cache", "--output-format", "concise", f"{excluded}/proj"])
    assert result.exit_code == 1, result.output
    assert f"{excluded}/proj/train.py:3:10: TL101" in result.output
    assert "gen.py" not in result.output
    listed = runner.invoke(cli, ["check", "--show-files", f"{excluded}/proj"])
    assert listed.output.splitlines() == [f"{excluded}/proj/train.py"]
    # The project's own run still skips it.
    assert runner.invoke(cli, ["check", "--no-cache"]).exit_code == 0


def test_add_noqa_drops_unused_codes_and_leaves_a_clean_tree(runner, project: Path) -> None:
    target = write(
        project / "a.py",
        "import torch\n\n"
        "for batch in loader:\n"
        "    z = torch.zeros(10).cuda()  # noqa: TL101\n"  # TL101 silences nothing here; TL601 is reported
        "    w = torch.zeros(10).cuda()  # noqa: TL101, TL601\n"
        "    u = 1  # noqa: TL101, E501\n",
    )
    result = runner.invoke(cli, ["check", "--add-noqa", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert target.read_text() == (
        "import torch\n\n"
        "for batch in loader:\n"
        "    z = torch.zeros(10).cuda()  # noqa: TL601\n"
        "    w = torch.zeros(10).cuda()  # noqa: TL601\n"
        "    u = 1  # noqa: E501\n"
    )
    assert runner.invoke(cli, ["check", "--no-cache"]).exit_code == 0
    again = runner.invoke(cli, ["check", "--add-noqa", "--no-cache"])
    assert "Added 0 noqa directives" in again.output


def test_stdin_fix_writes_source_to_stdout_and_findings_to_stderr(runner, project: Path) -> None:
    source = LOADER_ZERO + "import torch\nfor batch in loader:\n    x = torch.zeros(3).cuda()\n"
    result = runner.invoke(cli, ["check", "--stdin-filename", "x.py", "--fix", "--output-format", "concise"], input=source)
    assert result.exit_code == 1  # TL101's fix is unsafe: it remains
    assert result.stdout == source.replace("torch.zeros(3).cuda()", 'torch.zeros(3, device="cuda")')
    assert result.stderr.splitlines() == [
        result.stderr.splitlines()[0],
        "Fixed 1 problem (1 remaining).",
    ]
    assert result.stderr.startswith("x.py:3:10: TL101 ")


def test_config_error_is_one_line_without_usage(runner, project: Path) -> None:
    write(project / "pyproject.toml", '[tool.torchlint]\nselct = ["TL1"]\n')
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"torchlint: error: {project / 'pyproject.toml'} [tool.torchlint]: unknown key 'selct' (did you mean 'select'?)"
    ]
    assert result.stdout == ""
    bad_select = runner.invoke(cli, ["check", "--select", "TL9999"])
    assert bad_select.exit_code == 2 and len(bad_select.output.splitlines()) == 1 and "Usage" not in bad_select.output


def test_ruff_style_lint_table(runner, project: Path) -> None:
    write(project / "a.py", LOADER_ZERO)
    write(project / "pyproject.toml", '[tool.torchlint]\nextend-exclude = ["gen"]\n\n[tool.torchlint.lint]\nignore = ["TL101"]\n')
    assert runner.invoke(cli, ["check", "--no-cache"]).exit_code == 0
    write(project / "pyproject.toml", '[tool.torchlint.lint]\nextend-select = ["TL307"]\nselect = ["TL1"]\n')
    assert runner.invoke(cli, ["check", "--no-cache"]).exit_code == 1
    write(project / "pyproject.toml", '[tool.torchlint.lint]\nexclude = ["gen"]\n')
    misplaced = runner.invoke(cli, ["check", "--no-cache"])
    assert misplaced.exit_code == 2
    assert "[tool.torchlint.lint]: 'exclude' belongs in " in misplaced.output and "[tool.torchlint], not in the lint table" in misplaced.output
    write(project / "pyproject.toml", '[tool.torchlint]\nignore = ["TL1"]\n[tool.torchlint.lint]\nignore = ["TL101"]\n')
    both = runner.invoke(cli, ["check", "--no-cache"])
    assert both.exit_code == 2 and "'ignore' is set both here and in" in both.output
    write(project / "torchlint.toml", '[lint]\nignore = ["TL101"]\n')
    assert runner.invoke(cli, ["check", "--no-cache"]).exit_code == 0


def test_rule_by_name(runner) -> None:
    by_name = runner.invoke(cli, ["rule", "dataloader-num-workers-zero"])
    assert by_name.exit_code == 0 and by_name.output == runner.invoke(cli, ["rule", "TL101"]).output


def test_fix_summary_counts_findings_the_fixes_bring_out(runner, project: Path) -> None:
    # Moving the loader's workers out of the main process (TL101's fix) is what makes TL104 apply.
    source = (
        "import torch\n"
        "import torch.nn as nn\n"
        "from torch.utils.data import DataLoader\n\n"
        'DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        "train_loader = DataLoader(dataset, batch_size=32)\n"
        "net = nn.Sequential(nn.Linear(10, 10))\n"
        "for epoch in range(10):\n"
        "    for inputs, targets in train_loader:\n"
        "        loss = criterion(net(inputs), targets)\n"
        "        loss.backward()\n"
    )
    target = write(project / "a.py", source)
    before = runner.invoke(cli, ["check", "--no-cache", "--unsafe-fixes", "--extend-select", "TL104", "--output-format", "concise"])
    assert [line.split(": ")[1].split()[0] for line in before.stdout.splitlines()[:-1]] == ["TL101"]
    fixed = runner.invoke(cli, ["check", "--no-cache", "--fix", "--unsafe-fixes", "--extend-select", "TL104"])
    assert "persistent_workers=True" in target.read_text()
    assert fixed.stdout.splitlines()[-1] == "Fixed 1 problem; 1 found by the fixes and fixed too (0 remaining)."


def test_add_noqa_leaves_syntax_errors_alone(runner, project: Path) -> None:
    target = write(project / "a.py", "x = (\n")
    result = runner.invoke(cli, ["check", "--add-noqa", "--no-cache"])
    assert "Added 0 noqa directives" in result.output and target.read_text() == "x = (\n"


def test_diff_and_show_files_escape_file_names(runner, project: Path) -> None:
    write(project / "a\x1b[2Jb.py", LOADER_ZERO)
    diff = runner.invoke(cli, ["check", "--no-cache", "--diff", "--unsafe-fixes"]).output
    assert "\x1b" not in diff and "--- a/a\\x1b[2Jb.py" in diff
    assert runner.invoke(cli, ["check", "--show-files"]).output == "a\\x1b[2Jb.py\n"
