"""Extract the Python files of every benchmark repository at its pinned commit into corpus/.

Reads every ``repos*.csv`` next to this script and, for each repository fetched under the mirror
folder (``/work/.mirror/<owner>+<name>/repo``, bare or with a ``.git`` inside), writes its ``.py`` and
``.ipynb`` files at the pinned commit to ``corpus/<owner>__<name>/``. Repositories not fetched are
skipped with a one-line notice.

    python benchmarks/accuracy/materialise.py [--mirror DIR] [--corpus DIR] [--force]
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MIRROR = Path("/work/.mirror")
SOURCE_SUFFIXES = (".py", ".ipynb")
REPO_COLUMNS = ("repo", "commit", "split", "kind")


def read_repos(folder: Path) -> list[dict[str, str]]:
    """Every row of every repos*.csv in ``folder``; a malformed file stops with a one-line error."""
    rows: list[dict[str, str]] = []
    seen: dict[str, str] = {}
    for path in sorted(folder.glob("repos*.csv")):
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(line for line in handle if not line.startswith("#"))
            if tuple(reader.fieldnames or ()) != REPO_COLUMNS:
                raise SystemExit(f"{path}: error: header must be {','.join(REPO_COLUMNS)}")
            for number, row in enumerate(reader, start=2):
                repo, commit, split = row["repo"], row["commit"], row["split"]
                if "/" not in repo or len(commit) != 40 or split not in ("tune", "test"):
                    raise SystemExit(f"{path}:{number}: error: bad row {row}")
                if repo in seen:
                    raise SystemExit(f"{path}:{number}: error: {repo} already listed in {seen[repo]}")
                seen[repo] = path.name
                rows.append(row)
    return rows


def corpus_name(repo: str) -> str:
    return repo.replace("/", "__")


def git_dir(mirror: Path, repo: str) -> Path | None:
    """The mirror's git directory for ``repo``, or None when it was never fetched."""
    root = mirror / repo.replace("/", "+") / "repo"
    for candidate in (root / ".git", root):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def source_paths(gitdir: Path, commit: str) -> list[str]:
    listing = subprocess.run(
        ["git", f"--git-dir={gitdir}", "ls-tree", "-r", "-z", "--name-only", commit],
        check=True, capture_output=True,
    ).stdout.decode("utf-8", "surrogateescape")
    wanted = [path for path in listing.split("\0") if path.endswith(SOURCE_SUFFIXES)]
    return present(gitdir, commit, wanted)


def present(gitdir: Path, commit: str, paths: list[str]) -> list[str]:
    """The paths whose contents the mirror holds (a snapshot may list its largest files without them)."""
    if not paths:
        return []
    query = "".join(f"{commit}:{path}\n" for path in paths).encode("utf-8", "surrogateescape")
    answer = subprocess.run(
        ["git", f"--git-dir={gitdir}", "cat-file", "--batch-check"], input=query, check=True, capture_output=True,
    ).stdout.decode("utf-8", "surrogateescape").splitlines()
    kept = [path for path, line in zip(paths, answer) if not line.endswith(" missing")]
    for path in sorted(set(paths) - set(kept)):
        print(f"  skipped {path}: not in the mirror", file=sys.stderr)
    return kept


def extract(gitdir: Path, commit: str, target: Path) -> int:
    """Write the commit's source files under ``target``; returns how many."""
    paths = source_paths(gitdir, commit)
    if not paths:
        target.mkdir(parents=True, exist_ok=True)
        return 0
    archive = subprocess.run(
        ["git", f"--git-dir={gitdir}", "archive", "--format=tar", commit, "--", *paths],
        check=True, capture_output=True,
    ).stdout
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return len(paths)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR, help="folder of fetched mirrors")
    parser.add_argument("--corpus", type=Path, default=HERE / "corpus", help="output folder")
    parser.add_argument("--force", action="store_true", help="extract again even if present")
    args = parser.parse_args(argv)

    for row in read_repos(HERE):
        repo, commit = row["repo"], row["commit"]
        target = args.corpus / corpus_name(repo)
        if target.is_dir() and not args.force:
            continue
        gitdir = git_dir(args.mirror, repo)
        if gitdir is None:
            print(f"skipped {repo}: not fetched (fetch github:{repo} first)", file=sys.stderr)
            continue
        if target.exists():
            shutil.rmtree(target)
        try:
            count = extract(gitdir, commit, target)
        except subprocess.CalledProcessError as error:
            shutil.rmtree(target, ignore_errors=True)
            message = error.stderr.decode(errors="replace").strip().splitlines()
            print(f"skipped {repo}: git failed at {commit}: {message[-1] if message else error}",
                  file=sys.stderr)
            continue
        print(f"{repo}: {count} files at {commit[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
