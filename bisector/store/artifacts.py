"""Artifacts (wheels, overlays, failed builds) and the index-to-commit cache of prebuilt wheels.

An artifact row is keyed by its content key, so two processes that obtain the same artifact
write one row: a concurrent insert turns into an update of the row the other one made.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from bisector.base.kinds import ArtifactKind, ArtifactStatus
from bisector.store import models as m
from bisector.store.db import Store
from bisector.store.records import ArtifactRecord, ArtifactUse, NewArtifact


def _record(a: m.Artifact) -> ArtifactRecord:
    return ArtifactRecord(
        id=a.id, key=a.key, commit_sha=a.commit_sha, kind=ArtifactKind(a.kind),
        status=ArtifactStatus(a.status), path=a.path, settings=dict(a.settings or {}),
        sha256=a.sha256, size=a.size, log_path=a.log_path, log_tail=a.log_tail,
        duration_s=a.duration_s or 0.0, stats=dict(a.stats) if a.stats else None)


class ArtifactStore:
    """The artifact queries the provider needs, bound to one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, key: str) -> ArtifactRecord | None:
        with self.store.session() as s:
            a = s.scalar(select(m.Artifact).where(m.Artifact.key == key))
            return _record(a) if a is not None else None

    def by_id(self, artifact_id: int) -> ArtifactRecord | None:
        with self.store.session() as s:
            a = s.get(m.Artifact, artifact_id)
            return _record(a) if a is not None else None

    def for_commits(self, shas: Iterable[str]) -> list[ArtifactRecord]:
        wanted = list(shas)
        out: list[ArtifactRecord] = []
        with self.store.session() as s:
            for i in range(0, len(wanted), 500):  # keep the IN list within every backend's limit
                out += [_record(a) for a in s.scalars(
                    select(m.Artifact).where(m.Artifact.commit_sha.in_(wanted[i:i + 500])))]
        return out

    def save(self, new: NewArtifact) -> ArtifactRecord:
        fields = {k: (v.value if isinstance(v, ArtifactKind | ArtifactStatus) else v)
                  for k, v in asdict(new).items()}
        for attempt in range(2):
            try:
                with self.store.session() as s:
                    a = s.scalar(select(m.Artifact).where(m.Artifact.key == new.key))
                    if a is None:
                        a = m.Artifact(**fields)
                        s.add(a)
                    else:
                        for k, v in fields.items():
                            setattr(a, k, v)
                    s.flush()
                    return _record(a)
            except IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def last_uses(self) -> list[ArtifactUse]:
        """Every artifact with the newest of its creation and the oracle runs made on it."""
        runs = (select(m.RunRow.artifact_id, func.max(m.RunRow.finished_at).label("at"))
                .where(m.RunRow.artifact_id.is_not(None))
                .group_by(m.RunRow.artifact_id).subquery())
        q = (select(m.Artifact.key, m.Artifact.commit_sha, m.Artifact.kind, m.Artifact.status,
                    m.Artifact.created_at, runs.c.at)
             .outerjoin(runs, runs.c.artifact_id == m.Artifact.id))
        with self.store.session() as s:
            return [ArtifactUse(key, sha, ArtifactKind(kind), ArtifactStatus(status),
                                max(_utc(made), _utc(ran) if ran is not None else _utc(made)))
                    for key, sha, kind, status, made, ran in s.execute(q)]

    # -- the prebuilt-wheel cache -------------------------------------------------------------

    def prebuilt_cache(self) -> dict[str, dict[str, Any]]:
        with self.store.session() as s:
            return {r.url: dict(r.data) for r in s.scalars(select(m.PrebuiltRow))}

    def remember_prebuilts(self, wheels: Iterable[dict[str, Any]]) -> None:
        for d in wheels:
            h = hashlib.sha256(str(d["url"]).encode()).hexdigest()
            try:
                with self.store.session() as s:
                    if s.scalar(select(m.PrebuiltRow.id).where(m.PrebuiltRow.url_hash == h)):
                        continue
                    s.add(m.PrebuiltRow(url=d["url"], url_hash=h, filename=d["filename"],
                                        kind=d["kind"], version=d["version"],
                                        commit_sha=d.get("commit"), data=d))
            except IntegrityError:
                continue  # another process cached the same wheel


def _utc(t: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything the store writes is UTC."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t
