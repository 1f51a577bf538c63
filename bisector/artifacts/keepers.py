"""Where a made package is kept, apart from how it is made (mozregression keeps its download
manager apart from the fetch configs that only say where a build is).

A keeper is asked by artifact key and filled after making: this box's cache (the SQL row and
its file on disk), the team's object store (:class:`Bucket`, ``--artifacts``), and the stored
fact that a commit does not build. :class:`Keeper` is what the ways of the chain
(``sources.py``, ``building.py``) see of them: ``get(key)`` (here, else from the bucket) and
``put(row)`` (upload what this box made). ``sources.Kept`` and ``sources.Broken`` are the
keepers' places in the chain (``provider.WAYS``). Nothing but this module names the bucket.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from bisector.artifacts import remote
from bisector.artifacts.build import SUMS
from bisector.artifacts.cache import known_sha256, wheel_dir
from bisector.artifacts.installable import InstalledBase
from bisector.artifacts.obtained import Answer, Obtained, answer, usable
from bisector.artifacts.remote import Remote, wheel_name
from bisector.base import defaults
from bisector.base.events import Events, Every
from bisector.base.kinds import ArtifactKind, ArtifactStatus, Way
from bisector.infra import cancel
from bisector.store import remote as remote_rows
from bisector.store.artifacts import ArtifactStore
from bisector.store.records import ArtifactRecord

# What the object store holds: wheels (an overlay is remade from its base in seconds, an
# installed torch is the box's own).
SHARED_KINDS = frozenset({ArtifactKind.SOURCE, ArtifactKind.PREBUILT})


@contextmanager
def downloading(events: Events, name: str) -> Iterator[Callable[[int, int | None], None]]:
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
            events.download(name, done, total)

    try:
        yield progress
    finally:
        events.download(name, fetched, fetched)


@dataclass(frozen=True)
class Found:
    """A stored row this box can act on, and the keeper it came from (CACHED: this box,
    BUCKET: another box's upload)."""

    row: ArtifactRecord
    way: Way


class Bucket:
    """The team's object store as the keeper uses it: ``get`` a row's wheel into this box's
    cache (its bytes checked against the digest in SQL, never the bucket's word), ``put`` a
    wheel this box made (once per key; a store that is down keeps it local, one warning)."""

    def __init__(self, client: Remote, artifacts: ArtifactStore, events: Events) -> None:
        self.client, self.artifacts, self.events = client, artifacts, events
        self.url = client.bucket.url

    def holds(self, a: ArtifactRecord) -> bool:
        """Whether ``a`` is an object this store may hold (an OK wheel of a shared kind)."""
        return (a.status is ArtifactStatus.OK and a.kind in SHARED_KINDS
                and wheel_name(a.path) is not None)

    def get(self, a: ArtifactRecord) -> ArtifactRecord | None:
        """``a``'s wheel, made by another box, from the object store into this box's cache;
        None when there is none, the store is down, or its bytes are not those recorded.
        The digest the bytes must have is the one recorded with the object (SQL, never the
        bucket's word): a row another box rebuilt before that rule kept its own digest, and
        the object still serves it."""
        if not self.holds(a):
            return None
        rec = remote_rows.find(self.artifacts.store, self.url, a.key)
        if rec is None:
            return None
        name = wheel_name(a.path)
        assert name is not None
        dest = wheel_dir(a.key) / name
        with remote.in_flight(self.url, rec.object_key):  # one at a time
            here = dest.is_file() and known_sha256(dest) == rec.sha256
            if not here and not self._download(a, rec, dest):
                return None
        return replace(a, path=str(dest), sha256=rec.sha256, size=rec.size)

    def _download(self, a: ArtifactRecord, rec: remote_rows.RemoteRecord, dest: Path) -> bool:
        name = dest.name
        self.events.phase(a.commit_sha, f"downloading {name} from {self.url}")
        with downloading(self.events, name) as progress:
            if not self.client.fetch(rec.object_key, rec.sha256, dest, rec.size, progress):
                return False
        if (sums := dest.parent / SUMS).exists():  # this box's own build, replaced
            sums.write_text(f"{rec.sha256}  {name}\n")
        self.events.note(f"downloaded {a.commit_sha[:12]}'s wheel from {self.url} "
                         f"({rec.size / 2**20:.1f} MiB, sha256 checked)")
        return True

    def put(self, a: ArtifactRecord) -> None:
        """Upload a wheel this box holds, once per key."""
        if not self.holds(a) or not a.sha256 or not self.client.usable():
            return
        if remote_rows.find(self.artifacts.store, self.url, a.key) is not None:
            return
        assert a.path is not None
        path = Path(a.path)
        if not path.is_file():
            return
        size = path.stat().st_size
        key = self.client.push(path, a.sha256, size)
        if key is not None:
            remote_rows.record(self.artifacts.store, remote_rows.RemoteRecord(
                self.url, a.key, key, a.sha256, size, path.name, remote.now()))

    def held_elsewhere(self, key: str, digest: str) -> remote_rows.RemoteRecord | None:
        """The bucket's record of ``key`` when it holds a wheel other than ``digest``."""
        rec = remote_rows.find(self.artifacts.store, self.url, key)
        return rec if rec is not None and rec.sha256 != digest else None

    def listed(self) -> set[str]:
        """The artifact keys the bucket holds (a wheel another box made is a base here too)."""
        return {r.artifact_key for r in remote_rows.listed(self.artifacts.store, self.url)}


class Keeper:
    """The keepers as the ways see them: ``get`` by key (this box's cache, then the team's
    object store), ``put`` after making."""

    def __init__(self, artifacts: ArtifactStore, events: Events, client: Remote | None,
                 installed: InstalledBase | None = None) -> None:
        self.artifacts, self.installed = artifacts, installed
        self._bucket = None if client is None else Bucket(client, artifacts, events)

    def get(self, key: str) -> Found | None:
        """The stored artifact of ``key`` when this box can act on it: its wheel on disk,
        else fetched from the team's object store."""
        a = self.artifacts.get(key)
        if a is None:
            return None
        if self.here(a):
            return Found(a, Way.CACHED)
        fetched = self.from_bucket(a)
        return Found(fetched, Way.BUCKET) if fetched is not None else None

    def here(self, a: ArtifactRecord) -> bool:
        """``a`` can be acted on from this disk: a known failure, or its wheel, and (with an
        object store) that wheel's bytes are the row's. A box that built the commit again
        holds other bytes under the same path (a build differs to the byte), which the row,
        keeping the bucket's digest, does not name: the bucket's object replaces them."""
        if not usable(a):
            return False
        if self._bucket is None or not a.sha256 or not self._bucket.holds(a):
            return True
        assert a.path is not None
        return known_sha256(Path(a.path)) == a.sha256

    def from_bucket(self, a: ArtifactRecord) -> ArtifactRecord | None:
        return self._bucket.get(a) if self._bucket is not None else None

    def put(self, a: ArtifactRecord) -> None:
        if self._bucket is not None:
            self._bucket.put(a)

    def held_elsewhere(self, key: str, digest: str) -> remote_rows.RemoteRecord | None:
        """The bucket's record of ``key`` when it holds a wheel other than ``digest`` (this
        box built the commit again while the store was down, or raced another box)."""
        return self._bucket.held_elsewhere(key, digest) if self._bucket is not None else None

    def shared_keys(self) -> set[str]:
        """The artifact keys the team's object store holds (none without one)."""
        return self._bucket.listed() if self._bucket is not None else set()

    def answer(self, found: Found) -> Answer:
        """The answer a found row gives, after uploading it (made while the object store was
        down, say); it says which keeper it came from."""
        self.put(found.row)
        got = answer(found.row, self.installed)
        return replace(got, way=found.way) if isinstance(got, Obtained) else got
