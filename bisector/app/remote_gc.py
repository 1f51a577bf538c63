"""The team's object store in ``bisect du`` and ``bisect gc --remote``.

A bucket of PyTorch wheels grows by a GB or more per commit built, and no box's local ``gc``
sees it. Its objects are listed from the SQL store (``remote_object`` rows), not from the
bucket: the rows say which artifact each object serves, so the same rules as the local cache
apply. What an unfinished bisection of this store needs (its candidates' artifacts, running or
interrupted) is never removed, nor what was used in the last ``GC_GRACE_S``; then whatever is
older than the age asked, then least recently used objects until the bucket fits the size
asked (:func:`bisector.app.gc.choose`, the local cache's rule). A removed object's rows go
first, so no box starts to download an object that is going; an object another kept row
still names (the same bytes built for two settings) stays. Only keys bisector uploads under
the configured prefix are ever deleted: a row naming another key (another team's prefix, a
hand-edited row) is kept and said, never trusted to pick what goes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bisector.app import disk, gc
from bisector.app.disk import Item
from bisector.artifacts.remote import Remote
from bisector.base import defaults
from bisector.base.errors import UsageError
from bisector.run.policy import Policy
from bisector.store import remote as remote_rows
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store
from bisector.store.remote import RemoteRecord

KIND = "wheels"  # the local cache's kind, so gc's rule and its words apply as they are


def _items(store: Store, bucket: str) -> list[tuple[Item, RemoteRecord]]:
    """Each recorded object as a gc item: last used when its artifact was last used (made,
    or an oracle run on it, on any box) or uploaded, whichever is newer."""
    uses = {u.key: u.last_used.timestamp() for u in ArtifactStore(store).last_uses()}
    return [(Item(KIND, Path(r.object_key), r.size, 1,
                  max(r.created_at.timestamp(), uses.get(r.artifact_key, 0.0))), r)
            for r in remote_rows.listed(store, bucket)]


def configured(policy: Policy, warn: Callable[[str], None]) -> Remote:
    """The bucket the command was given (``--artifacts``, ...: run/policy.py), or a one-line
    error."""
    bucket = policy.artifacts
    if bucket is None:
        raise UsageError("gc --remote needs the team's object store: give --artifacts "
                         "s3://BUCKET/PREFIX (or set BISECTOR_ARTIFACTS)")
    return Remote(bucket, warn)


def du(store: Store, policy: Policy) -> dict[str, Any] | None:
    """What ``bisect du`` says of the command's bucket (None: none), from the store alone,
    no request to the bucket."""
    given = policy.artifacts
    if given is None:
        return None
    bucket = given.url
    items = [i for i, _ in _items(store, bucket)]
    times = [i.last_used for i in items]
    return {"bucket": bucket, "objects": len(items), "bytes": sum(i.bytes for i in items),
            "oldest_use": disk.iso(min(times)) if times else None,
            "newest_use": disk.iso(max(times)) if times else None}


def collect(store: Store, remote: Remote, *, max_size: int | None, older_than_s: float | None,
            dry_run: bool, now: float | None = None,
            grace_s: float = defaults.GC_GRACE_S) -> gc.Removal:
    now = time.time() if now is None else now
    bucket = remote.bucket.url
    pairs = _items(store, bucket)
    need = gc.needs(store)
    for item, row in pairs:
        if not remote.bucket.owns(row.object_key):
            item.protected = (f"its key is outside {bucket}/sha256/ (gc --remote deletes only "
                              f"what it uploads there): check the remote_object rows that "
                              f"name them")
        elif row.artifact_key in need.keys:
            item.protected = need.keys[row.artifact_key]
        elif item.last_used > now - grace_s:
            item.protected = f"used in the last {grace_s / 60:.0f} minutes"
    removal = gc.choose([i for i, _ in pairs], max_size=max_size, older_than_s=older_than_s,
                        now=now)
    removal.dry_run = dry_run
    if dry_run or not removal.remove:
        return removal
    going = {id(i) for i in removal.remove}
    rows = [r for i, r in pairs if id(i) in going]
    kept = {r.sha256 for i, r in pairs if id(i) not in going}
    remote_rows.forget(store, bucket, [r.artifact_key for r in rows])
    objects = sorted({r.object_key for r in rows if r.sha256 not in kept})
    try:
        remote.remove(objects)
    except Exception as e:
        removal.errors.append(f"{bucket}: {len(objects)} object(s) not deleted ({e}); no box "
                              f"will use them, and delete them by hand or run gc again")
    return removal
