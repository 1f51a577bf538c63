"""Builds that ask git: the build folder is a throwaway, detached worktree of the user's clone.

Projects that take their version from git (setuptools_scm, hatch-vcs, versioneer, a setup.py
that runs ``git describe``) cannot build from a bare export: there is no repository to ask
(``LookupError: setuptools-scm was unable to detect version``), and before this every probe of
such a project was recorded as a broken build. A variable such as
``SETUPTOOLS_SCM_PRETEND_VERSION`` serves setuptools_scm and hatch-vcs only, not versioneer or
a hand-written ``git describe``, so the general answer is a real checkout:

- the build folder is added as a detached worktree of the clone with ``--no-checkout``: it
  shares the clone's objects and refs (tags included, so ``git describe`` counts from the right
  tag), and the user's working tree, index, HEAD and branches are never touched; no hook runs;
- its files are still written by :func:`bisector.artifacts.export.export_tree`, exactly as for
  every other build (git's own checkout would apply the commit's ``.gitattributes`` filters,
  LFS fetches included, and the clone's sparse-checkout settings);
- its index is then read from the commit and refreshed, so git sees a clean checkout (no
  ``-dirty``, no ``.dYYYYMMDD`` in the version);
- afterwards it is unregistered (``git worktree remove --force``, then ``git worktree prune``),
  also when the build fails or is interrupted. A registration left by a ``kill -9`` goes with
  the next build's prune, once the scratch sweep has removed its folder.

The worktree's ``.git`` file names the clone's ``.git/worktrees/<name>`` by its absolute path;
a build in a container needs that path too (:func:`container_git_mounts`: read-only, and only
what git needs, never the clone's own config).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import git


class WorktreeError(Exception):
    """The build folder could not be made a worktree of the clone (the clone's state)."""


def _git(cwd: Path | str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                         check=False, stdin=subprocess.DEVNULL)
    if check and res.returncode != 0:
        why = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise WorktreeError(f"`git {' '.join(args[:2])}` failed in {cwd}: {why}")
    return res


def _clone_dir(repo: git.Repo) -> str:
    return str(repo.working_tree_dir or repo.git_dir)


@contextlib.contextmanager
def detached_worktree(repo: git.Repo, sha: str, dest: Path) -> Iterator[None]:
    """``dest`` (empty or absent) registered as a detached worktree of ``repo`` at ``sha``, with
    no files checked out: the caller writes them, then calls :func:`read_index`."""
    clone = _clone_dir(repo)
    try:
        _git(clone, "worktree", "add", "--no-checkout", "--detach", str(dest), sha)
    except WorktreeError as e:
        raise WorktreeError(f"the build folder could not be made a worktree of the clone "
                            f"({e})") from None
    try:
        yield
    finally:
        _git(clone, "worktree", "remove", "--force", str(dest), check=False)
        shutil.rmtree(dest, ignore_errors=True)  # what remove left (a file it could not delete)
        _git(clone, "worktree", "prune", check=False)


def read_index(dest: Path, sha: str) -> None:
    """Fill the worktree's index from ``sha`` and stat the exported files, so that ``git
    status`` and ``git describe --dirty`` see the exported tree as a clean checkout."""
    _git(dest, "read-tree", sha)
    _git(dest, "update-index", "-q", "--refresh", check=False)  # non-zero only if dirty


def _worktree_gitdir(src: Path) -> Path | None:
    """The ``.git/worktrees/<name>`` that ``src``'s ``.git`` file names, if it has one.

    ``src/.git`` is written by ``git worktree add`` (a commit's tree can never hold a ``.git``
    entry: the export refuses it), so the path is the clone's, not the repository's say.
    """
    dot_git = src / ".git"
    if not dot_git.is_file() or dot_git.is_symlink():
        return None
    text = dot_git.read_text(errors="replace").strip()
    return Path(text[len("gitdir: "):]) if text.startswith("gitdir: ") else None


# What git reads of the common directory to describe a commit and list its files.
_SHARED = ("objects", "refs", "packed-refs", "reftable", "shallow")


def container_git_mounts(src: Path, scratch: Path) -> list[tuple[Path, Path]]:
    """(host path, same path in the container) for a build of ``src`` in a container.

    The worktree's ``.git`` file names its admin directory by its absolute path, so git in the
    container needs that path. Only what git needs is given (the admin directory, objects,
    refs and a config with nothing but the repository format and extensions, written under
    ``scratch``): the clone's own config may hold credentials in remote URLs, which the
    commit's build code has no business reading. Object directories named in
    ``objects/info/alternates`` (a clone made with ``--reference`` or ``--shared``) are given
    too, else git would miss their objects.
    """
    gitdir = _worktree_gitdir(src)
    if gitdir is None:
        return []
    commondir = gitdir / "commondir"
    common = (gitdir / commondir.read_text().strip()).resolve() if commondir.is_file() \
        else gitdir
    mounts = [(gitdir, gitdir)]
    mounts += [(common / n, common / n) for n in _SHARED if (common / n).exists()]
    alternates = common / "objects" / "info" / "alternates"  # `clone --reference`, `--shared`
    if alternates.is_file():
        for line in alternates.read_text(errors="replace").splitlines():
            if line.strip() and not line.startswith("#"):
                other = (common / "objects" / line.strip()).resolve()
                mounts.append((other, other))
    keep = _git(common, "config", "--file", "config", "--get-regexp",
                r"^(core\.repositoryformatversion|extensions\..*)$", check=False).stdout
    sections: dict[str, list[str]] = {"core": [], "extensions": []}
    for key, _, value in (ln.partition(" ") for ln in keep.splitlines()):
        section, _, name = key.partition(".")
        sections[section].append(f"\t{name} = {value}\n")
    config = scratch / "git-config"
    config.write_text("".join(f"[{sec}]\n{''.join(body)}" for sec, body in sections.items()
                              if body))
    return [*mounts, (config, common / "config")]
