"""What the store hands out: plain frozen dataclasses, never ORM objects.

Callers above the store never hold a session or a lazily-loaded row, so they cannot run SQL by
accident, and a record read in one thread can be used in another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bisector.base.kinds import ArtifactKind, ArtifactStatus, State
from bisector.core.verdict import Outcome


@dataclass(frozen=True)
class BisectionRecord:
    id: int
    state: State
    repo_path: str
    good_ref: str
    bad_ref: str
    good_sha: str
    bad_sha: str
    oracle_name: str
    oracle_sha256: str
    polarity: str
    env_fingerprint: str
    environment: dict[str, Any]
    settings: dict[str, Any]
    notes: list[Any]
    n_candidates: int
    owner: str | None
    heartbeat_at: datetime | None
    result: dict[str, Any]
    culprit_sha: str | None
    message: str | None
    created_at: datetime
    in_flight: dict[str, Any] | None = None


@dataclass(frozen=True)
class OracleRecord:
    sha256: str
    name: str
    content: str
    meta: dict[str, Any]


@dataclass(frozen=True)
class NewArtifact:
    """An artifact about to be stored (or updated, by key)."""

    key: str
    commit_sha: str
    kind: ArtifactKind
    status: ArtifactStatus
    settings: dict[str, Any]
    path: str | None = None
    sha256: str | None = None
    size: int | None = None
    log_path: str | None = None
    log_tail: str | None = None
    duration_s: float = 0.0
    stats: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class ArtifactRecord(NewArtifact):
    """An artifact as stored: what was made, and its row id."""

    id: int


@dataclass(frozen=True)
class ArtifactUse:
    """An artifact and the last time the store saw it used (made, or an oracle run on it):
    what ``bisect gc`` orders the wheel cache by, beside the files' own times."""

    key: str
    commit_sha: str
    kind: ArtifactKind
    status: ArtifactStatus
    last_used: datetime


@dataclass(frozen=True)
class RunRecord:
    """One oracle run as stored: a fact about (commit, oracle, environment)."""

    id: int
    commit_sha: str
    outcome: Outcome
    reason: str
    reusable: bool
    exit_code: int | None = None
    duration_s: float = 0.0
    output_tail: str = ""
    # The failure line recorded when it ran ("" none; None: not recorded, an older run):
    # what a bisection hunting one failure compares (core/signature.failure_of).
    failure: str | None = None
    started_at: datetime | None = None  # pairs a performance run with its references


@dataclass(frozen=True)
class NewRun:
    commit_sha: str
    outcome: Outcome
    reason: str
    reusable: bool
    started_at: datetime
    exit_code: int | None = None
    duration_s: float = 0.0
    artifact_id: int | None = None
    stdout_path: str | None = None
    stderr_path: str | None = None
    output_tail: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProbeRecord:
    seq: int
    position: int
    commit_sha: str
    verdict: str
    reused: bool
    round: int | None
    run: RunRecord
