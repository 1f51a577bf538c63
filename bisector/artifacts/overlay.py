"""Python-only overlays: a prebuilt wheel with another commit's Python files laid over it.

Between two adjacent PyTorch nightlies most commits change only ``torch/**/*.py``. For such a
commit C and a prebuilt wheel W built from B, installing W and replacing the Python files that
differ between B and C gives C's behaviour in seconds instead of an hour of compiling. The
profile says which paths are safe; anything else (C++, codegen inputs, build files, a Triton pin
bump) makes C ineligible and it is built from source instead.

Two checks exist on purpose. :class:`ChangeIndex` walks the candidate list once (one
``git diff-tree --stdin``) and answers "is every step between positions i and j safe" in O(1),
which the search uses to rank probes and ``bisect plan`` uses to project costs; it is
conservative (a change and its revert count as a change). :func:`check` is the exact
``git diff B C`` used when an overlay is actually made.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from bisector.artifacts.cache import artifact_key, publish, scratch_dir
from bisector.project.profiles import Profile, path_matches

MANIFEST = "overlay.json"


def path_problem(path: str, profile: Profile) -> str | None:
    """Why a changed path rules out an overlay, or None when the overlay can carry it."""
    if path in profile.triton_pins:
        return f"the Triton pin changes ({path}): needs the Triton of that commit"
    if path_matches(path, profile.overlay_generated):
        return None  # the wheel's own generated file is kept
    if path_matches(path, profile.overlay_unsafe) or not path_matches(path, profile.overlay_safe):
        return f"{path} changes and is not Python-only: needs a source build"
    return None


@dataclass
class ChangeIndex:
    """Per step of the candidate list, the first path that forces a rebuild (if any)."""

    blockers: list[str | None]  # blockers[i]: what changes from candidates[i-1] to [i]
    prefix: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        acc, self.prefix = 0, [0]
        for b in self.blockers:
            acc += b is not None
            self.prefix.append(acc)

    def blocker_between(self, a: int, b: int) -> str | None:
        """The first blocking change between positions a and b (either order), or None."""
        lo, hi = min(a, b), max(a, b)
        if self.prefix[hi + 1] - self.prefix[lo + 1] == 0:
            return None
        for i in range(lo + 1, hi + 1):
            if self.blockers[i] is not None:
                return self.blockers[i]
        return None

    @classmethod
    def build(cls, repo: git.Repo, candidates: list[str], profile: Profile) -> ChangeIndex:
        # diff-tree --stdin takes "<commit> <parent>" lines and prints, per line, the commit
        # id (always, with --always) followed by the changed paths.
        pairs = "".join(f"{b} {a}\n" for a, b in itertools.pairwise(candidates))
        out = subprocess.run(
            ["git", "-C", str(repo.git_dir), "diff-tree", "--stdin", "-r", "--no-renames",
             "--name-only", "--always"],
            input=pairs, capture_output=True, text=True, check=True,
        ).stdout
        blockers: list[str | None] = [None]
        current: str | None = None
        headers = 0
        for line in out.splitlines():
            if headers < len(candidates) - 1 and line == candidates[headers + 1]:
                if headers:
                    blockers.append(current)
                headers, current = headers + 1, None
                continue
            if line and current is None:
                current = path_problem(line, profile)
        if headers:
            blockers.append(current)
        return cls(blockers[: len(candidates)])


@dataclass(frozen=True)
class OverlayCheck:
    ok: bool
    reason: str
    changed: tuple[str, ...] = ()  # installed paths to take from the target commit
    deleted: tuple[str, ...] = ()  # installed paths the target commit no longer has


def check(repo: git.Repo, base: str, target: str, profile: Profile) -> OverlayCheck:
    """The exact rule: every path that differs between ``base`` and ``target`` is safe."""
    out = repo.git.diff("--name-status", "--no-renames", base, target)
    changed: list[str] = []
    deleted: list[str] = []
    for line in out.splitlines():
        status, _, path = line.partition("\t")
        problem = path_problem(path, profile)
        if problem:
            return OverlayCheck(False, problem)
        if path_matches(path, profile.overlay_generated):
            continue
        if not path_matches(path, profile.overlay_install):
            continue
        (deleted if status.startswith("D") else changed).append(path)
    return OverlayCheck(True, f"{len(changed)} files laid over, {len(deleted)} removed",
                        tuple(changed), tuple(deleted))


def overlay_key(base_key: str, target: str, profile: Profile) -> str:
    return artifact_key("overlay", target, {"base": base_key, "profile": profile.name})


def make_overlay(
    repo: git.Repo, base_key: str, base_commit: str, target: str, result: OverlayCheck,
    profile: Profile,
) -> Path:
    """Write the overlay (target's changed files + manifest) into the artifact cache."""
    key = overlay_key(base_key, target, profile)
    work = scratch_dir(f"overlay-{target[:10]}-")
    try:
        files = work / "files"
        files.mkdir()
        tree = repo.commit(target).tree
        for path in result.changed:
            dest = files / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(tree[path].data_stream.read())  # exact bytes, no newline stripping
        manifest = {
            "commit": target, "base_commit": base_commit, "base_key": base_key,
            "changed": list(result.changed), "deleted": list(result.deleted),
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        return publish(work, key)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def apply_overlay(overlay_dir: Path, site_packages: Path) -> dict[str, object]:
    """Lay an overlay into an installed environment; returns what was done, for the facts."""
    manifest = json.loads((overlay_dir / MANIFEST).read_text())
    for path in [*manifest["changed"], *manifest["deleted"]]:
        parts = str(path).split("/")
        if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"refusing overlay path {path!r}: it would leave site-packages")
    for path in manifest["changed"]:
        dest = site_packages / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        shutil.copyfile(overlay_dir / "files" / path, dest)
        _drop_bytecode(dest)
    for path in manifest["deleted"]:
        dest = site_packages / path
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        _drop_bytecode(dest)
    return overlay_summary(manifest)


def overlay_summary(manifest: dict[str, Any]) -> dict[str, object]:
    """What a verdict's facts record of an overlay: the target commit, its base, the changes."""
    return {"commit": manifest["commit"], "base_commit": manifest["base_commit"],
            "changed": len(manifest["changed"]), "deleted": manifest["deleted"]}


def _drop_bytecode(py: Path) -> None:
    cache = py.parent / "__pycache__"
    if cache.is_dir():
        for pyc in cache.glob(f"{py.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)
