"""The probed commit's tree for a command oracle: exported once per commit, a fresh copy per run.

A build's export is a scratch folder the build writes into (``build/``, ``*.egg-info``, the
compiled extension) and that is removed afterwards, and a probe served by a prebuilt or cached
wheel builds nothing at all, so a command oracle (``-- python test/test_x.py``) needs its own
tree. It is exported on demand into ``<cache>/trees/<sha>`` by the same exact export
(``artifacts/export.py``: the commit's git tree, symlinks kept, nothing from the working tree)
and kept for every later run of that commit, by this bisection or another. Its files are made
read-only, and each run gets a copy made of hard links (milliseconds, even for PyTorch's tens
of thousands of files), removed after the run: what one run writes, deletes or leaves behind
(``.pytest_cache``, output files) never reaches the next run's tree, and a write into a file of
the tree fails instead of changing the cached copy behind its hard link.

Submodule folders are left empty (as in a clone made without ``--recursive``): a command tests
the installed package, not the sources of ``third_party/``, and exporting those would cost
gigabytes per commit for PyTorch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import git

from bisector.artifacts.cache import scratch_dir
from bisector.artifacts.export import ExportError, write_tree
from bisector.base.paths import cache_dir

READY = ".bisector-tree"  # written last: a tree without it is half made (a kill -9)
_LOCK = threading.Lock()  # probes of one process exporting the same commit wait for one export


def trees_dir() -> Path:
    return cache_dir() / "trees"


class Trees:
    """The exported trees of one clone's commits, made on demand and kept in the cache."""

    def __init__(self, repo_path: str) -> None:
        self.repo_path = repo_path

    def __call__(self, sha: str) -> Path:
        """``sha``'s tree, exported once (ExportError when the clone cannot give it)."""
        final = trees_dir() / sha
        if (final / READY).exists():
            return final
        with _LOCK:
            if (final / READY).exists():
                return final
            tmp = scratch_dir("tree-export-")
            try:
                repo = git.Repo(self.repo_path)
                try:
                    for path, _commit in write_tree(repo, sha, tmp / "tree"):
                        _empty_folder(tmp / "tree", path)
                finally:
                    repo.close()
                _read_only(tmp / "tree")
                (tmp / "tree" / READY).write_text(sha + "\n")
                final.parent.mkdir(parents=True, exist_ok=True)
                if final.exists():  # half made by a killed process: replaced
                    shutil.rmtree(final, ignore_errors=True)
                try:
                    (tmp / "tree").rename(final)
                except OSError:  # another process published it first
                    if not (final / READY).exists():
                        raise
            except git.GitCommandError as e:
                raise ExportError(f"git could not list {sha[:12]}'s tree: "
                                  f"{(e.stderr or str(e)).strip()[:300]}") from None
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return final


def _empty_folder(root: Path, path: str) -> None:
    """A submodule's place as an empty folder, never made through a symlink of the tree."""
    target = root
    for part in path.split("/"):
        target = target / part
        if target.is_symlink():
            raise ExportError(f"submodule {path!r} lies under a symlink in the tree: refused")
        target.mkdir(exist_ok=True)


def _read_only(root: Path) -> None:
    """Files lose their write bits (folders keep theirs, so ``bisect gc`` can remove them)."""
    for folder, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(folder, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                os.chmod(p, stat.S_IMODE(st.st_mode) & ~0o222)


def _copy(src: str, dst: str) -> None:
    """A hard link; a real copy where the scratch folder is on another file system."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@contextlib.contextmanager
def run_tree(tree: Path | None) -> Iterator[Path]:
    """The folder one command run works in: a fresh copy of an exported tree, removed after
    the run; the current folder where there is no commit (``bisect check --env system`` or
    ``--wheel``: the command runs where it was typed)."""
    if tree is None:
        yield Path.cwd()
        return
    work = scratch_dir(f"tree-{tree.name[:10]}-")
    try:
        dest = work / "tree"
        shutil.copytree(tree, dest, symlinks=True, copy_function=_copy,
                        ignore=shutil.ignore_patterns(READY))
        yield dest
    finally:
        shutil.rmtree(work, ignore_errors=True)
