"""The nightly watch's rows: oracle results per suite, and the flips that start bisections.

Two unique keys carry the whole "idempotent, no leader" promise of ``bisect tick``:

- a result is keyed by (suite, oracle, torch version, commit). A tick claims the key by
  inserting the row (``state = running``, ``owner`` = this process) before it runs the oracle,
  so two ticks never judge the same torch twice; a claim whose owner died is taken over by a
  compare-and-set on the owner seen, as run claims are (``claims.py``).
- a flip is keyed by (suite, oracle, from commit, to commit). Inserting it is what entitles a
  tick to start the bisection, so however many ticks see one flip at once, one bisection starts.

Callers get frozen records, never ORM rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from packaging.version import InvalidVersion, Version
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from bisector.infra.owner import owner_alive
from bisector.store import models as m
from bisector.store.db import Store

RUNNING, DONE = "running", "done"


@dataclass(frozen=True)
class ResultKey:
    suite: str
    oracle: str
    torch_version: str
    commit_sha: str


@dataclass(frozen=True)
class ResultRecord:
    id: int
    key: ResultKey
    git_version: str | None
    source: str
    state: str
    verdict: str | None
    reason: str
    at: datetime
    owner: str | None = None
    outcome: str | None = None
    exit_code: int | None = None
    duration_s: float = 0.0
    output_tail: str = ""
    oracle_sha256: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    position: int | None = None  # the commit's place on the main line (see ``build_order``)


def parse_version(text: str) -> Version:
    """A torch version as PEP 440 orders it (``2.10.0.dev20251120``: the date; a local part
    ``+git1a2b3c4`` segment by segment), never as text; an unreadable one sorts first."""
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def build_order(r: ResultRecord) -> tuple[int, Version, int]:
    """What makes one build newer than another: its commit's place on the main line, then its
    version (a nightly's date, a rebuild of one commit), the row id only between equals. A row
    id alone says when a tick claimed it: a withdrawn nightly is claimed after a newer one."""
    return (-1 if r.position is None else r.position, parse_version(r.key.torch_version), r.id)


@dataclass(frozen=True)
class FlipRecord:
    id: int
    suite: str
    oracle: str
    kind: str  # regression | fix
    from_commit: str
    to_commit: str
    from_result_id: int
    to_result_id: int
    bisection_id: int | None
    message: str | None
    owner: str | None
    at: datetime
    created_at: datetime
    flip_notified_at: datetime | None
    end_notified_at: datetime | None
    facts: dict[str, Any] = field(default_factory=dict)  # a performance step's numbers

    @property
    def performance(self) -> bool:
        return self.kind in PERF_KINDS


# A performance oracle's flips are steps of its series: a slowdown is bisected, a speed-up (a
# fix of an earlier slowdown among them) is only reported, so it never counts as waiting for
# a bisection (``orphaned_flips``, ``unstarted_flips``).
SLOWDOWN, SPEEDUP = "slowdown", "speedup"
PERF_KINDS = (SLOWDOWN, SPEEDUP)
BISECTED = ("regression", "fix", SLOWDOWN)


@dataclass(frozen=True)
class Finding:
    """What a run decided, as the result row keeps it."""

    verdict: str
    outcome: str
    reason: str
    exit_code: int | None
    duration_s: float
    output_tail: str
    oracle_sha256: str
    facts: dict[str, Any]


def _utc(t: datetime | None) -> datetime | None:
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def _result(r: m.WatchResult) -> ResultRecord:
    return ResultRecord(
        id=r.id, key=ResultKey(r.suite, r.oracle, r.torch_version, r.commit_sha),
        git_version=r.git_version, source=r.source, state=r.state, verdict=r.verdict,
        reason=r.reason, at=_utc(r.at) or datetime.now(UTC), owner=r.owner, outcome=r.outcome,
        exit_code=r.exit_code, duration_s=r.duration_s, output_tail=r.output_tail,
        oracle_sha256=r.oracle_sha256, facts=dict(r.facts or {}), position=r.position)


def _flip(f: m.WatchFlip) -> FlipRecord:
    return FlipRecord(
        id=f.id, suite=f.suite, oracle=f.oracle, kind=f.kind, from_commit=f.from_commit,
        to_commit=f.to_commit, from_result_id=f.from_result_id, to_result_id=f.to_result_id,
        bisection_id=f.bisection_id, message=f.message, owner=f.owner,
        at=_utc(f.at) or datetime.now(UTC), created_at=_utc(f.created_at) or datetime.now(UTC),
        flip_notified_at=_utc(f.flip_notified_at), end_notified_at=_utc(f.end_notified_at),
        facts=dict(f.facts or {}))


Claimed = tuple[Literal["mine", "done", "held"], ResultRecord]


def claim_result(store: Store, key: ResultKey, *, source: str, git_version: str | None,
                 me: str, position: int | None = None) -> Claimed:
    """Claim a result before running its oracle: ``mine`` (run it), ``done`` (recorded
    already: run nothing) or ``held`` (a live tick is judging it right now)."""
    now = datetime.now(UTC)
    try:
        with store.session() as s:
            row = m.WatchResult(suite=key.suite, oracle=key.oracle,
                                torch_version=key.torch_version, commit_sha=key.commit_sha,
                                git_version=git_version, source=source, state=RUNNING,
                                reason="", duration_s=0.0, output_tail="", facts={}, owner=me,
                                at=now, position=position)
            s.add(row)
            s.flush()
            return "mine", _result(row)
    except IntegrityError:
        pass
    rec = _find(store, key)
    if rec.state == DONE and not _passing_skip(rec):
        return "done", rec
    if rec.state == DONE:  # the machine failed, not the torch: run it again, once
        with store.session() as s:
            res = s.execute(update(m.WatchResult).where(
                m.WatchResult.id == rec.id, m.WatchResult.state == DONE).values(
                state=RUNNING, owner=me, at=now))
            won = bool(res.rowcount == 1)  # type: ignore[attr-defined]
        return ("mine" if won else "held"), _find(store, key)
    if rec.owner == me:
        return "mine", rec
    if owner_alive(rec.owner, rec.at):
        return "held", rec
    with store.session() as s:  # its tick died mid-run: take it over, if nobody else did
        cond = (m.WatchResult.owner.is_(None) if rec.owner is None
                else m.WatchResult.owner == rec.owner)
        res = s.execute(update(m.WatchResult).where(m.WatchResult.id == rec.id,
                                                    m.WatchResult.state == RUNNING, cond)
                        .values(owner=me, at=now))
        won = bool(res.rowcount == 1)  # type: ignore[attr-defined]
    rec = _find(store, key)
    return ("mine" if won else ("done" if rec.state == DONE else "held")), rec


def _passing_skip(rec: ResultRecord) -> bool:
    """A skip that says something about this machine at that time, not about the torch."""
    return rec.verdict == "skip" and rec.facts.get("reusable") is False


def _find(store: Store, key: ResultKey) -> ResultRecord:
    with store.session() as s:
        row = s.scalar(select(m.WatchResult).where(
            m.WatchResult.suite == key.suite, m.WatchResult.oracle == key.oracle,
            m.WatchResult.torch_version == key.torch_version,
            m.WatchResult.commit_sha == key.commit_sha))
        assert row is not None, key
        return _result(row)


def get_result(store: Store, result_id: int) -> ResultRecord:
    with store.session() as s:
        row = s.get(m.WatchResult, result_id)
        assert row is not None, result_id
        return _result(row)


def beat_result(store: Store, result_id: int, me: str) -> None:
    """Keep a claim fresh while a long oracle runs (another host judges liveness by it)."""
    with store.session() as s:
        s.execute(update(m.WatchResult).where(m.WatchResult.id == result_id,
                                              m.WatchResult.owner == me)
                  .values(at=datetime.now(UTC)))


def finish_result(store: Store, result_id: int, me: str, found: Finding) -> bool:
    """Record what the run decided, only while the claim is still ours."""
    with store.session() as s:
        res = s.execute(update(m.WatchResult).where(
            m.WatchResult.id == result_id, m.WatchResult.owner == me,
            m.WatchResult.state == RUNNING).values(
            state=DONE, verdict=found.verdict, outcome=found.outcome, reason=found.reason,
            exit_code=found.exit_code, duration_s=found.duration_s,
            output_tail=found.output_tail, oracle_sha256=found.oracle_sha256,
            facts=found.facts, finished_at=datetime.now(UTC)))
        return bool(res.rowcount == 1)  # type: ignore[attr-defined]


def release_result(store: Store, result_id: int, me: str) -> None:
    """Give a claim back without a result (the tick was stopped): the next tick runs it."""
    with store.session() as s:
        s.execute(update(m.WatchResult).where(m.WatchResult.id == result_id,
                                              m.WatchResult.owner == me,
                                              m.WatchResult.state == RUNNING)
                  .values(owner=None))


def last_decided(store: Store, suite: str, oracle: str, n: int = 2) -> list[ResultRecord]:
    """The newest ``n`` results that said good or bad (a skip says nothing), newest first by
    ``build_order``: claim order is not torch order once a nightly is withdrawn."""
    with store.session() as s:
        rows = [_result(r) for r in s.scalars(select(m.WatchResult).where(
            m.WatchResult.suite == suite, m.WatchResult.oracle == oracle,
            m.WatchResult.state == DONE, m.WatchResult.verdict.in_(("good", "bad"))))]
    return sorted(rows, key=build_order, reverse=True)[:n]


def newest_judged(store: Store, suite: str) -> ResultRecord | None:
    """The newest build (``build_order``) any oracle of ``suite`` has a result for."""
    with store.session() as s:
        rows = [_result(r) for r in s.scalars(select(m.WatchResult).where(
            m.WatchResult.suite == suite, m.WatchResult.state == DONE))]
    return max(rows, key=build_order, default=None)


def fill_positions(store: Store, suite: str, count: Callable[[str], int | None]) -> None:
    """Give the results of ``suite`` written before positions were recorded theirs, by
    ``count(commit)`` (None: the clone cannot say; the row stays without)."""
    with store.session() as s:
        shas = set(s.scalars(select(m.WatchResult.commit_sha).where(
            m.WatchResult.suite == suite, m.WatchResult.position.is_(None))))
    counted = {sha: count(sha) for sha in sorted(shas)}  # git runs outside any transaction
    for sha, position in counted.items():
        if position is not None:
            with store.session() as s:
                s.execute(update(m.WatchResult).where(
                    m.WatchResult.suite == suite, m.WatchResult.commit_sha == sha,
                    m.WatchResult.position.is_(None)).values(position=position))


def results(store: Store) -> list[ResultRecord]:
    with store.session() as s:
        return [_result(r) for r in s.scalars(select(m.WatchResult).order_by(m.WatchResult.id))]


def claim_flip(store: Store, *, suite: str, oracle: str, kind: str, older: ResultRecord,
               newer: ResultRecord, me: str,
               facts: dict[str, Any] | None = None) -> FlipRecord | None:
    """The right to act on a flip: the new row, or None when another tick has it already."""
    now = datetime.now(UTC)
    try:
        with store.session() as s:
            row = m.WatchFlip(suite=suite, oracle=oracle, kind=kind,
                              from_commit=older.key.commit_sha, to_commit=newer.key.commit_sha,
                              from_result_id=older.id, to_result_id=newer.id, owner=me, at=now,
                              created_at=now, facts=facts)
            s.add(row)
            s.flush()
            return _flip(row)
    except IntegrityError:
        return None


def orphaned_flips(store: Store, me: str) -> list[FlipRecord]:
    """Flips whose tick died between claiming them and starting their bisection, taken over
    by ``me`` (compare-and-set on the owner seen, so one tick gets each)."""
    out = []
    with store.session() as s:
        rows = [_flip(f) for f in s.scalars(select(m.WatchFlip).where(
            m.WatchFlip.bisection_id.is_(None), m.WatchFlip.message.is_(None),
            m.WatchFlip.kind.in_(BISECTED)))]
    for f in rows:
        if f.owner == me or owner_alive(f.owner, f.at):
            continue
        with store.session() as s:
            cond = m.WatchFlip.owner.is_(None) if f.owner is None else m.WatchFlip.owner == f.owner
            res = s.execute(update(m.WatchFlip).where(m.WatchFlip.id == f.id, cond)
                            .values(owner=me, at=datetime.now(UTC)))
            won = bool(res.rowcount == 1)  # type: ignore[attr-defined]
        if won:
            out.append(get_flip(store, f.id))
    return out


def unstarted_flips(store: Store, me: str, suites: tuple[str, ...] = (),
                    skip: frozenset[int] = frozenset()) -> list[FlipRecord]:
    """Flips whose bisection could not start (``message`` says why), taken by ``me`` to try
    again (of ``suites`` only when given; none of ``skip``, the flips this tick just tried).
    The claim clears the message (compare-and-set on the one seen), so one tick tries each,
    and a tick that dies trying leaves an orphan (:func:`orphaned_flips`) for the next."""
    out = []
    with store.session() as s:
        rows = [_flip(f) for f in s.scalars(select(m.WatchFlip).where(
            m.WatchFlip.bisection_id.is_(None), m.WatchFlip.message.is_not(None),
            m.WatchFlip.kind.in_(BISECTED)).order_by(m.WatchFlip.id))]
    for f in rows:
        if (suites and f.suite not in suites) or f.id in skip:
            continue
        with store.session() as s:
            res = s.execute(update(m.WatchFlip).where(
                m.WatchFlip.id == f.id, m.WatchFlip.bisection_id.is_(None),
                m.WatchFlip.message == f.message)
                .values(owner=me, at=datetime.now(UTC), message=None))
            won = bool(res.rowcount == 1)  # type: ignore[attr-defined]
        if won:
            out.append(get_flip(store, f.id))
    return out


def started(store: Store, flip_id: int, *, bisection_id: int | None,
            message: str | None) -> FlipRecord:
    """The bisection a flip started, or why none could be (a one-line error)."""
    with store.session() as s:
        s.execute(update(m.WatchFlip).where(m.WatchFlip.id == flip_id)
                  .values(bisection_id=bisection_id, message=message))
    return get_flip(store, flip_id)


def get_flip(store: Store, flip_id: int) -> FlipRecord:
    with store.session() as s:
        row = s.get(m.WatchFlip, flip_id)
        assert row is not None, flip_id
        return _flip(row)


def flips(store: Store) -> list[FlipRecord]:
    with store.session() as s:
        return [_flip(f) for f in s.scalars(select(m.WatchFlip).order_by(m.WatchFlip.id))]


def mark_notified(store: Store, flip_id: int, which: Literal["flip", "end"]) -> bool:
    """Take the one right to announce this event (True once, ever, per store)."""
    col = m.WatchFlip.flip_notified_at if which == "flip" else m.WatchFlip.end_notified_at
    with store.session() as s:
        res = s.execute(update(m.WatchFlip).where(m.WatchFlip.id == flip_id, col.is_(None))
                        .values({col.key: datetime.now(UTC)}))
        return bool(res.rowcount == 1)  # type: ignore[attr-defined]


def flip_of_bisection(store: Store, bisection_id: int) -> FlipRecord | None:
    """The flip that started ``bisection_id``, if the watch started it."""
    with store.session() as s:
        row = s.scalar(select(m.WatchFlip).where(m.WatchFlip.bisection_id == bisection_id)
                       .order_by(m.WatchFlip.id).limit(1))
        return _flip(row) if row is not None else None
