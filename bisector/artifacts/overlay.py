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

The base's generated version file is the one file an overlay rewrites rather than keeps: the
wheel's ``torch/version.py`` names the base's commit, so an overlay that kept it would report
the base (``torch.version.git_version``, the facts, the issue's Versions block) while running
the probed commit's code. :func:`truthful_version` writes what the probed commit's own build
would have written (its sha in ``git_version``, and in a ``+git<sha>`` local version part), and
the facts name the base separately (:func:`overlay_facts`).
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from bisector.artifacts import pure
from bisector.artifacts.cache import artifact_key, publish, scratch_dir
from bisector.artifacts.installable import Installable
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
        # id (always, with --always) followed by "<status>\t<path>" lines.
        pairs = "".join(f"{b} {a}\n" for a, b in itertools.pairwise(candidates))
        out = subprocess.run(
            ["git", "-C", str(repo.git_dir), "diff-tree", "--stdin", "-r", "--no-renames",
             "--name-status", "--always"],
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
            status, _, path = line.partition("\t")
            if path and current is None:
                current = _step_problem(repo, candidates[headers - 1], candidates[headers],
                                        status, path, profile)
        if headers:
            blockers.append(current)
        return cls(blockers[: len(candidates)])


def _step_problem(repo: git.Repo, parent: str, commit: str, status: str, path: str,
                  profile: Profile) -> str | None:
    """What one changed path of one step blocks, for the quick index, by :func:`check`'s rules.
    For a profile that forbids new folders, a step that adds a file in a folder its parent
    lacks, or deletes one whose folder its commit lacks, or does either beside a file the build
    leaves out, blocks: in either direction, no folder then appears or goes between two
    positions without a blocking step between them."""
    if path in profile.overlay_left_out:
        return None
    if path in profile.overlay_versioned:
        if status.startswith("M") and pure.version_only(repo, parent, commit, path):
            return None
        return f"{path} changes beyond its version"
    problem = path_problem(path, profile)
    if problem or profile.overlay_new_dirs or status.startswith("M"):
        return problem
    if not path_matches(path, profile.overlay_install) or \
            path_matches(path, profile.overlay_generated):
        return None
    side = parent if status.startswith("A") else commit  # where the folder must already be
    mixed = {p.rpartition("/")[0] for p in profile.overlay_left_out}
    if path.rpartition("/")[0] in mixed or not _folder_in(repo.commit(side).tree, path):
        return f"{path} comes or goes with its folder, or beside files the build leaves out"
    return None


@dataclass(frozen=True)
class OverlayCheck:
    ok: bool
    reason: str
    changed: tuple[str, ...] = ()  # installed paths to take from the target commit
    deleted: tuple[str, ...] = ()  # installed paths the target commit no longer has


def check(repo: git.Repo, base: str, target: str, profile: Profile) -> OverlayCheck:
    """The exact rule: every path that differs between ``base`` and ``target`` is safe (a
    ``overlay_versioned`` file when it differs in its version field alone)."""
    out = repo.git.diff("--name-status", "--no-renames", base, target)
    changed: list[str] = []
    deleted: list[str] = []
    base_tree = repo.commit(base).tree if not profile.overlay_new_dirs else None
    left_out = set(profile.overlay_left_out)
    mixed = {p.rpartition("/")[0] for p in left_out}  # folders the build takes in part
    for line in out.splitlines():
        status, _, path = line.partition("\t")
        if path in left_out:
            continue  # not in the base's wheel, and the build settings are the same
        if path in profile.overlay_versioned:
            if status.startswith("M") and pure.version_only(repo, base, target, path):
                continue
            return OverlayCheck(False, f"{path} changes beyond its version: needs a source "
                                       f"build")
        problem = path_problem(path, profile)
        if problem:
            return OverlayCheck(False, problem)
        if path_matches(path, profile.overlay_generated):
            continue
        if not path_matches(path, profile.overlay_install):
            continue
        if base_tree is not None and status.startswith("A") and (
                not _folder_in(base_tree, path) or path.rpartition("/")[0] in mixed):
            return OverlayCheck(False, f"{path} is added in a new folder (a new package?) or "
                                       f"beside files the build leaves out: needs a source "
                                       f"build")
        if base_tree is not None and status.startswith("D") and \
                not _folder_in(repo.commit(target).tree, path):
            return OverlayCheck(False, f"{path} goes with its folder: needs a source build")
        installed = path[len(profile.source_prefix):]
        (deleted if status.startswith("D") else changed).append(installed)
    return OverlayCheck(True, f"{len(changed)} files laid over, {len(deleted)} removed",
                        tuple(changed), tuple(deleted))


def _folder_in(tree: git.Tree, path: str) -> bool:
    folder = path.rpartition("/")[0]
    if not folder:
        return True
    try:
        return isinstance(tree / folder, git.Tree)
    except KeyError:
        return False


# 2: the overlay carries the probed commit's version file (overlays made before kept the base's
# and are never reused: a new key, so a new environment too).
OVERLAY_FORMAT = 2


def overlay_key(base_key: str, target: str, profile: Profile) -> str:
    return artifact_key("overlay", target, {"base": base_key, "profile": profile.name,
                                            "format": OVERLAY_FORMAT})


def version_member(profile: Profile) -> str | None:
    """The installed path of the file a build generates with the commit in it (PyTorch's
    ``torch/version.py``, torchlet's ``torchlet/version.py``); None for a profile that names no
    package (the generic profile, which never overlays: it declares no Python-only paths)."""
    if profile.version_file:
        return profile.version_file
    return f"{profile.import_name}/version.py" if profile.import_name else None


def read_base_file(base: Installable, member: str) -> str | None:
    """``member`` as the base has it installed (an installed base's site-packages, or the
    wheel), None when it has none or it cannot be read."""
    try:
        if base.installed is not None:
            return (Path(base.installed.site) / member).read_text(errors="replace")
        if base.wheel is not None:
            with zipfile.ZipFile(base.wheel) as z:
                return z.read(member).decode(errors="replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    return None


_GIT_VERSION = re.compile(
    r"""^(?P<lhs>git_version\s*(?::[^=\n]*)?=\s*)(?P<q>['"])[^'"\n]*(?P=q)""", re.M)
_VERSION = re.compile(
    r"""^(?P<lhs>__version__\s*(?::[^=\n]*)?=\s*(?P<q>['"]))(?P<v>[^'"\n]*)(?P=q)""", re.M)
_LOCAL_GIT = re.compile(r"^git[0-9a-fA-F]{7,40}$")


def truthful_version(base_text: str | None, target: str, profile: Profile) -> str | None:
    """The version file the target's own build would have generated, made from the base's:
    ``git_version`` is the target's full sha, and a ``+git<sha>`` segment of ``__version__``'s
    local part (a source build's ``2.9.0a0+git773b034``) names the target, as long as before;
    the rest (CUDA, debug, a nightly's ``.devYYYYMMDD+cu128``) is the base's, which the overlay
    runs on. Without a base file, the profile's template (torchlet's) makes one; None when
    neither says where the commit goes (the base's file is then kept, and the manifest says so).
    """
    if base_text is not None and _GIT_VERSION.search(base_text):
        text = _GIT_VERSION.sub(lambda m: f"{m['lhs']}{m['q']}{target}{m['q']}", base_text)

        def local(m: re.Match[str]) -> str:
            public, plus, loc = m["v"].partition("+")
            if not plus:
                return m[0]
            parts = [f"git{target[:len(p) - 3]}" if _LOCAL_GIT.match(p) else p
                     for p in loc.split(".")]
            return f"{m['lhs']}{public}+{'.'.join(parts)}{m['q']}"

        return _VERSION.sub(local, text)
    if profile.version_template:
        return profile.version_template.format(version=profile.version_for(target), sha=target)
    return None


def make_overlay(
    repo: git.Repo, base_key: str, base_commit: str, target: str, result: OverlayCheck,
    profile: Profile, base: Installable | None = None,
) -> Path:
    """Write the overlay (target's changed files, its generated version file made from
    ``base``'s, and the manifest) into the artifact cache."""
    key = overlay_key(base_key, target, profile)
    work = scratch_dir(f"overlay-{target[:10]}-")
    try:
        files = work / "files"
        files.mkdir()
        tree = repo.commit(target).tree
        for path in result.changed:
            dest = files / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            # exact bytes, no newline stripping
            dest.write_bytes(tree[profile.source_prefix + path].data_stream.read())
        manifest: dict[str, Any] = {
            "commit": target, "base_commit": base_commit, "base_key": base_key,
            "changed": list(result.changed), "deleted": list(result.deleted), "generated": [],
        }
        member = version_member(profile)
        base_text = read_base_file(base, member) if base and member else None
        if member and member.endswith(".dist-info/METADATA"):
            text = pure.metadata_for(base_text, repo, target)
        else:
            text = truthful_version(base_text, target, profile) if member else None
        if member and text is not None:
            (files / member).parent.mkdir(parents=True, exist_ok=True)
            (files / member).write_text(text)
            manifest["generated"] = [member]
            manifest["version_file"] = (
                f"{member} carries {target[:12]}'s version" if member.endswith("/METADATA")
                else f"{member} names {target[:12]}")
        else:
            manifest["version_file"] = (
                f"{member or 'no version file'} kept from the base: the profile "
                f"{profile.name!r} says nowhere what a build writes the commit into")
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        return publish(work, key)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def apply_overlay(overlay_dir: Path, site_packages: Path) -> dict[str, object]:
    """Lay an overlay into an installed environment; returns what was done, for the facts."""
    manifest = json.loads((overlay_dir / MANIFEST).read_text())
    laid = [*manifest["changed"], *manifest.get("generated", [])]
    for path in [*laid, *manifest["deleted"]]:
        parts = str(path).split("/")
        if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"refusing overlay path {path!r}: it would leave site-packages")
    for path in laid:
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
    out: dict[str, object] = {"commit": manifest["commit"],
                              "base_commit": manifest["base_commit"],
                              "changed": len(manifest["changed"]),
                              "deleted": manifest["deleted"]}
    if "version_file" in manifest:
        out["version_file"] = manifest["version_file"]
    return out


def overlay_facts(summary: dict[str, object]) -> dict[str, object]:
    """The facts of a probe installed as an overlay: what ran (the probed commit's Python
    over a base's build) and the base, apart from the package's own version facts, which
    now name the probed commit: a report or a reader never takes one for the other."""
    commit, base = str(summary["commit"]), str(summary["base_commit"])
    return {"overlay": summary, "overlay_base": base,
            "artifact": f"overlay of {commit[:12]} on base {base[:12]}"}


def _drop_bytecode(py: Path) -> None:
    cache = py.parent / "__pycache__"
    if cache.is_dir():
        for pyc in cache.glob(f"{py.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)
