"""What every source of the chain (``sources.py``, ``building.py``) shares in one run: the SQL
store, the clone, the ranking, the progress, and the team's object store, through which a row's
wheel is fetched (checked against the digest in SQL) and a wheel this box made is published.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import git

from bisector.artifacts import remote
from bisector.artifacts.build import SUMS
from bisector.artifacts.cache import artifact_key, known_sha256, wheel_dir
from bisector.artifacts.obtained import Answer, Obtained, answer, usable
from bisector.artifacts.ranking import Ranking
from bisector.artifacts.remote import Remote, wheel_name
from bisector.base import defaults
from bisector.base.events import Events, Every
from bisector.base.kinds import ArtifactKind, ArtifactStatus
from bisector.infra import cancel
from bisector.store import remote as remote_rows
from bisector.store.artifacts import ArtifactStore
from bisector.store.records import ArtifactRecord

# What the object store holds: wheels (an overlay is remade from its base in seconds, an
# installed torch is the box's own).
SHARED_KINDS = frozenset({ArtifactKind.SOURCE, ArtifactKind.PREBUILT})


def prebuilt_key(sha: str, url: str, sha256: str | None) -> str:
    """The artifact key of ``sha``'s prebuilt wheel at ``url``."""
    return artifact_key("prebuilt", sha, {"url": url, "sha256": sha256})


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

    def keys(self, pos: int, sha: str) -> list[str]:
        """The artifact keys a made package of ``sha`` is stored under, cheapest first: its
        own prebuilt wheel's (when the index has one for ``pos``), then its source build's."""
        pb = self.ranking.prebuilt(pos)
        own = [prebuilt_key(sha, pb.url, pb.sha256)] if pb is not None else []
        return [*own, self.ranking.recipe.source_key(sha)]

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
        if self.local(a):
            return a, ""
        fetched = self.from_remote(a)
        return (fetched, "bucket") if fetched is not None else None

    def local(self, a: ArtifactRecord) -> bool:
        """``a`` can be acted on from this disk: a known failure, or its wheel, and (with an
        object store) that wheel's bytes are the row's. A box that built the commit again
        holds other bytes under the same path (a build differs to the byte), which the row,
        keeping the bucket's digest, does not name: the bucket's object replaces them."""
        if not usable(a):
            return False
        if (self.remote is None or a.status is not ArtifactStatus.OK or not a.sha256
                or a.kind not in SHARED_KINDS):
            return True
        assert a.path is not None
        return known_sha256(Path(a.path)) == a.sha256

    def held_elsewhere(self, key: str, digest: str) -> remote_rows.RemoteRecord | None:
        """The bucket's record of ``key`` when it holds a wheel other than ``digest`` (this
        box built the commit again while the store was down, or raced another box)."""
        if self.remote is None:
            return None
        rec = remote_rows.find(self.artifacts.store, self.remote.bucket.url, key)
        return rec if rec is not None and rec.sha256 != digest else None

    def answer_found(self, found: tuple[ArtifactRecord, str]) -> Answer:
        row, origin = found
        self.publish(row)  # made while the object store was down, say
        got = self.answer(row)
        return replace(got, origin=origin) if origin and isinstance(got, Obtained) else got

    def from_remote(self, a: ArtifactRecord) -> ArtifactRecord | None:
        """``a``'s wheel, made by another box, from the object store into this box's cache;
        None when there is none, the store is down, or its bytes are not those recorded.
        The digest the bytes must have is the one recorded with the object (SQL, never the
        bucket's word): a row another box rebuilt before that rule kept its own digest, and
        the object still serves it."""
        name = wheel_name(a.path)
        if (self.remote is None or a.status is not ArtifactStatus.OK
                or a.kind not in SHARED_KINDS or name is None):
            return None
        rec = remote_rows.find(self.artifacts.store, self.remote.bucket.url, a.key)
        if rec is None:
            return None
        dest = wheel_dir(a.key) / name
        with remote.in_flight(self.remote.bucket.url, rec.object_key):  # one at a time
            here = dest.is_file() and known_sha256(dest) == rec.sha256
            if not here and not self._download(a, rec, dest):
                return None
        return replace(a, path=str(dest), sha256=rec.sha256, size=rec.size)

    def _download(self, a: ArtifactRecord, rec: remote_rows.RemoteRecord, dest: Path) -> bool:
        assert self.remote is not None
        name, url = dest.name, self.remote.bucket.url
        self.events.phase(a.commit_sha, f"downloading {name} from {url}")
        with self.downloading(name) as progress:
            if not self.remote.fetch(rec.object_key, rec.sha256, dest, rec.size, progress):
                return False
        if (sums := dest.parent / SUMS).exists():  # this box's own build, replaced
            sums.write_text(f"{rec.sha256}  {name}\n")
        self.events.note(f"downloaded {a.commit_sha[:12]}'s wheel from {url} "
                         f"({rec.size / 2**20:.1f} MiB, sha256 checked)")
        return True

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
