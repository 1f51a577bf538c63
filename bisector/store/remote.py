"""Which object of a team's bucket holds which artifact (``remote_object`` rows).

The object store names a wheel by its sha256; this table, in the store every box shares, is
what says which artifact key that object serves and what its bytes must hash to. A box never
trusts a digest read from the bucket itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from bisector.store import models as m
from bisector.store.db import Store


@dataclass(frozen=True)
class RemoteRecord:
    bucket: str
    artifact_key: str
    object_key: str
    sha256: str
    size: int
    filename: str
    created_at: datetime


def _record(r: m.RemoteObject) -> RemoteRecord:
    made = r.created_at if r.created_at.tzinfo else r.created_at.replace(tzinfo=UTC)
    return RemoteRecord(r.bucket, r.artifact_key, r.object_key, r.sha256, r.size, r.filename,
                        made)


def find(store: Store, bucket: str, artifact_key: str) -> RemoteRecord | None:
    with store.session() as s:
        r = s.scalar(select(m.RemoteObject).where(m.RemoteObject.bucket == bucket,
                                                  m.RemoteObject.artifact_key == artifact_key))
        return _record(r) if r is not None else None


def record(store: Store, rec: RemoteRecord) -> None:
    """Remember an uploaded object; a second box that uploaded the same key first wins (the
    same key is the same build, so the same bytes or an equally checked other build)."""
    try:
        with store.session() as s:
            if s.scalar(select(m.RemoteObject.id).where(
                    m.RemoteObject.bucket == rec.bucket,
                    m.RemoteObject.artifact_key == rec.artifact_key)) is None:
                s.add(m.RemoteObject(bucket=rec.bucket, artifact_key=rec.artifact_key,
                                     object_key=rec.object_key, sha256=rec.sha256,
                                     size=rec.size, filename=rec.filename,
                                     created_at=rec.created_at))
    except IntegrityError:
        pass


def listed(store: Store, bucket: str) -> list[RemoteRecord]:
    with store.session() as s:
        return [_record(r) for r in s.scalars(
            select(m.RemoteObject).where(m.RemoteObject.bucket == bucket)
            .order_by(m.RemoteObject.created_at))]


def forget(store: Store, bucket: str, artifact_keys: list[str]) -> None:
    with store.session() as s:
        s.execute(delete(m.RemoteObject).where(m.RemoteObject.bucket == bucket,
                                               m.RemoteObject.artifact_key.in_(artifact_keys)))
