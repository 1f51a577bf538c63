"""Writing a commit's tree to a folder: exactly the tree, and nothing from outside the clone.

Not ``git archive``: it applies the commit's own ``.gitattributes`` (``export-ignore`` drops
files, ``export-subst`` rewrites them), so a commit could change what gets built, and Python's
safe tar filter refuses a symlink to an absolute path or out of the tree with an exception.
Here every entry of ``git ls-tree -r`` is written as git would check it out: blobs with their
mode, symlinks as symlinks (whatever they point to: the build sees the tree as the commit has
it), and nothing is ever written through a symlink or outside the destination. Submodules are
exported at the commit their gitlink pins, from the clone's own submodule repositories, whose
names (from the commit's ``.gitmodules``) must stay inside ``.git/modules``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import git


class ExportError(Exception):
    """A commit's tree cannot be exported whole (a submodule commit the clone does not have)."""


def _safe_parts(path: str) -> list[str]:
    parts = path.split("/")
    if not path or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        raise ExportError(f"the tree holds a path git would refuse to check out: {path!r}")
    return parts


def _target(dest: Path, path: str) -> Path:
    """``dest/path``, refusing any parent that is a symlink (never write through one)."""
    parts = _safe_parts(path)
    parent = dest
    for p in parts[:-1]:
        parent = parent / p
        if parent.is_symlink():
            raise ExportError(f"{path!r} lies under a symlink in the tree: refused")
    return parent / parts[-1]


def tree_entries(repo: git.Repo, sha: str) -> list[tuple[str, str, str]]:
    """(mode, object, path) of every entry of the commit's tree, recursively, as git lists it."""
    out = repo.git.ls_tree("-r", "-z", "--full-tree", sha)
    entries = []
    for item in out.split("\0"):
        if not item:
            continue
        meta, _, path = item.partition("\t")
        mode, _kind, obj = meta.split()
        entries.append((mode, obj, path))
    return entries


def write_tree(repo: git.Repo, sha: str, dest: Path) -> list[tuple[str, str]]:
    """Write the tree's blobs and symlinks under ``dest``; returns its gitlinks (path, commit)."""
    dest.mkdir(parents=True, exist_ok=True)
    entries = tree_entries(repo, sha)
    blobs = [(m, o, p) for m, o, p in entries if m != "160000"]
    links = [(p, o) for m, o, p in entries if m == "160000"]
    for p, _ in links:
        _safe_parts(p)
    if not blobs:
        return links
    proc = subprocess.Popen(["git", "-C", str(repo.git_dir), "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    ok = False
    try:
        for mode, obj, path in blobs:
            proc.stdin.write(f"{obj}\n".encode())
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) != 3:
                raise ExportError(f"git could not read {path} ({obj[:12]}) of {sha[:12]}")
            data = proc.stdout.read(int(header[2]))
            proc.stdout.read(1)  # the newline after each object
            target = _target(dest, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            if mode == "120000":
                os.symlink(os.fsdecode(data), target)
            else:
                with open(target, "xb") as f:  # never follows or replaces an existing entry
                    f.write(data)
                os.chmod(target, 0o755 if mode == "100755" else 0o644)
        ok = True
    except OSError as e:  # a duplicate or malformed entry (git itself would refuse the tree)
        raise ExportError(f"{sha[:12]}'s tree cannot be written as git would check it out "
                          f"({e})") from None
    finally:
        if not ok:
            proc.kill()  # never wait on a git blocked writing to a pipe nobody reads
        with contextlib.suppress(OSError):
            proc.stdin.close()
        proc.wait()
    return links


def export_tree(repo: git.Repo, sha: str, dest: Path) -> None:
    """The commit's tree with every submodule at the commit it pins, recursively.

    PyTorch's ``third_party/`` is made of submodules, and each commit pins its own versions,
    so they are synced per commit from the clone's own submodule repositories, never from the
    network.
    """
    for path, sub_sha in write_tree(repo, sha, dest):
        sub = submodule_repo(repo, sha, path)
        fix = f"run `git -C {repo.working_dir} submodule update --init --recursive`"
        if sub is None:
            raise ExportError(f"submodule {path} is not initialised: {fix}")
        try:
            sub.git.cat_file("-e", f"{sub_sha}^{{commit}}")
        except git.GitCommandError:
            raise ExportError(f"submodule {path} at {sub_sha[:12]} is missing from the clone: "
                              f"{fix} (or fetch in {path})") from None
        target = _target(dest, path)
        if os.path.lexists(target):  # a blob or symlink by the same name: never write into it
            raise ExportError(f"{sha[:12]}'s tree has both a file and a submodule at {path}")
        export_tree(sub, sub_sha, target)


def gitlinks(repo: git.Repo, sha: str) -> list[tuple[str, str]]:
    """(path, pinned commit) of the submodules in ``sha``'s tree."""
    return [(p, o) for m, o, p in tree_entries(repo, sha) if m == "160000"]


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def submodule_repo(repo: git.Repo, sha: str, path: str) -> git.Repo | None:
    """The clone's repository of the submodule at ``path`` (named as ``sha``'s .gitmodules says).

    The name comes from the commit, so it is untrusted: a name that climbs out of
    ``.git/modules`` (``../../elsewhere``) is ignored, as git itself refuses it.
    """
    try:
        conf = repo.git.config("--blob", f"{sha}:.gitmodules", "--get-regexp", r"\.path$")
    except git.GitCommandError:
        conf = ""
    names = [ln.split(" ", 1)[0][len("submodule."):-len(".path")]
             for ln in conf.splitlines() if ln.split(" ", 1)[-1] == path]
    places: list[Path] = []
    work = Path(repo.working_tree_dir) if repo.working_tree_dir else None
    if work is not None and _inside(work / path, work):
        places.append(work / path / ".git")
    modules = Path(repo.git_dir) / "modules"
    places += [modules / n for n in names
               if n and ".." not in n.split("/") and not n.startswith("/")
               and _inside(modules / n, modules)]
    for place in places:
        if not place.exists():
            continue
        try:
            if place.name == ".git":  # a checked-out submodule
                return git.Repo(place.parent)
            sub = git.Repo(place)  # only its git dir: its core.worktree is relative to
            sub.git = git.Git(str(place))  # that dir, so run git inside it instead
            return sub
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            continue
    return None
