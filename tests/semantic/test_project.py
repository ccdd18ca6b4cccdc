"""Whole-program analysis: names imported from the project's own files are judged by what those files define."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchlint.lint.api import lint_paths
from torchlint.semantic import project

UTILS = """
import torch
from torch.utils.data import Dataset

def accuracy(out, y):
    return (out.argmax(1) == y).float().mean().item()

def top1(out, y):
    return accuracy(out, y)  # the sync is one call further down

def count(out):
    return out.shape[0]

class Items(Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y
    def __len__(self):
        return len(self.x)
    def __getitem__(self, i):
        x, y = self.x[i], self.y[i]
        return x, y

class Images(Dataset):
    def __init__(self, paths):
        self.paths = paths
    def __getitem__(self, i):
        return torch.load(self.paths[i])
"""

TRAIN = """
import torch
from torch.utils.data import DataLoader
{imports}

def train(model, optimizer, x, y, paths, device):
    memory = DataLoader(Items(x, y), batch_size=32)
    disk = DataLoader(Images(paths), batch_size=32)
    for xb, yb in memory:
        xb, yb = xb.to(device), yb.to(device)
        out = model(xb)
        loss = torch.nn.functional.cross_entropy(out, yb)
        loss.backward()
        optimizer.step()
        acc = accuracy(out, yb)
        deep = top1(out, yb)
        n = count(out)
    for batch in disk:
        model(batch.to(device))
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _findings(paths: list[Path]) -> list[tuple[str, int, str]]:
    results = lint_paths([str(p) for p in paths], select=["TL101", "TL207"])
    assert all(r.error is None and not r.notes for r in results), [(r.path, r.error, r.notes) for r in results]
    return sorted((Path(r.path).name, f.line, f.code) for r in results for f in r.findings)


@pytest.mark.parametrize(
    "layout",
    [
        {"utils.py": UTILS, "train.py": TRAIN.format(imports="from utils import Items, Images, accuracy, top1, count")},
        {
            "pkg/__init__.py": "",
            "pkg/utils.py": UTILS,
            "pkg/train.py": TRAIN.format(imports="from .utils import Items, Images, accuracy, top1, count"),
        },
        {
            "src/lib/__init__.py": "",
            "src/lib/data/__init__.py": "",
            "src/lib/data/utils.py": UTILS,
            "src/lib/train.py": TRAIN.format(imports="from lib.data.utils import Items, Images, accuracy, top1, count"),
        },
    ],
    ids=["sibling", "relative", "package"],
)
def test_helpers_and_datasets_of_other_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: dict[str, str]) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, layout)
    train = next(tmp_path.glob("**/train.py"))
    # the in-memory dataset of utils.py: silent; the one reading files: reported; the helpers that sync
    # (directly or one call further down) are reported where the training loop calls them, not `count`
    assert _findings([train]) == [("train.py", 8, "TL101"), ("train.py", 15, "TL207"), ("train.py", 16, "TL207")]


def test_a_file_linted_alone_and_in_a_full_run_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"utils.py": UTILS, "train.py": TRAIN.format(imports="from utils import Items, Images, accuracy, top1, count")})
    alone = _findings([tmp_path / "train.py"])
    together = [f for f in _findings([tmp_path]) if f[0] == "train.py"]
    assert alone == together and alone


def test_names_that_are_not_project_code_resolve_to_nothing(tmp_path: Path) -> None:
    _write(tmp_path, {"train.py": "import torch\nfrom torch.utils.data import DataLoader\n"})
    assert project.module_file(str(tmp_path / "train.py"), 0, "torch.utils.data") is None
    assert project.module_file(str(tmp_path / "train.py"), 1, "missing") is None


def test_dependencies_follow_imports_transitively(tmp_path: Path) -> None:
    _write(tmp_path, {"a.py": "import b\n", "b.py": "from c import x\n", "c.py": "x = 1\n", "d.py": "y = 2\n"})
    found = project.dependencies(str(tmp_path / "a.py"), (tmp_path / "a.py").read_text())
    assert sorted(Path(p).name for p in found) == ["b.py", "c.py"]


def test_an_import_cycle_and_a_broken_module_are_harmless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(
        tmp_path,
        {
            "a.py": "from b import helper\ndef other(t):\n    return helper(t)\n",
            "b.py": "from a import other\ndef helper(t):\n    return other(t)\n",
            "bad.py": "def broken(:\n",
            "train.py": TRAIN.format(imports="from a import other as accuracy\nfrom bad import broken as top1\nItems = Images = count = None"),
        },
    )
    # no summary of a cycle or of a file that does not parse says "syncs": nothing reported for the helpers
    assert [f for f in _findings([tmp_path / "train.py"]) if f[2] == "TL207"] == []


def test_editing_a_helper_relints_its_importers_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchlint.config import Settings
    from torchlint.lint import runner
    from torchlint.lint.discovery import Discovered

    monkeypatch.chdir(tmp_path)
    _write(
        tmp_path,
        {
            "utils.py": UTILS,
            "train.py": TRAIN.format(imports="from utils import Items, Images, accuracy, top1, count"),
            "other.py": "import torch\n\ndef f(x):\n    return x.sum()\n",
        },
    )
    linted: list[str] = []
    real = runner.process_source
    monkeypatch.setattr(runner, "process_source", lambda source, job, **kw: linted.append(source.path) or real(source, job, **kw))
    items = [Discovered(str(tmp_path / n), n, True) for n in ("other.py", "train.py", "utils.py")]
    job = runner.Job(settings=Settings(select=["TL207"]))

    def check() -> dict[str, int]:
        linted.clear()
        return {r.path: len(r.findings) for r in runner.run(items, job, jobs=1, cache_root=str(tmp_path))}

    assert check() == {"other.py": 0, "train.py": 2, "utils.py": 0} and sorted(linted) == ["other.py", "train.py", "utils.py"]
    assert check() == {"other.py": 0, "train.py": 2, "utils.py": 0} and linted == []  # all from the cache
    (tmp_path / "utils.py").write_text(textwrap.dedent(UTILS).replace(".mean().item()", ".mean()"), encoding="utf-8")
    assert check() == {"other.py": 0, "train.py": 0, "utils.py": 0}  # train.py saw the helper change
    assert sorted(linted) == ["train.py", "utils.py"]  # other.py, which imports no project file, was not linted


def test_importers_and_the_call_sites_of_a_function_in_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/data.py": "def build(n):\n    return n\n\nclass Sampler:\n    def draw(self):\n        return 1\n",
            "direct.py": "from pkg.data import build, Sampler\nbuild(1)\nSampler().draw()\n",
            "module.py": "import pkg.data\nimport pkg.data as d\npkg.data.build(2)\nd.build(3)\n",
            "package.py": "from pkg import data\ndata.build(4)\n",
            "pkg/sibling.py": "from .data import build as make\nmake(5)\n",
            "unrelated.py": "def build(n):\n    return n\nbuild(6)\n",
            "venv/lib/vendored.py": "from pkg.data import build\nbuild(7)\n",  # not project code
        },
    )
    project.new_run()
    target = str(tmp_path / "pkg" / "data.py")
    assert sorted(Path(p).name for p in project.importers(target)) == ["direct.py", "module.py", "package.py", "sibling.py"]
    calls = project.call_sites(target, "build")
    assert sorted(site.call.args[0].value.value for site in calls) == ["1", "2", "3", "4", "5"]
    assert all(isinstance(site.summary, project.ModuleSummary) for site in calls)
    assert [Path(s.summary.path).name for s in project.call_sites(target, "Sampler")] == ["direct.py"]
    assert [Path(s.summary.path).name for s in project.method_call_sites(target, "draw")] == ["direct.py"]
    assert project.call_sites(str(tmp_path / "unrelated.py"), "build") == []


def test_a_project_too_large_to_scan_has_no_importer_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"a.py": "def f():\n    pass\n", "b.py": "from a import f\nf()\n", "c.py": "x = 1\n"})
    monkeypatch.setattr(project, "MAX_PROJECT_FILES", 2)
    project.new_run()
    assert project.importers(str(tmp_path / "a.py")) == []
    monkeypatch.setattr(project, "MAX_PROJECT_FILES", 3)
    project.new_run()
    assert [Path(p).name for p in project.importers(str(tmp_path / "a.py"))] == ["b.py"]


def test_a_large_project_still_finds_importers_beside_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a repository with many checkouts under it: each script folder is small, the whole is not
    (tmp_path / ".git").mkdir()
    _write(tmp_path, {"tool/agent.py": "class Agent:\n    def act(self, s):\n        return s\n",
                      "tool/main.py": "import agent\nagent.Agent().act(1)\n",
                      **{f"other/m{i}.py": "import agent\n" for i in range(4)}})
    monkeypatch.chdir(tmp_path / "tool")
    monkeypatch.setattr(project, "MAX_PROJECT_FILES", 3)
    project.new_run()
    assert [Path(p).name for p in project.importers(str(tmp_path / "tool" / "agent.py"))] == ["main.py"]


def test_editing_a_caller_relints_the_file_it_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchlint.config import Settings
    from torchlint.lint import runner
    from torchlint.lint.discovery import Discovered

    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"helpers.py": "def make(n):\n    return n\n", "main.py": "from helpers import make\nmake(1)\n",
                      "alone.py": "x = 1\n"})
    linted: list[str] = []
    real = runner.process_source
    monkeypatch.setattr(runner, "process_source", lambda source, job, **kw: linted.append(source.path) or real(source, job, **kw))
    items = [Discovered(str(tmp_path / n), n, True) for n in ("alone.py", "helpers.py", "main.py")]
    job = runner.Job(settings=Settings())

    def check() -> list[str]:
        linted.clear()
        list(runner.run(items, job, jobs=1, cache_root=str(tmp_path)))
        return sorted(linted)

    assert check() == ["alone.py", "helpers.py", "main.py"]
    assert check() == []
    (tmp_path / "main.py").write_text("from helpers import make\nmake(2)\nmake(3)\n", encoding="utf-8")
    assert check() == ["helpers.py", "main.py"]  # how helpers.py is called may change its findings


SYS_PATH_LAYOUT = {
    "tools/_init_paths.py": "import os.path as osp\nimport sys\nsys.path.insert(0, osp.join(osp.dirname(__file__), '..', 'lib'))\n",
    "tools/train.py": "import _init_paths\nfrom core.function import train\ntrain()\n",
    "lib/core/__init__.py": "",
    "lib/core/function.py": "def train():\n    pass\n",
}


def test_a_script_imports_from_a_folder_it_puts_on_sys_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, SYS_PATH_LAYOUT)
    found = project.module_file(str(tmp_path / "tools" / "train.py"), 0, "core.function")
    assert found == str((tmp_path / "lib" / "core" / "function.py").resolve())
    assert project.module_file(str(tmp_path / "tools" / "train.py"), 0, "numpy") is None


def test_a_module_two_folders_could_hold_resolves_to_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {**SYS_PATH_LAYOUT, "third_party/core/__init__.py": "", "third_party/core/function.py": ""})
    assert project.module_file(str(tmp_path / "tools" / "train.py"), 0, "core.function") is None


def test_a_large_marked_project_narrows_importers_to_the_linted_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a checkout inside a larger repository: the linted folder is the project its scripts import from
    (tmp_path / ".git").mkdir()
    _write(tmp_path, {**{f"repo/{name}": text for name, text in SYS_PATH_LAYOUT.items()},
                      **{f"other/m{i}.py": "x = 1\n" for i in range(4)}})
    monkeypatch.chdir(tmp_path / "repo")
    monkeypatch.setattr(project, "MAX_PROJECT_FILES", 5)
    project.new_run()
    importers = project.importers(str(tmp_path / "repo" / "lib" / "core" / "function.py"))
    assert [Path(p).name for p in importers] == ["train.py"]


def test_a_module_is_summarised_only_when_it_spells_a_word_as_a_name_would(tmp_path: Path) -> None:
    words = (".item()", "float(", "int(")
    printing = tmp_path / "printing.py"
    printing.write_text("def report(x):\n    print(x)\n")
    converting = tmp_path / "converting.py"
    converting.write_text("def report(x):\n    return int(x)\n")
    reading = tmp_path / "reading.py"
    reading.write_text("def report(x):\n    return x.item()\n")
    assert project.summary(str(printing), words) is None  # `int(` inside `print(` is no mention
    assert project.summary(str(converting), words) is not None
    assert project.summary(str(reading), words) is not None


def test_only_importers_whose_text_could_call_the_name_are_summarised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(
        tmp_path,
        {
            "data.py": "def build(n):\n    return n\n",
            "spaced.py": "from data import build\nx = (build)(1)\ny = build \\\n    (2)\nz = [build  # a comment\n     (3)]\n",
            "renamed.py": "from data import build as make\nmake(4)\n",
            "mentions.py": "from data import build\n# build is not called here\nhelpers = [build]\n",
        },
    )
    project.new_run()
    summarised: list[str] = []
    original = project._summarise
    monkeypatch.setattr(project, "_summarise", lambda path: summarised.append(Path(path).name) or original(path))
    calls = project.call_sites(str(tmp_path / "data.py"), "build")
    assert sorted(site.call.args[0].value.value for site in calls) == ["1", "2", "3", "4"]
    assert "mentions.py" not in summarised  # it names the function but never calls it: not parsed
