"""The ways to a commit's torch, each one class carrying its :class:`~bisector.base.kinds.Way`
(its price) and ``would(pos)`` (whether it would serve a candidate now), asked in the order of
``provider.WAYS``: nothing at all, when the commit has nothing to build (its probe runs the
oracle in its tree, as ``git bisect run`` does); the installed torch (``--installed-base``);
the keepers (``keepers.py``: the package made before, on this box or by another box); the
commit's own wheel in an index (release or nightly); the stored fact that it does not build; a
Python-only overlay on a nearby base; a source build (``building.py``). Each answers, saying
the way it took, or passes (None) to the next. ``given.py`` has the two ways ``bisect check``
is handed a torch (the system's, a wheel file); ``shared.py`` what they all use.

A prebuilt that fails (gone from the index, wrong hash) is dropped from the ranking for the
rest of the run and the next way is tried, so a broken download can cost time but never a
wrong verdict. One artifact key is obtained by one thread at a time.
"""

from __future__ import annotations

from pathlib import Path

from bisector.artifacts import overlay
from bisector.artifacts.build import wheel_digest
from bisector.artifacts.cache import wheel_dir
from bisector.artifacts.index import IndexFile, IndexProblem
from bisector.artifacts.installable import IN_TREE, Installable
from bisector.artifacts.keepers import Found
from bisector.artifacts.obtained import Answer, Obtained, installable
from bisector.artifacts.prebuilt import triton_of
from bisector.artifacts.shared import Shared, prebuilt_key
from bisector.base.kinds import ArtifactKind, ArtifactStatus, Way
from bisector.store.records import NewArtifact


class Tree:
    """A commit with nothing to build (``profiles.in_tree_at``: no Python packaging, or the
    tree profile): nothing is obtained, and its probe runs the oracle in the commit's exported
    tree. Asked first, so a build failure stored for it before (uv: "does not appear to be a
    Python project") is never its answer again."""

    way = Way.CACHED  # nothing to make: the tree is exported in milliseconds

    def __init__(self, shared: Shared) -> None:
        self.s = shared

    def would(self, pos: int) -> bool:
        return self.s.ranking.in_tree(self.s.ranking.candidates[pos])

    def obtain(self, pos: int, sha: str) -> Answer | None:
        return Obtained(IN_TREE, None) if self.s.ranking.in_tree(sha) else None


class Installed:
    """``--installed-base``: the torch installed in a Python, recorded as an artifact. Priced
    as a wheel that exists without building; its answer says CACHED (nothing was fetched)."""

    way = Way.PREBUILT

    def __init__(self, shared: Shared) -> None:
        self.s = shared

    def would(self, pos: int) -> bool:
        r = self.s.ranking
        return pos == r.installed_pos and r.installed is not None

    def obtain(self, pos: int, sha: str) -> Answer | None:
        r = self.s.ranking
        return self.get() if pos == r.installed_pos and r.installed is not None else None

    def get(self) -> Obtained:
        inst = self.s.ranking.installed
        assert inst is not None
        row = self.s.artifacts.save(NewArtifact(
            inst.key, inst.commit, ArtifactKind.INSTALLED, ArtifactStatus.OK,
            {"python": inst.python, "site": inst.site, "packages": list(inst.packages)},
            path=inst.site))
        return Obtained(Installable(inst.key, "installed", installed=inst), row)


class Kept:
    """The keepers (``keepers.py``): the commit's package made before, on this box's disk (by
    any bisection), else by another box, from the team's object store into this box's cache
    (checked against the digest in SQL). Its own prebuilt wheel's key first, then its source
    build's."""

    way = Way.CACHED  # found made: what is left is making its environment

    def __init__(self, shared: Shared) -> None:
        self.s = shared

    def would(self, pos: int) -> bool:
        return self.s.ranking.stored(pos) is ArtifactStatus.OK

    def obtain(self, pos: int, sha: str) -> Answer | None:
        keep, keys = self.s.keep, self.s.keys(pos, sha)
        for key in keys:
            a = self.s.artifacts.get(key)
            if a is not None and a.status is ArtifactStatus.OK and keep.here(a):
                return keep.answer(Found(a, Way.CACHED))
        for key in keys:
            a = self.s.artifacts.get(key)
            if a is None or a.status is not ArtifactStatus.OK or keep.here(a):
                continue
            with self.s.key_locks[key]:  # two probes of a round may share one base wheel
                fetched = keep.from_bucket(a)
            if fetched is not None:
                return keep.answer(Found(fetched, Way.BUCKET))
        return None


class Broken:
    """The stored fact that the commit does not build (its source build failed), asked once
    neither a package made before nor its own prebuilt wheel was to be had: a skip, never a
    build again nor an overlay that would hide it."""

    way = Way.BROKEN

    def __init__(self, shared: Shared) -> None:
        self.s = shared

    def would(self, pos: int) -> bool:
        return self.s.ranking.stored(pos) is ArtifactStatus.FAILED

    def obtain(self, pos: int, sha: str) -> Answer | None:
        a = self.s.artifacts.get(self.s.ranking.recipe.source_key(sha))
        if a is not None and a.status is ArtifactStatus.FAILED:
            return self.s.keep.answer(Found(a, Way.CACHED))
        return None


class Index:
    """The commit's own release or nightly wheel from its index: stored once downloaded, its
    hash checked, then kept (uploaded). Also an overlay's base wheel, wherever it is (the
    keepers asked first)."""

    way = Way.PREBUILT

    def __init__(self, shared: Shared) -> None:
        self.s = shared

    def would(self, pos: int) -> bool:
        return self.s.ranking.prebuilt(pos) is not None

    def obtain(self, pos: int, sha: str) -> Answer | None:
        pb = self.s.ranking.prebuilt(pos)
        if pb is None:
            return None
        key = prebuilt_key(sha, pb.url, pb.sha256)
        with self.s.key_locks[key]:  # two probes of a round may share one base wheel
            found = self.s.keep.get(key)
            if found is not None and found.row.status is ArtifactStatus.OK and found.row.path:
                return self.s.keep.answer(found)
            dest = wheel_dir(key) / pb.filename
            if dest.exists() and pb.sha256 and wheel_digest(dest)[0] != pb.sha256:
                dest.unlink()  # changed on disk since it was downloaded: fetch it again
            if not dest.exists() and not self._download(pos, pb.url, pb.filename, pb.sha256,
                                                        dest):
                return None
            digest, size = wheel_digest(dest)
            settings = {"url": pb.url, "filename": pb.filename, "kind": pb.kind,
                        "version": pb.version, "triton": triton_of(pb.requires)}
            row = self.s.artifacts.save(NewArtifact(
                key, sha, ArtifactKind.PREBUILT, ArtifactStatus.OK, settings, path=str(dest),
                sha256=digest, size=size))
            self.s.keep.put(row)
        return Obtained(Installable(key, f"{pb.kind} wheel {pb.filename}", wheel=dest,
                                    sha256=digest), row, fresh=True, way=Way.PREBUILT)

    def _download(self, pos: int, url: str, filename: str, sha256: str | None,
                  dest: Path) -> bool:
        client = self.s.client_for(url.rsplit("/", 1)[0])
        f = IndexFile(filename, url, {"sha256": sha256} if sha256 else {})
        with self.s.downloading(filename) as progress:
            try:
                client.download(f, dest, progress)
            except IndexProblem as e:
                # Never a verdict from a wheel we could not trust: drop it, try the next way.
                self.s.events.note(f"prebuilt wheel not used: {e.message}")
                self.s.ranking.drop_prebuilt(pos)
                return False
        return True


class Overlay:
    """The commit's Python files laid over the nearest base (installed, prebuilt or built)
    whose difference is only Python."""

    way = Way.OVERLAY

    def __init__(self, shared: Shared) -> None:
        self.s, self.installed, self.index = shared, Installed(shared), Index(shared)

    def would(self, pos: int) -> bool:
        return self.s.ranking.overlay_base(pos) is not None

    def obtain(self, pos: int, sha: str) -> Answer | None:
        r = self.s.ranking
        while (base := r.overlay_base(pos)) is not None:
            got = self.onto(base, sha)
            if got is not None:
                return got
            if base in r.bases():
                return None  # the exact diff refused what the quick index allowed: build
            r.look_again(pos)  # the base was dropped (by this or another thread)
        return None

    def onto(self, base: int, sha: str) -> Obtained | None:
        """``sha`` overlaid on the torch of candidate ``base``; None when the base is gone or
        the exact diff is not Python-only."""
        r = self.s.ranking
        if base == r.installed_pos and r.installed is not None:
            got: Answer | None = self.installed.get()
            base_sha = r.installed.commit
        else:
            base_sha = r.candidates[base]
            got = (self.index.obtain(base, base_sha) if r.prebuilt(base) is not None
                   else self._built_base(base))
        if not isinstance(got, Obtained):
            return None  # the base dropped out; the caller picks the next one
        base_row, base_inst = got.artifact, got.installable
        assert base_row is not None
        prof = r.profile_for(base_sha)
        result = overlay.check(self.s.repo(), base_sha, sha, prof)
        if not result.ok:
            return None
        self.s.events.phase(sha, f"overlaying {sha[:12]} on {base_sha[:12]} ({result.reason})")
        path = overlay.make_overlay(self.s.repo(), base_row.key, base_sha, sha, result,
                                    prof, base=base_inst)
        key = overlay.overlay_key(base_row.key, sha, prof)
        desc = f"{base_row.kind.value} {base_sha[:12]}"
        settings = {"base_key": base_row.key, "base_path": base_row.path,
                    "base_sha256": base_row.sha256,
                    "base_commit": base_sha, "base_desc": desc,
                    "changed": len(result.changed), "deleted": len(result.deleted)}
        row = self.s.artifacts.save(NewArtifact(key, sha, ArtifactKind.OVERLAY,
                                                ArtifactStatus.OK, settings, path=str(path)))
        return Obtained(Installable(key, f"overlay of {sha[:12]} on {desc}",
                                    wheel=base_inst.wheel, installed=base_inst.installed,
                                    overlay=path, extra=base_inst.extra,
                                    sha256=base_inst.sha256), row, fresh=True, way=Way.OVERLAY)

    def _built_base(self, pos: int) -> Obtained | None:
        """The stored source wheel of ``pos`` as an overlay base, or None when it is gone
        (removed by ``bisect gc``: forget it, so the ranking stops counting on it)."""
        r = self.s.ranking
        found = self.s.keep.get(r.recipe.source_key(r.candidates[pos]))
        row = found.row if found is not None else None
        if row is None or row.status is not ArtifactStatus.OK or not row.path:
            r.forget_stored()
            return None
        return Obtained(installable(row, r.installed), row)
