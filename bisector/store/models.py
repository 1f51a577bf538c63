"""SQLAlchemy 2.0 typed models. The Alembic migrations are the only source of schema; a test
compares these models with the migrated database and fails when they drift.

The words mean one thing each: a *run* is one execution of an oracle, a fact about (commit,
oracle hash, environment fingerprint) shared by every bisection; a *verdict* is good, bad or
skip and nothing else; a *probe* is one bisection's use of a run, in order, which is what
``bisect log`` replays, with the verdict that run meant for it; a *bisection* is the whole job.
Runs store their outcome raw (pass/fail/skip) so bisections with opposite polarity (find-fix)
can share them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Connection,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    event,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from bisector.store import bisection_text, fulltext

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class OracleRow(Base):
    """The exact bytes of every oracle ever used, so any run can be reproduced."""

    __tablename__ = "oracle"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    content: Mapped[str] = mapped_column(Text)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Bisection(Base):
    __tablename__ = "bisection"
    __table_args__ = (
        # `bisect list`'s filters (store/queries.py): each one an index's range or equality.
        Index("ix_bisection_created_at", "created_at"),
        Index("ix_bisection_culprit_sha", "culprit_sha"),
        Index("ix_bisection_culprit_inside", "culprit_inside"),
        Index("ix_bisection_oracle_name", "oracle_name"),
        Index("ix_bisection_oracle_sha256", "oracle_sha256"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )
    state: Mapped[str] = mapped_column(String(20), index=True)
    repo_path: Mapped[str] = mapped_column(Text)
    good_ref: Mapped[str] = mapped_column(String(250))
    bad_ref: Mapped[str] = mapped_column(String(250))
    good_sha: Mapped[str] = mapped_column(String(40))
    bad_sha: Mapped[str] = mapped_column(String(40))
    oracle_name: Mapped[str] = mapped_column(String(200))
    oracle_sha256: Mapped[str] = mapped_column(ForeignKey("oracle.sha256"))
    polarity: Mapped[str] = mapped_column(String(10))
    env_fingerprint: Mapped[str] = mapped_column(String(64))
    environment: Mapped[dict[str, Any]] = mapped_column(JSON)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    notes: Mapped[list[Any]] = mapped_column(JSON)
    n_candidates: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    culprit_sha: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # The commit inside a merge culprit the search named (result["into_merge"]["sha"]), beside
    # it so `bisect list --culprit` finds either from an index.
    culprit_inside: Mapped[str | None] = mapped_column(String(40), nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    # {"round": R, "positions": [...]}: the probes dispatched and not all recorded yet.
    in_flight: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # `bisect cancel`: the coordinator stops at its next look (``resume`` clears it).
    cancel_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True),
                                                                 nullable=True)


class Disagreement(Base):
    """Two finished bisections of one oracle whose answers cannot both hold (store/disagree.py):
    kept when the later one finishes, so `bisect list --disagree` reads a few rows instead of
    joining every culprit to every range that holds it."""

    __tablename__ = "disagreement"
    __table_args__ = (Index("ix_disagreement_other", "other"),)
    named: Mapped[int] = mapped_column(ForeignKey("bisection.id", ondelete="CASCADE"),
                                       primary_key=True)  # named the culprit
    other: Mapped[int] = mapped_column(ForeignKey("bisection.id", ondelete="CASCADE"),
                                       primary_key=True)  # its range holds it; another answer


class Candidate(Base):
    """The frozen candidate list, so a resume searches the same commits even if refs moved."""

    __tablename__ = "candidate"
    # From a commit to the ranges that hold it: `bisect list --disagree` (store/disagree.py).
    __table_args__ = (Index("ix_candidate_sha", "sha", "bisection_id", "position"),)
    bisection_id: Mapped[int] = mapped_column(
        ForeignKey("bisection.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    sha: Mapped[str] = mapped_column(String(40))


class Artifact(Base):
    """An installable build of a commit (or the record that building it failed).

    Status ``ok`` and ``failed`` are facts reused by every later bisection; ``error`` (the
    build could not run: engine down, timed out) is kept for the report and retried.
    """

    __tablename__ = "artifact"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    commit_sha: Mapped[str] = mapped_column(String(40), index=True)
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(10))
    path: Mapped[str | None] = mapped_column(Text, nullable=True)
    sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    size: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    log_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    log_tail: Mapped[str | None] = mapped_column(Text, nullable=True)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # How the build went, beside what it made: ccache hits and misses of that build.
    stats: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class RemoteObject(Base):
    """An artifact's wheel in a team's object store (``--artifacts``): the object named by
    its sha256, which every box checks a download against (this row, never the bucket, says
    what the bytes must be)."""

    __tablename__ = "remote_object"
    __table_args__ = (UniqueConstraint("bucket", "artifact_key", name="uq_remote_object_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bucket: Mapped[str] = mapped_column(String(400))
    artifact_key: Mapped[str] = mapped_column(String(64))
    object_key: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size: Mapped[int] = mapped_column(BigInteger)
    filename: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RunRow(Base):
    """One oracle run: a fact about (commit, oracle, environment), reusable by any bisection.
    Its ``outcome`` is the oracle's raw pass/fail/skip, not a verdict: what it means depends on
    the polarity of the bisection whose probe uses it."""

    __tablename__ = "run"
    __table_args__ = (
        Index("ix_run_key", "commit_sha", "oracle_sha256", "env_fingerprint"),
        # One reusable fact per key; non-reusable runs (timeouts, infrastructure) may repeat.
        Index("uq_run_key", "commit_sha", "oracle_sha256", "env_fingerprint", unique=True,
              sqlite_where=text("reusable"), postgresql_where=text("reusable")),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    commit_sha: Mapped[str] = mapped_column(String(40))
    oracle_sha256: Mapped[str] = mapped_column(ForeignKey("oracle.sha256"))
    env_fingerprint: Mapped[str] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(10))
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    reusable: Mapped[bool] = mapped_column(Boolean, default=True)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    artifact_id: Mapped[int | None] = mapped_column(ForeignKey("artifact.id"), nullable=True)
    stdout_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    stderr_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    output_tail: Mapped[str] = mapped_column(Text, default="")
    facts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


def _run_text(_table: Any, conn: Connection, **_: Any) -> None:
    """A store made in one step gets the failure text's index as migration 0013 makes it."""
    fulltext.install(conn)


event.listen(RunRow.__table__, "after_create", _run_text)


def _bisection_text(_table: Any, conn: Connection, **_: Any) -> None:
    """A store made in one step gets the bisections' failure documents as migration 0016
    makes them (their trigger is on ``probe``)."""
    bisection_text.install(conn)


class Probe(Base):
    """One step of one bisection: which commit, which run, the verdict (good/bad/skip) that run
    meant for this bisection, and whether it was paid for now or reused."""

    __tablename__ = "probe"
    __table_args__ = (
        UniqueConstraint("bisection_id", "seq"),
        # From a run to the bisections that used it: `list --text`, `bisect commit`.
        Index("ix_probe_run_id", "run_id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisection_id: Mapped[int] = mapped_column(
        ForeignKey("bisection.id", ondelete="CASCADE"), index=True
    )
    seq: Mapped[int] = mapped_column(Integer)
    position: Mapped[int] = mapped_column(Integer)
    commit_sha: Mapped[str] = mapped_column(String(40))
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"))
    verdict: Mapped[str] = mapped_column(String(10))
    reused: Mapped[bool] = mapped_column(Boolean, default=False)
    # The search step this probe belonged to: K probes of one round ran at once.
    round: Mapped[int | None] = mapped_column(Integer, nullable=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


event.listen(Probe.__table__, "after_create", _bisection_text)


class GitCommit(Base):
    """What git said of a bisection's culprit when it was named (subject, author, pull request),
    so `bisect list --author/--culprit #PR` and `bisect commit` ask the store, not a clone that
    may be gone."""

    __tablename__ = "git_commit"
    # Culprits named before the first facts were kept lack them (store/commits.py).
    __table_args__ = (Index("ix_git_commit_created_at", "created_at"),)
    sha: Mapped[str] = mapped_column(String(40), primary_key=True)
    subject: Mapped[str] = mapped_column(Text)
    author: Mapped[str] = mapped_column(Text)
    author_email: Mapped[str] = mapped_column(Text)
    authored_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    pr: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CommitPath(Base):
    """A path a culprit changed, and every folder above it (``torch``, ``torch/_inductor``,
    ``torch/_inductor/lowering.py``): `list --touching FOLDER` is then one equality on an
    index, the same on every database and collation."""

    __tablename__ = "commit_path"
    __table_args__ = (Index("ix_commit_path_path", "path", "sha"),)
    sha: Mapped[str] = mapped_column(ForeignKey("git_commit.sha", ondelete="CASCADE"),
                                     primary_key=True)
    path: Mapped[str] = mapped_column(String(1000), primary_key=True)
    folder: Mapped[bool] = mapped_column(Boolean, default=False)  # a folder above a file


class PrebuiltRow(Base):
    """A wheel seen on an index and the commit it maps to: read once, reused by every plan."""

    __tablename__ = "prebuilt"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    url_hash: Mapped[str] = mapped_column(String(64), unique=True)
    filename: Mapped[str] = mapped_column(String(300))
    kind: Mapped[str] = mapped_column(String(20))
    version: Mapped[str] = mapped_column(String(100))
    commit_sha: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    checked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Claim(Base):
    """A run being made right now by ``owner``: another process waits for it instead of running
    the same (commit, oracle, environment) again."""

    __tablename__ = "claim"
    commit_sha: Mapped[str] = mapped_column(String(40), primary_key=True)
    oracle_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    env_fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WatchResult(Base):
    """One oracle run of the nightly watch against the newest torch of a suite. The unique key
    is what makes ``bisect tick`` idempotent: a second tick (or a tick on another host) finds
    the row and runs nothing. ``state`` is ``running`` while ``owner`` judges it."""

    __tablename__ = "watch_result"
    __table_args__ = (UniqueConstraint("suite", "oracle", "torch_version", "commit_sha"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200))
    oracle: Mapped[str] = mapped_column(String(200))
    torch_version: Mapped[str] = mapped_column(String(100))
    commit_sha: Mapped[str] = mapped_column(String(40))
    git_version: Mapped[str | None] = mapped_column(String(40), nullable=True)
    source: Mapped[str] = mapped_column(Text)
    oracle_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    state: Mapped[str] = mapped_column(String(10))
    verdict: Mapped[str | None] = mapped_column(String(10), nullable=True)
    outcome: Mapped[str | None] = mapped_column(String(10), nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    output_tail: Mapped[str] = mapped_column(Text, default="")
    facts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Where the torch's commit lies on the main line (its ancestors, git rev-list --count):
    # builds are ordered by it, then by version, never by row id (None: not counted yet).
    position: Mapped[int | None] = mapped_column(Integer, nullable=True)


class WatchFlip(Base):
    """An oracle that changed its answer between two results of a suite. The unique key makes
    "start one bisection per flip" hold however many ticks see the flip at once."""

    __tablename__ = "watch_flip"
    __table_args__ = (UniqueConstraint("suite", "oracle", "from_commit", "to_commit"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200))
    oracle: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(12))  # regression | fix | slowdown | speedup
    from_commit: Mapped[str] = mapped_column(String(40))
    to_commit: Mapped[str] = mapped_column(String(40))
    from_result_id: Mapped[int] = mapped_column(ForeignKey("watch_result.id"))
    to_result_id: Mapped[int] = mapped_column(ForeignKey("watch_result.id"))
    bisection_id: Mapped[int | None] = mapped_column(
        ForeignKey("bisection.id", ondelete="SET NULL"), nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)  # why no bisection
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    flip_notified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True),
                                                              nullable=True)
    end_notified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True),
                                                             nullable=True)
    # A performance step's numbers (change, p-value, medians, metric, the flip it undoes).
    facts: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class ProbeTask(Base):
    """One probe handed to the workers: the coordinator writes it, a worker runs it.

    ``attempt`` fences every write of a result: a worker bumps it when it starts (a retry of a
    job whose worker stopped heartbeating bumps it again), and its result is written only by a
    compare-and-set on the attempt it started, so a killed worker's late result never lands.
    ``recorded``: the coordinator has appended it to the bisection's probes."""

    __tablename__ = "probe_task"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisection_id: Mapped[int] = mapped_column(
        ForeignKey("bisection.id", ondelete="CASCADE"), index=True)
    round: Mapped[int] = mapped_column(Integer)
    position: Mapped[int] = mapped_column(Integer)
    commit_sha: Mapped[str] = mapped_column(String(40))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[str] = mapped_column(String(10), index=True)
    job_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # A source build sent ahead to a build worker (its job holds the probe job's lock).
    build_job_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    worker: Mapped[str | None] = mapped_column(String(200), nullable=True)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"), nullable=True)
    verdict: Mapped[str | None] = mapped_column(String(10), nullable=True)
    reused: Mapped[bool] = mapped_column(Boolean, default=False)
    recorded: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                 onupdate=utcnow)


class WorkerRow(Base):
    """A ``bisect worker`` process: what it serves, what it runs now, and its heartbeat (a
    store with a live one gets its probes enqueued instead of run in-process)."""

    __tablename__ = "worker"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    owner: Mapped[str] = mapped_column(String(200))
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    gpu: Mapped[str | None] = mapped_column(String(20), nullable=True)
    queues: Mapped[list[Any]] = mapped_column(JSON)
    # What it offers (queue/routing.Offer.as_dict); null for workers before environments.
    offer: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    state: Mapped[str] = mapped_column(String(10))
    task_id: Mapped[int | None] = mapped_column(
        ForeignKey("probe_task.id", ondelete="SET NULL"), nullable=True)
    jobs: Mapped[int] = mapped_column(Integer, default=0)  # jobs ended, probes and builds
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
