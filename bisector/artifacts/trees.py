"""The probed commit's tree for a command oracle: exported once per commit, a private copy per run.

A build's export is a scratch folder the build writes into (``build/``, ``*.egg-info``, the
compiled extension) and that is removed afterwards, and a probe served by a prebuilt or cached
wheel builds nothing at all, so a command oracle (``-- python test/test_x.py``) needs its own
tree. It is exported on demand into ``<cache>/trees/<sha>`` by the same exact export
(``artifacts/export.py``: the commit's git tree, symlinks kept, nothing from the working tree)
and kept for every later run of that commit, by this bisection or another. Its files are made
read-only.

Each run (a command oracle, a ``--manual`` shell) works in a private copy, removed after the
run: copy-on-write clones where the file system has them (``cp --reflink=auto``: btrfs, XFS,
APFS-like clones; a real copy elsewhere, a second or so for PyTorch's tree), never hard links.
A hard link shares the cached file itself: a probe that appends to a tracked file (as root,
or after a ``chmod``) would change the cache, and the next verdict of that commit with it.
The copy's files are writable, as in a checkout; what one run writes, deletes or leaves behind
(``.pytest_cache``, output files, an edited source) never reaches the cache or the next run.

Submodule folders are left empty (as in a clone made without ``--recursive``): a command tests
the installed package, not the sources of ``third_party/``, and exporting those would cost
gigabytes per commit for PyTorch.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import subprocess
import sys
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


def private_copy(tree: Path, dest: Path) -> None:
    """``tree`` copied to ``dest`` (which must not exist) with no file shared with it: clones
    where the file system makes them (copy-on-write, instant), real copies elsewhere; symlinks
    copied as links; files made writable for their owner (the copy is the run's own)."""
    cp = shutil.which("cp")
    done = False
    if cp and sys.platform.startswith("linux"):  # GNU cp: clones, else copy_file_range
        dest.mkdir(parents=True)
        r = subprocess.run([cp, "-a", "--reflink=auto", "--", f"{tree}/.", str(dest)],
                           capture_output=True, text=True, check=False)
        done = r.returncode == 0
        if not done:
            shutil.rmtree(dest, ignore_errors=True)
    if not done:
        shutil.copytree(tree, dest, symlinks=True, copy_function=_clone)
    (dest / READY).unlink(missing_ok=True)
    for folder, _dirs, files in os.walk(dest):
        for name in files:
            p = os.path.join(folder, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                os.chmod(p, stat.S_IMODE(st.st_mode) | stat.S_IWUSR)


def _clone(src: str, dst: str) -> None:
    """One file: a copy-on-write clone (FICLONE) where the file system has it, else a copy."""
    if _FICLONE is not None:
        try:
            with open(src, "rb") as s, open(dst, "wb") as d:
                fcntl.ioctl(d.fileno(), _FICLONE, s.fileno())
            shutil.copystat(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


# Linux's FICLONE ioctl number (_IOW(0x94, 9, int)); None elsewhere.
_FICLONE: int | None = 0x40049409 if sys.platform.startswith("linux") else None


@contextlib.contextmanager
def run_tree(tree: Path | None) -> Iterator[Path]:
    """The folder one command run works in: a private copy of an exported tree, removed
    after the run; the current folder where there is no commit (``bisect check --env system``
    or ``--wheel``: the command runs where it was typed)."""
    if tree is None:
        yield Path.cwd()
        return
    work = scratch_dir(f"tree-{tree.name[:10]}-")
    try:
        dest = work / "tree"
        private_copy(tree, dest)
        yield dest
    finally:
        shutil.rmtree(work, ignore_errors=True)
