"""Writing a commit's tree to a folder: exactly the tree, and nothing from outside the clone.

Not ``git archive``: it applies the commit's own ``.gitattributes`` (``export-ignore`` drops
files, ``export-subst`` rewrites them), so a commit could change what gets built, and Python's
safe tar filter refuses a symlink to an absolute path or out of the tree with an exception.
Here every entry of ``git ls-tree -r`` is written as git would check it out: blobs with their
mode, symlinks as symlinks (whatever they point to: the build sees the tree as the commit has
it), and nothing is ever written through a symlink or outside the destination. Submodules are
exported at the commit their gitlink pins, from the clone's own submodule repositories, whose
names (from the commit's ``.gitmodules``) must stay inside ``.git/modules``; one the clone has
not initialised is an empty directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import git


class ExportError(Exception):
    """A commit's tree cannot be exported (a submodule commit the clone does not have)."""


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


def verified_tree(repo: git.Repo, sha: str) -> str:
    """The tree id written in commit ``sha``'s own object, checked by hashing that object.

    A replace ref (``git replace``) makes git hand back another commit's object under ``sha``:
    its tree would be built and cached as ``sha``'s. bisector runs git with replacements off
    (``GIT_NO_REPLACE_OBJECTS``, set in ``bisector/__init__``); this check holds even where
    something forgot that, for the price of one ``cat-file``.
    """
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha):
        sha = str(repo.git.rev_parse("--verify", f"{sha}^{{commit}}"))
    done = subprocess.run(["git", "-C", str(repo.git_dir), "cat-file", "commit", sha],
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise ExportError(f"git could not read commit {sha[:12]}: "
                          f"{done.stderr.decode(errors='replace').strip()[:300]}")
    body = done.stdout
    algo = hashlib.sha256 if len(sha) == 64 else hashlib.sha1
    if algo(b"commit %d\0" % len(body) + body).hexdigest() != sha.lower():
        raise ExportError(f"git gave another object for commit {sha[:12]} (a replace ref, "
                          f"refs/replace/*?): refused; remove it with git replace -d")
    first = body.split(b"\n", 1)[0].split()
    if len(first) != 2 or first[0] != b"tree":
        raise ExportError(f"commit {sha[:12]} names no tree: refused")
    return first[1].decode()


def tree_entries(repo: git.Repo, sha: str) -> list[tuple[str, str, str]]:
    """(mode, object, path) of every entry of the commit's tree, recursively, as git lists it:
    the tree the commit's own object names (:func:`verified_tree`), never a replacement."""
    out = repo.git.ls_tree("-r", "-z", "--full-tree", verified_tree(repo, sha))
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


def export_tree(repo: git.Repo, sha: str, dest: Path) -> list[tuple[str, str]]:
    """The commit's tree with every submodule the clone has at the commit it pins, recursively.

    PyTorch's ``third_party/`` is made of submodules, and each commit pins its own versions,
    so they are synced per commit from the clone's own submodule repositories, never from the
    network. A submodule the clone never initialised (test data nobody builds from, say) is
    left as an empty directory, as a checkout without it has it: whether the build needs it is
    for the build to say. Returns those as (path, top-level submodule whose ``update --init``
    brings it), so a build that then fails can name them; an initialised submodule that lacks
    its pinned commit is still an error (the clone is stale: fetching fixes it).
    """
    skipped: list[tuple[str, str]] = []
    for path, sub_sha in write_tree(repo, sha, dest):
        target = _target(dest, path)
        if os.path.lexists(target):  # a blob or symlink by the same name: never write into it
            raise ExportError(f"{sha[:12]}'s tree has both a file and a submodule at {path}")
        sub = submodule_repo(repo, sha, path)
        if sub is None:
            target.mkdir(parents=True)
            skipped.append((path, path))
            continue
        try:
            sub.git.cat_file("-e", f"{sub_sha}^{{commit}}")
        except git.GitCommandError:
            raise ExportError(
                f"submodule {path} at {sub_sha[:12]} is missing from the clone: run `git -C "
                f"{repo.working_dir} submodule update --init --recursive` (or fetch in {path})"
            ) from None
        skipped += [(f"{path}/{p}", path) for p, _ in export_tree(sub, sub_sha, target)]
    return skipped


def uninitialised_hint(clone: str, skipped: list[tuple[str, str]]) -> str:
    """One line naming the submodules the export left empty and the command that fetches them
    (nested ones through their top-level submodule with ``--recursive``; more than three
    top-level ones, as in a PyTorch clone made without ``--recursive``: all of them)."""
    paths = [p for p, _ in skipped]
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    tops = list(dict.fromkeys(top for _, top in skipped))
    nested = any(p != top for p, top in skipped)
    fix = f"git -C {shlex.quote(clone)} submodule update --init"
    if len(tops) > 3:
        fix += " --recursive"
    else:
        fix += " --recursive" * nested + "".join(f" {shlex.quote(t)}" for t in tops)
    if len(paths) == 1:
        return f"submodule {shown} is not initialised in the clone: run `{fix}`"
    return f"submodules {shown} are not initialised in the clone: run `{fix}`"


@dataclass(frozen=True)
class LeftEmpty:
    """Submodules the export left empty (the clone never fetched them): the line naming them
    with the command that fetches them, and the names a build log would show if it needed
    them (each path and its last part: ``third_party/pybind11`` and ``pybind11``)."""

    hint: str
    names: tuple[str, ...]

    @classmethod
    def of(cls, clone: str, skipped: list[tuple[str, str]]) -> LeftEmpty:
        paths = {p for pair in skipped for p in pair}
        names = paths | {Path(p).name for p in paths if len(Path(p).name) >= 3}
        return cls(uninitialised_hint(clone, skipped), tuple(sorted(names)))

    def named_in(self, log: str) -> bool:
        """Whether the failed build's log names one of them: only then is the failure put
        down to them. A log that never does is said with its own error first (a CMake 4
        policy error was once reported as a nested submodule the build never used)."""
        return any(name in log for name in self.names)



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
