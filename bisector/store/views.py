"""Read-side queries for reports: a bisection's probes with their runs and artifacts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from bisector.store import models as m
from bisector.store.artifacts import _record as artifact_record
from bisector.store.db import Store
from bisector.store.records import ArtifactRecord


@dataclass(frozen=True)
class ProbeView:
    seq: int
    position: int
    commit_sha: str
    verdict: str
    reused: bool
    round: int | None
    outcome: str
    exit_code: int | None
    reason: str
    duration_s: float
    stdout_path: str | None
    stderr_path: str | None
    output_tail: str
    facts: dict[str, Any]
    artifact: ArtifactRecord | None
    started_at: datetime | None = None  # when the probe began (the timeline of phases)


def probe_views(store: Store, bisection_id: int) -> list[ProbeView]:
    with store.session() as s:
        rows = s.execute(
            select(m.Probe, m.RunRow, m.Artifact)
            .join(m.RunRow, m.Probe.run_id == m.RunRow.id)
            .outerjoin(m.Artifact, m.RunRow.artifact_id == m.Artifact.id)
            .where(m.Probe.bisection_id == bisection_id)
            .order_by(m.Probe.seq)).all()
        return [ProbeView(p.seq, p.position, p.commit_sha, p.verdict, p.reused, p.round,
                          v.outcome, v.exit_code, v.reason, v.duration_s, v.stdout_path,
                          v.stderr_path, v.output_tail, dict(v.facts or {}),
                          artifact_record(a) if a is not None else None, v.started_at)
                for p, v, a in rows]


def candidate_at(store: Store, bisection_id: int, position: int) -> str | None:
    """The commit at ``position`` of a bisection's frozen walk (one row, not the list): its 0
    is the good endpoint searched from, the merge-base when the good ref is no ancestor of the
    bad one, which ``bisect log`` must name for git to replay the same search."""
    with store.session() as s:
        sha: str | None = s.scalar(select(m.Candidate.sha).where(
            m.Candidate.bisection_id == bisection_id, m.Candidate.position == position))
        return sha


def run_artifacts(store: Store, run_ids: list[int]) -> list[tuple[int, dict[str, Any],
                                                                   ArtifactRecord]]:
    """(run id, facts, artifact) of these runs that ran on an artifact: confirmation's runs (the
    culprit, its parent, the revert) are no probes, yet a build one of them paid for is one."""
    if not run_ids:
        return []
    with store.session() as s:
        rows = s.execute(
            select(m.RunRow, m.Artifact)
            .join(m.Artifact, m.RunRow.artifact_id == m.Artifact.id)
            .where(m.RunRow.id.in_(run_ids))
            .order_by(m.RunRow.id)).all()
        return [(v.id, dict(v.facts or {}), artifact_record(a)) for v, a in rows]
