"""The chain of ways to a commit's torch, each one job: the installed torch, the commit's own
prebuilt wheel, an artifact already stored, a Python-only overlay on a nearby base, a source
build. ``provider.Provider`` asks them in that order; each answers, or passes (None) to the next.

A prebuilt that fails (gone from the index, wrong hash) is dropped from the ranking for the
rest of the run and the next way is tried, so a broken download can cost time but never a
wrong verdict. One artifact key is obtained by one thread at a time; source builds run at most
``Recipe.build_jobs`` at once.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import git

from bisector.artifacts import overlay, remote
from bisector.artifacts.build import BuildResult, build_key, obtain_wheel, wheel_digest
from bisector.artifacts.build_logs import describe_stats
from bisector.artifacts.cache import artifact_key, wheel_dir
from bisector.artifacts.index import IndexClient, IndexFile, IndexProblem
from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import (
    Answer,
    Obtained,
    Unobtainable,
    answer,
    installable,
    usable,
)
from bisector.artifacts.prebuilt import triton_of, triton_requirement
from bisector.artifacts.ranking import Ranking
from bisector.artifacts.remote import Remote, wheel_name
from bisector.base import defaults
from bisector.base.events import Events, Every, flag_set
from bisector.base.kinds import ArtifactKind, ArtifactStatus
from bisector.infra import cancel
from bisector.infra.owner import owner_alive, owner_id
from bisector.store import claims
from bisector.store import remote as remote_rows
from bisector.store.artifacts import ArtifactStore
from bisector.store.records import ArtifactRecord, NewArtifact

# What the object store holds: wheels (an overlay is remade from its base in seconds, an
# installed torch is the box's own).
SHARED_KINDS = frozenset({ArtifactKind.SOURCE, ArtifactKind.PREBUILT})


@dataclass
class Shared:
    """What every source of one run uses: the store, the clone, the ranking, the progress."""

    artifacts: ArtifactStore
    repo: Callable[[], git.Repo]
    ranking: Ranking
    events: Events
    key_locks: defaultdict[str, threading.Lock] = field(
        default_factory=lambda: defaultdict(threading.Lock))

    remote: Remote | None = None  # the team's object store (--artifacts), if any

    def existing(self, key: str) -> ArtifactRecord | None:
        """The stored artifact of ``key`` when this box can act on it: its wheel on disk,
        else fetched from the team's object store (checked against the digest in SQL)."""
        found = self.found(key)
        return found[0] if found is not None else None

    def found(self, key: str) -> tuple[ArtifactRecord, str] | None:
        """:meth:`existing`, and where the row's wheel came from: "" (this box), "bucket"."""
        a = self.artifacts.get(key)
        if a is None:
            return None
        if usable(a):
            return a, ""
        fetched = self.from_remote(a)
        return (fetched, "bucket") if fetched is not None else None

    def answer_found(self, found: tuple[ArtifactRecord, str]) -> Answer:
        row, origin = found
        self.publish(row)  # made while the object store was down, say
        got = self.answer(row)
        return replace(got, origin=origin) if origin and isinstance(got, Obtained) else got

    def from_remote(self, a: ArtifactRecord) -> ArtifactRecord | None:
        """``a``'s wheel, made by another box, from the object store into this box's cache;
        None when there is none, the store is down, or its bytes are not those recorded."""
        name = wheel_name(a.path)
        if (self.remote is None or a.status is not ArtifactStatus.OK or not a.sha256
                or a.kind not in SHARED_KINDS or name is None):
            return None
        rec = remote_rows.find(self.artifacts.store, self.remote.bucket.url, a.key)
        if rec is None or rec.sha256 != a.sha256:
            return None
        dest = wheel_dir(a.key) / name
        if not dest.exists():
            self.events.phase(a.commit_sha, f"downloading {name} from {self.remote.bucket.url}")
            with self.downloading(name) as progress:
                if not self.remote.fetch(rec.object_key, a.sha256, dest, rec.size, progress):
                    return None
            self.events.note(f"downloaded {a.commit_sha[:12]}'s wheel from "
                             f"{self.remote.bucket.url} ({rec.size / 2**20:.1f} MiB, sha256 "
                             f"checked)")
        return replace(a, path=str(dest))

    @contextmanager
    def downloading(self, name: str) -> Iterator[Callable[[int, int | None], None]]:
        """A download's progress callback: events a few times a second (a chunk a MiB is
        hundreds a second on a fast link), Ctrl-C honoured, and its end said either way."""
        fetched = 0
        often = Every(defaults.DOWNLOAD_EVENT_S)

        def progress(done: int, total: int | None) -> None:
            nonlocal fetched
            if cancel.stopping():
                raise cancel.Stopped("download stopped by the user")
            fetched = done
            if often.due() or (total is not None and done >= total):
                self.events.download(name, done, total)

        try:
            yield progress
        finally:
            self.events.download(name, fetched, fetched)

    def publish(self, a: ArtifactRecord) -> None:
        """Upload a wheel this box holds to the object store, once per key (a store that is
        down keeps it local, with one warning)."""
        name = wheel_name(a.path)
        if (self.remote is None or a.status is not ArtifactStatus.OK or not a.sha256
                or a.kind not in SHARED_KINDS or name is None or not self.remote.usable()):
            return
        bucket = self.remote.bucket.url
        if remote_rows.find(self.artifacts.store, bucket, a.key) is not None:
            return
        assert a.path is not None
        path = Path(a.path)
        if not path.is_file():
            return
        size = path.stat().st_size
        key = self.remote.push(path, a.sha256, size)
        if key is not None:
            remote_rows.record(self.artifacts.store, remote_rows.RemoteRecord(
                bucket, a.key, key, a.sha256, size, name, remote.now()))

    def answer(self, a: ArtifactRecord, fresh: bool = False) -> Answer:
        return answer(a, self.ranking.installed, fresh)


class Source(Protocol):
    def obtain(self, pos: int, sha: str) -> Answer | None:
        """The torch of ``sha`` (at candidate ``pos``), or None: ask the next source."""
        ...


class Installed:
    """``--installed-base``: the torch installed in a Python, recorded as an artifact."""

    def __init__(self, shared: Shared) -> None:
        self.s = shared

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


class Prebuilt:
    """The commit's own release or nightly wheel: stored once downloaded, its hash checked."""

    def __init__(self, shared: Shared, client_for: Callable[[str], IndexClient]) -> None:
        self.s, self.client_for = shared, client_for

    def obtain(self, pos: int, sha: str) -> Answer | None:
        pb = self.s.ranking.prebuilt(pos)
        if pb is None:
            return None
        key = artifact_key("prebuilt", sha, {"url": pb.url, "sha256": pb.sha256})
        with self.s.key_locks[key]:  # two probes of a round may share one base wheel
            found = self.s.found(key)
            if found is not None and found[0].status is ArtifactStatus.OK and found[0].path:
                return self.s.answer_found(found)
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
            self.s.publish(row)
        return Obtained(Installable(key, f"{pb.kind} wheel {pb.filename}", wheel=dest,
                                    sha256=digest), row, fresh=True)

    def _download(self, pos: int, url: str, filename: str, sha256: str | None,
                  dest: Path) -> bool:
        client = self.client_for(url.rsplit("/", 1)[0])
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


class Cached:
    """The commit built before (by any bisection): its wheel, or the fact that it fails."""

    def __init__(self, shared: Shared) -> None:
        self.s = shared

    def obtain(self, pos: int, sha: str) -> Answer | None:
        found = self.s.found(self.s.ranking.recipe.source_key(sha))
        return self.s.answer_found(found) if found is not None else None


class Overlay:
    """The commit's Python files laid over the nearest base (installed, prebuilt or built)
    whose difference is only Python."""

    def __init__(self, shared: Shared, installed: Installed, prebuilt: Prebuilt) -> None:
        self.s, self.installed, self.prebuilt = shared, installed, prebuilt

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
            got = (self.prebuilt.obtain(base, base_sha) if r.prebuilt(base) is not None
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
                                    sha256=base_inst.sha256), row, fresh=True)

    def _built_base(self, pos: int) -> Obtained | None:
        """The stored source wheel of ``pos`` as an overlay base, or None when it is gone
        (removed by ``bisect gc``: forget it, so the ranking stops counting on it)."""
        r = self.s.ranking
        row = self.s.existing(r.recipe.source_key(r.candidates[pos]))
        if row is None or row.status is not ArtifactStatus.OK or not row.path:
            r.forget_stored()
            return None
        return Obtained(installable(row, r.installed), row)


# Set where a commit is obtained ahead of need without a build slot to spare for it
# (run/prefetch.py): the chain then stops before building (an overlay the exact diff refused
# falls through to here), and the probe builds it itself if it comes to that.
_NO_BUILD: ContextVar[bool] = ContextVar("bisector_no_build", default=False)


def builds_refused() -> AbstractContextManager[None]:
    return flag_set(_NO_BUILD)


class Build:
    """A source build by the recipe's builder (host or container), at most ``build_jobs`` at
    once; a failure is stored as a fact about the commit, an infrastructure error is not.
    Each build is claimed in the store first, so two processes (two boxes sharing the store
    and an object store) never build one commit twice at once."""

    poll_s = 2.0

    def __init__(self, shared: Shared) -> None:
        self.s = shared
        self._slots = threading.Semaphore(shared.ranking.recipe.build_jobs)
        self.me = owner_id()

    def _claim(self, key: str, sha: str) -> Answer | None:
        """Claim the build of ``key``: None when it is ours to build; the answer when another
        process built it meanwhile (waited for while it builds, taken over if it died)."""
        store, said = self.s.artifacts.store, False
        while True:
            holder = claims.claim_build(store, key, sha, self.me)
            if holder is None:
                found = self.s.found(key)  # built (and uploaded) just before we claimed it
                if found is None or found[0].status is ArtifactStatus.ERROR:
                    return None
                claims.release_build(store, key, sha, self.me)
                return self.s.answer_found(found)
            if holder.owner and not owner_alive(holder.owner, holder.at):
                claims.take_over_build(store, key, sha, self.me, holder.owner)
                continue
            if not said:
                self.s.events.phase(sha, f"{sha[:12]} is being built by {holder.owner}: "
                                         f"waiting for its wheel")
                said = True
            if cancel.stopping():
                raise cancel.Stopped("stopped while waiting for another process's build")
            time.sleep(self.poll_s)

    def obtain(self, pos: int, sha: str) -> Answer:
        if _NO_BUILD.get():
            return Unobtainable("not built ahead: no build slot to spare", permanent=False)
        recipe, events = self.s.ranking.recipe, self.s.events
        builder = recipe.builder
        key, settings = build_key(recipe.profile, sha, recipe.python, builder)
        where = "in the builder container" if builder and builder.where == "docker" \
            else "from source"
        with self.s.key_locks[key], self._slots:
            made = self._claim(key, sha)
            if made is not None:
                return made
            try:
                res = obtain_wheel(
                    self.s.repo(), sha, recipe.profile, python=recipe.python,
                    timeout_s=recipe.timeout_s, builder=builder,
                    on_build=lambda: events.phase(sha, f"building {sha[:12]} {where}"),
                    on_line=lambda line: events.build_line(sha, line),
                )
                # Stored and uploaded before the claim goes: a process waiting for this
                # build finds the row (and the object) the moment it may claim.
                row = self._save(sha, key, settings, res)
            finally:
                claims.release_build(self.s.artifacts.store, key, sha, self.me)
        # A new base: commits near it may overlay on it now.
        self.s.ranking.forget_stored(new_base=row.status is ArtifactStatus.OK)
        return self.s.answer(row, fresh=not res.cached)

    def _save(self, sha: str, key: str, settings: dict[str, Any],
              res: BuildResult) -> ArtifactRecord:
        """The build's artifact row (a wheel, a failure, or an error to retry), uploaded to
        the team's object store when it is a wheel."""
        recipe, events = self.s.ranking.recipe, self.s.events
        status = ArtifactStatus.OK if res.ok else (
            ArtifactStatus.ERROR if res.infra else ArtifactStatus.FAILED)
        stats = {**res.stats, **({"error": res.infra} if res.infra else {})} or None
        digest, size = wheel_digest(res.wheel) if res.wheel else (None, None)
        if res.stats.get("assembled"):
            events.note(f"assembled {sha[:12]}'s wheel from its tree (pure Python: no build)")
        elif res.stats and res.duration_s:
            how = "built" if res.ok else "build failed for"
            events.note(f"{how} {sha[:12]} in {res.duration_s:.1f}s, "
                        f"{describe_stats(res.stats)}")
        triton = triton_requirement(self.s.repo(), sha, recipe.profile, nightly=True)
        if triton:
            settings = {**settings, "extra": [triton]}
        row = self.s.artifacts.save(NewArtifact(
            key, sha, ArtifactKind.SOURCE, status, settings,
            path=str(res.wheel) if res.wheel else None, sha256=digest, size=size,
            log_path=str(res.log_path), log_tail=res.log_tail, duration_s=res.duration_s,
            stats=stats))
        self.s.publish(row)
        return row
