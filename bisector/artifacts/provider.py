"""Getting an installable torch for a commit, cheapest way first.

In order: an artifact already stored (built, downloaded or overlaid before, or known not to
build); the commit's own prebuilt wheel (release or nightly); a Python-only overlay on the
nearest prebuilt base whose difference is overlay-safe; a source build. A prebuilt that fails
(gone from the index, wrong hash) is dropped for the rest of the run and the next way is tried,
so a broken download can cost time but never a wrong verdict.

The answer is either :class:`Obtained` (what to install, and the artifact row it came from) or
:class:`Unobtainable` (why not, and whether that is a fact about the commit or about this
machine), decided here once. The same ranking feeds the search (``cost``) and ``bisect plan``
(``kind``), so what the plan projects is what the run does.

Several probes may obtain at once (one thread each): the memo and the dropped prebuilts are
guarded by a lock, one artifact key is obtained by one thread at a time, and source builds run
at most ``Recipe.build_jobs`` at once.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from bisector.artifacts import overlay
from bisector.artifacts.build import (
    Builder,
    build_key,
    describe_stats,
    failure_summary,
    obtain_wheel,
    wheel_digest,
)
from bisector.artifacts.cache import artifact_key, wheel_dir
from bisector.artifacts.index import IndexClient, IndexFile, IndexProblem
from bisector.artifacts.installable import Installable, InstalledBase
from bisector.artifacts.prebuilt import Prebuilt, triton_of, triton_requirement
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import ArtifactKind, ArtifactStatus
from bisector.infra import cancel
from bisector.project.profiles import Profile
from bisector.store.artifacts import ArtifactStore
from bisector.store.records import ArtifactRecord, NewArtifact

# Probe cost classes, cheapest first; the search compares only their order.
OUTSIDE = -1  # position of an installed base that is not a candidate
COST = {"cached": 0, "prebuilt": 1, "overlay": 2, "build": 3, "broken": 4}


@dataclass(frozen=True)
class Obtained:
    installable: Installable
    artifact: ArtifactRecord | None  # None for `bisect check` of the system Python
    fresh: bool = False  # made by this probe (built, downloaded, overlaid), not found stored


@dataclass(frozen=True)
class Unobtainable:
    """No installable for this commit. ``permanent``: the commit does not build (a fact,
    reused); otherwise the machine could not build it now (retried by a later probe)."""

    reason: str
    permanent: bool
    artifact: ArtifactRecord | None = None
    fresh: bool = False  # this probe paid for the failed build


@dataclass(frozen=True)
class Recipe:
    """How this run builds: the profile, the Python, where, how long, how many at once."""

    profile: Profile
    python: str
    builder: Builder | None = None
    timeout_s: float = 3600.0
    build_jobs: int = 1
    # A source-built wheel serves as an overlay base (off with --no-prebuilt: every probe built).
    reuse_builds: bool = True


@dataclass(frozen=True)
class Sources:
    """Wheels that exist without building: the index's, mapped to positions, and an installed
    torch (``--installed-base``)."""

    prebuilts: dict[int, Prebuilt] = field(default_factory=dict)
    installed: InstalledBase | None = None


class Provider:
    def __init__(
        self,
        artifacts: ArtifactStore,
        repo: Callable[[], git.Repo],
        candidates: list[str],
        recipe: Recipe,
        sources: Sources = Sources(),
        events: Events | None = None,
        client_for: Callable[[str], IndexClient] = IndexClient,
    ) -> None:
        self.artifacts, self._repo, self.candidates = artifacts, repo, candidates
        self.recipe, self.profile = recipe, recipe.profile
        self.prebuilts = dict(sources.prebuilts)
        self.installed = sources.installed
        # The installed base may sit outside the range (e.g. the parent of --good): then it is
        # OUTSIDE, never probed itself, and only ever an overlay base decided by the exact diff.
        self.installed_pos: int | None = None
        if self.installed is not None:
            self.installed_pos = (candidates.index(self.installed.commit)
                                  if self.installed.commit in candidates else OUTSIDE)
        self.events: Events = events or QuietEvents()
        self.client_for = client_for
        self._pos = {sha: i for i, sha in enumerate(candidates)}
        self._changes: overlay.ChangeIndex | None = None
        self._known: dict[str, ArtifactStatus] | None = None
        self._base_memo: dict[int, int | None] = {}
        self._lock = threading.RLock()
        self._key_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._builds = threading.Semaphore(recipe.build_jobs)

    # -- ranking -------------------------------------------------------------------------

    @property
    def changes(self) -> overlay.ChangeIndex:
        with self._lock:
            if self._changes is None:
                self._changes = overlay.ChangeIndex.build(self._repo(), self.candidates,
                                                          self.profile)
            return self._changes

    def _source_key(self, sha: str) -> str:
        return build_key(self.profile, sha, self.recipe.python, self.recipe.builder)[0]

    def _known_artifacts(self) -> dict[str, ArtifactStatus]:
        """commit -> status of the source artifacts already stored for the candidates."""
        with self._lock:
            if self._known is None:
                keys = {self._source_key(sha): sha for sha in self.candidates}
                self._known = {}
                for a in self.artifacts.for_commits(self.candidates):
                    if a.key in keys and _usable(a):
                        self._known[keys[a.key]] = a.status
            return self._known

    def built(self) -> set[int]:
        """Positions whose source build is stored and still on disk: build once, overlay many
        (a Python-only change next to a built commit needs no second build)."""
        if not self.recipe.reuse_builds:
            return set()
        known = self._known_artifacts()
        return {self._pos[sha] for sha, status in known.items()
                if status is ArtifactStatus.OK and sha in self._pos}

    def bases(self) -> list[int]:
        with self._lock:
            out = set(self.prebuilts)
        out |= self.built()
        if self.installed_pos is not None and self.installed_pos != OUTSIDE:
            out.add(self.installed_pos)
        return sorted(out)

    def safe_between(self, a: int, b: int) -> bool:
        """A wheel built at ``a`` would serve ``b`` as an overlay base: build reuse is on and
        no change between them blocks an overlay (the quick index; the exact diff decides at
        obtain time). The plan uses it to project build reuse."""
        return self.recipe.reuse_builds and self.changes.blocker_between(a, b) is None

    def overlay_base(self, pos: int) -> int | None:
        """The nearest base whose difference to ``pos`` is overlay-safe (older on a tie).

        The change index answers first; where it refuses (it is conservative: a change and its
        revert both count) the exact diff against the nearest base on each side decides.
        """
        with self._lock:
            if pos in self._base_memo:
                return self._base_memo[pos]
        found = self._find_base(pos)
        with self._lock:
            self._base_memo[pos] = found
        return found

    def _find_base(self, pos: int) -> int | None:
        bases = self.bases()
        if pos in bases:
            return pos
        best: tuple[int, int] | None = None
        for b in bases:
            if self.changes.blocker_between(b, pos) is None:
                key = (abs(b - pos), b)
                if best is None or key < best:
                    best = key
        if best is not None:
            return best[1]
        below = [b for b in bases if b < pos][-1:]
        above = [b for b in bases if b > pos][:1]
        for b in sorted([*below, *above], key=lambda q: (abs(q - pos), q)):
            if overlay.check(self._repo(), self.candidates[b], self.candidates[pos],
                             self.profile).ok:
                return b
        if self.installed_pos == OUTSIDE and self.installed is not None and overlay.check(
                self._repo(), self.installed.commit, self.candidates[pos], self.profile).ok:
            return OUTSIDE
        return None

    def kind(self, pos: int) -> str:
        known = self._known_artifacts().get(self.candidates[pos])
        if known is ArtifactStatus.OK:
            return "cached"
        if known is ArtifactStatus.FAILED:
            return "broken"
        if pos in self.prebuilts or pos == self.installed_pos:
            return "prebuilt"
        if self.overlay_base(pos) is not None:
            return "overlay"
        return "build"

    def cost(self, pos: int) -> int:
        return COST[self.kind(pos)]

    # -- obtaining -------------------------------------------------------------------------

    def obtain(self, pos: int) -> Obtained | Unobtainable:
        sha = self.candidates[pos]
        if pos == self.installed_pos and self.installed is not None:
            return self._installed()
        if pos in self.prebuilts:
            got = self._prebuilt(pos)
            if got is not None:
                return got
        row = self._existing(self._source_key(sha))
        if row is not None:
            return self._answer(row)
        while (base := self.overlay_base(pos)) is not None:
            got = self._overlay(pos, base)
            if got is not None:
                return got
            if base in self.bases():
                break  # the exact diff refused what the quick index allowed: build instead
            with self._lock:  # the base was dropped (by this or another thread): look again
                self._base_memo.pop(pos, None)
        return self._build(pos)

    def _existing(self, key: str) -> ArtifactRecord | None:
        a = self.artifacts.get(key)
        return a if a is not None and _usable(a) else None

    def _answer(self, a: ArtifactRecord, fresh: bool = False) -> Obtained | Unobtainable:
        if a.status is ArtifactStatus.OK and a.path:
            return Obtained(self._installable(a), a, fresh)
        if a.status is ArtifactStatus.ERROR:
            why = (a.stats or {}).get("error", "unknown")
            return Unobtainable(f"build could not run: {why}", False, a, fresh)
        summary = failure_summary(Path(a.log_path)) if a.log_path else "no log"
        return Unobtainable(f"build failed: {summary}", True, a, fresh)

    def _installable(self, a: ArtifactRecord) -> Installable:
        assert a.path is not None
        if a.kind is ArtifactKind.OVERLAY:
            base_key = str(a.settings["base_key"])
            base = self._base_installable(base_key, a.settings)
            return Installable(a.key, f"overlay of {a.commit_sha[:12]} on "
                               f"{a.settings.get('base_desc', base_key[:12])}",
                               wheel=base.wheel, installed=base.installed,
                               overlay=Path(a.path), extra=base.extra, sha256=base.sha256)
        if a.kind is ArtifactKind.INSTALLED and self.installed is not None:
            return Installable(a.key, "installed", installed=self.installed)
        obtained = {ArtifactKind.SOURCE: "source build",
                    ArtifactKind.PREBUILT: f"prebuilt {Path(a.path).name}"}
        return Installable(a.key, obtained.get(a.kind, a.kind.value), wheel=Path(a.path),
                           extra=tuple(a.settings.get("extra", ())), sha256=a.sha256)

    def _base_installable(self, base_key: str, settings: dict[str, Any]) -> Installable:
        if self.installed is not None and base_key == self.installed.key:
            return Installable(base_key, "installed", installed=self.installed)
        return Installable(base_key, "prebuilt", wheel=Path(str(settings["base_path"])),
                           sha256=settings.get("base_sha256"))

    def _installed(self) -> Obtained:
        inst = self.installed
        assert inst is not None
        row = self.artifacts.save(NewArtifact(
            inst.key, inst.commit, ArtifactKind.INSTALLED, ArtifactStatus.OK,
            {"python": inst.python, "site": inst.site, "packages": list(inst.packages)},
            path=inst.site))
        return Obtained(Installable(inst.key, "installed", installed=inst), row)

    def _prebuilt(self, pos: int) -> Obtained | None:
        with self._lock:
            pb = self.prebuilts.get(pos)
        if pb is None:
            return None
        sha = self.candidates[pos]
        key = artifact_key("prebuilt", sha, {"url": pb.url, "sha256": pb.sha256})
        with self._key_locks[key]:  # two probes of a round may share one base wheel
            row = self._existing(key)
            if row is not None and row.status is ArtifactStatus.OK and row.path:
                return Obtained(self._installable(row), row)
            dest = wheel_dir(key) / pb.filename
            if dest.exists() and pb.sha256 and wheel_digest(dest)[0] != pb.sha256:
                dest.unlink()  # changed on disk since it was downloaded: fetch it again
            if not dest.exists():
                client = self.client_for(pb.url.rsplit("/", 1)[0])
                f = IndexFile(pb.filename, pb.url, {"sha256": pb.sha256} if pb.sha256 else {})
                fetched = 0

                def progress(done: int, total: int | None) -> None:
                    nonlocal fetched
                    if cancel.stopping():
                        raise cancel.Stopped("download stopped by the user")
                    fetched = done
                    self.events.download(pb.filename, done, total)

                try:
                    client.download(f, dest, progress)
                except IndexProblem as e:
                    # Never a verdict from a wheel we could not trust: drop it, try the next way.
                    self.events.note(f"prebuilt wheel not used: {e.message}")
                    with self._lock:
                        self.prebuilts.pop(pos, None)
                        self._base_memo.clear()
                    return None
                finally:
                    self.events.download(pb.filename, fetched, fetched)  # ended, either way
            digest, size = wheel_digest(dest)
            settings = {"url": pb.url, "filename": pb.filename, "kind": pb.kind,
                        "version": pb.version, "triton": triton_of(pb.requires)}
            row = self.artifacts.save(NewArtifact(
                key, sha, ArtifactKind.PREBUILT, ArtifactStatus.OK, settings, path=str(dest),
                sha256=digest, size=size))
        return Obtained(Installable(key, f"{pb.kind} wheel {pb.filename}", wheel=dest,
                                    sha256=digest), row, fresh=True)

    def _built_base(self, pos: int) -> Obtained | None:
        """The stored source wheel of ``pos`` as an overlay base, or None when it is gone
        (removed by ``bisect gc``: forget it, so the ranking stops counting on it)."""
        row = self._existing(self._source_key(self.candidates[pos]))
        if row is None or row.status is not ArtifactStatus.OK or not row.path:
            with self._lock:
                self._known = None
                self._base_memo.clear()
            return None
        return Obtained(self._installable(row), row)

    def obtain_commit(self, sha: str, near: int) -> Obtained | Unobtainable:
        """A commit outside the candidates (the culprit's revert on the bad endpoint): from
        the cache, as an overlay on the wheel that served ``near`` when only Python files
        differ, else built from source."""
        row = self._existing(self._source_key(sha))
        if row is not None:
            return self._answer(row)
        base = self.overlay_base(near)
        if base is None and (near in self.prebuilts or near == self.installed_pos):
            base = near
        if base is not None:
            got = self._overlay(base, base, sha=sha)
            if got is not None:
                return got
        return self._build(near, sha=sha)

    def _overlay(self, pos: int, base: int, sha: str | None = None) -> Obtained | None:
        sha = sha or self.candidates[pos]
        if base == self.installed_pos and self.installed is not None:
            got = self._installed()
            base_sha = self.installed.commit
        else:
            maybe = self._prebuilt(base) if base in self.prebuilts else self._built_base(base)
            if maybe is None:
                return None  # the base dropped out; the caller picks the next one
            got, base_sha = maybe, self.candidates[base]
        base_row, base_inst = got.artifact, got.installable
        assert base_row is not None
        result = overlay.check(self._repo(), base_sha, sha, self.profile)
        if not result.ok:
            return None
        self.events.phase(sha, f"overlaying {sha[:12]} on {base_sha[:12]} ({result.reason})")
        path = overlay.make_overlay(self._repo(), base_row.key, base_sha, sha, result,
                                    self.profile)
        key = overlay.overlay_key(base_row.key, sha, self.profile)
        desc = f"{base_row.kind.value} {base_sha[:12]}"
        settings = {"base_key": base_row.key, "base_path": base_row.path,
                    "base_sha256": base_row.sha256,
                    "base_commit": base_sha, "base_desc": desc,
                    "changed": len(result.changed), "deleted": len(result.deleted)}
        row = self.artifacts.save(NewArtifact(key, sha, ArtifactKind.OVERLAY, ArtifactStatus.OK,
                                              settings, path=str(path)))
        return Obtained(Installable(key, f"overlay of {sha[:12]} on {desc}",
                                    wheel=base_inst.wheel, installed=base_inst.installed,
                                    overlay=path, extra=base_inst.extra,
                                    sha256=base_inst.sha256), row, fresh=True)

    def _build(self, pos: int, sha: str | None = None) -> Obtained | Unobtainable:
        sha = sha or self.candidates[pos]
        builder = self.recipe.builder
        key, settings = build_key(self.profile, sha, self.recipe.python, builder)
        where = "in the builder container" if builder and builder.where == "docker" \
            else "from source"
        with self._key_locks[key], self._builds:
            res = obtain_wheel(
                self._repo(), sha, self.profile, python=self.recipe.python,
                timeout_s=self.recipe.timeout_s, builder=builder,
                on_build=lambda: self.events.phase(sha, f"building {sha[:12]} {where}"),
                on_line=lambda line: self.events.build_line(sha, line),
            )
        status = ArtifactStatus.OK if res.ok else (
            ArtifactStatus.ERROR if res.infra else ArtifactStatus.FAILED)
        stats = {**res.stats, **({"error": res.infra} if res.infra else {})} or None
        digest, size = wheel_digest(res.wheel) if res.wheel else (None, None)
        if res.stats and res.duration_s:
            how = "built" if res.ok else "build failed for"
            self.events.note(f"{how} {sha[:12]} in {res.duration_s:.1f}s, "
                             f"{describe_stats(res.stats)}")
        triton = triton_requirement(self._repo(), sha, self.profile, nightly=True)
        if triton:
            settings = {**settings, "extra": [triton]}
        row = self.artifacts.save(NewArtifact(
            key, sha, ArtifactKind.SOURCE, status, settings,
            path=str(res.wheel) if res.wheel else None, sha256=digest, size=size,
            log_path=str(res.log_path), log_tail=res.log_tail, duration_s=res.duration_s,
            stats=stats))
        with self._lock:
            self._known = None
            if status is ArtifactStatus.OK:
                self._base_memo.clear()  # a new base: commits near it may overlay on it now
        return self._answer(row, fresh=not res.cached)


def _usable(a: ArtifactRecord) -> bool:
    """A stored fact we can still act on: a known failure, or a wheel that is still on disk."""
    return a.status is ArtifactStatus.FAILED or bool(
        a.status is ArtifactStatus.OK and a.path and Path(a.path).exists())
