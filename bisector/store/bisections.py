"""Bisections: create one with its frozen candidates, read it, own it, finish it.

Ownership is a compare-and-set on ``bisection.owner``: taking a lease succeeds only if the
owner is still the one the caller saw, so two processes that both decide to take over a dead
run cannot both win, and every beat and every recorded probe checks the owner is still us.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bisector.base.errors import LeaseLost, NotFoundError
from bisector.base.kinds import State
from bisector.store import disagree
from bisector.store import models as m
from bisector.store.db import Store
from bisector.store.records import BisectionRecord, OracleRecord


def _record(b: m.Bisection) -> BisectionRecord:
    return BisectionRecord(
        id=b.id, state=State(b.state), repo_path=b.repo_path, good_ref=b.good_ref,
        bad_ref=b.bad_ref, good_sha=b.good_sha, bad_sha=b.bad_sha, oracle_name=b.oracle_name,
        oracle_sha256=b.oracle_sha256, polarity=b.polarity, env_fingerprint=b.env_fingerprint,
        environment=dict(b.environment), settings=dict(b.settings), notes=list(b.notes),
        n_candidates=b.n_candidates, owner=b.owner, heartbeat_at=_aware(b.heartbeat_at),
        result=dict(b.result or {}), culprit_sha=b.culprit_sha, message=b.message,
        created_at=_aware(b.created_at) or datetime.now(UTC),
        in_flight=dict(b.in_flight) if b.in_flight else None,
    )


def _aware(t: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything we write is UTC."""
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def save_oracle(store: Store, sha256: str, name: str, content: str,
                meta: dict[str, Any]) -> None:
    """Keep the oracle's exact text once; a concurrent insert of the same oracle is fine."""
    with store.session() as s:
        if s.get(m.OracleRow, sha256) is not None:
            return
    try:
        with store.session() as s:
            s.add(m.OracleRow(sha256=sha256, name=name, content=content, meta=meta))
    except IntegrityError:
        pass  # another process stored the same bytes first


def get_oracle(store: Store, sha256: str) -> OracleRecord:
    with store.session() as s:
        row = s.get(m.OracleRow, sha256)
        if row is None:
            raise NotFoundError(f"oracle {sha256[:12]} is missing from the store: the database "
                                f"was edited by hand; start the bisection again")
        return OracleRecord(row.sha256, row.name, row.content, dict(row.meta))


def create(store: Store, *, candidates: Sequence[str], owner: str,
           then: Callable[[Session, int], None] | None = None, **fields: Any) -> int:
    """Store a bisection and its frozen candidate list in one transaction, owned by ``owner``;
    ``then`` writes what else belongs to it in the same transaction (a log's marks)."""
    with store.session() as s:
        b = m.Bisection(state=State.RUNNING.value, owner=owner, heartbeat_at=datetime.now(UTC),
                        n_candidates=len(candidates), result={}, **fields)
        s.add(b)
        s.flush()
        s.add_all(m.Candidate(bisection_id=b.id, position=i, sha=sha)
                  for i, sha in enumerate(candidates))
        if then is not None:
            then(s, b.id)
        return b.id


def get(store: Store, bisection_id: int) -> BisectionRecord:
    with store.session() as s:
        b = s.get(m.Bisection, bisection_id) if 0 < bisection_id < 2**63 else None
        if b is None:
            raise NotFoundError(
                f"no bisection with id {bisection_id} in {store.url}: see `bisect list`")
        return _record(b)


def candidates(store: Store, bisection_id: int) -> list[str]:
    with store.session() as s:
        return list(s.scalars(select(m.Candidate.sha)
                              .where(m.Candidate.bisection_id == bisection_id)
                              .order_by(m.Candidate.position)))


def extend(store: Store, bisection_id: int, *, me: str, start: int,
           shas: Sequence[str]) -> None:
    """The candidates of a second search (inside a merge: run/into_merge.py) stored after the
    walk's, at ``start`` onwards (what was there goes), while the lease is ours."""
    with store.session() as s:
        if not owned_by(s, bisection_id, me):
            raise LeaseLost(f"bisection {bisection_id} was taken over by another process")
        s.execute(delete(m.Candidate).where(m.Candidate.bisection_id == bisection_id,
                                            m.Candidate.position >= start))
        s.add_all(m.Candidate(bisection_id=bisection_id, position=start + i, sha=sha)
                  for i, sha in enumerate(shas))


def listing(store: Store, limit: int) -> list[BisectionRecord]:
    with store.session() as s:
        rows = s.scalars(select(m.Bisection).order_by(m.Bisection.id.desc()).limit(limit))
        return [_record(b) for b in rows]


def _is_hex(text: str) -> bool:
    return 0 < len(text) <= 40 and all(c in "0123456789abcdef" for c in text)


def same_range(store: Store, oracle_sha256: str, good: str, bad: str) -> int | None:
    """The newest bisection with this oracle whose endpoints start with ``good`` and ``bad``
    (a report may give short shas): one indexed query (ix_bisection_oracle_sha256), where
    ``--from-report`` once scanned every row in Python."""
    good, bad = good.lower(), bad.lower()
    if not all(_is_hex(x) for x in (good, bad)):
        return None  # a ref, or LIKE's own wildcards: never a pattern over every row
    with store.session() as s:
        return s.scalar(select(m.Bisection.id).where(
            m.Bisection.oracle_sha256 == oracle_sha256,
            m.Bisection.good_sha.like(good + "%"), m.Bisection.bad_sha.like(bad + "%"))
            .order_by(m.Bisection.id.desc()).limit(1))


def unfinished(store: Store) -> list[BisectionRecord]:
    """Bisections that may still run (running, or interrupted and waiting for ``resume``):
    what they need on disk must outlive ``bisect gc``."""
    open_states = [s.value for s in State if not s.finished]
    with store.session() as s:
        rows = s.scalars(select(m.Bisection).where(m.Bisection.state.in_(open_states))
                         .order_by(m.Bisection.id))
        return [_record(b) for b in rows]


def take(store: Store, bisection_id: int, *, me: str, seen: str | None) -> bool:
    """Become the owner if the owner is still ``seen`` (compare-and-set)."""
    cond = m.Bisection.owner.is_(None) if seen is None else m.Bisection.owner == seen
    with store.session() as s:
        res = s.execute(update(m.Bisection).where(m.Bisection.id == bisection_id, cond)
                        .values(owner=me, state=State.RUNNING.value,
                                heartbeat_at=datetime.now(UTC), cancel_requested_at=None))
        taken = bool(res.rowcount == 1)  # type: ignore[attr-defined]
        if taken:
            disagree.forget(s, bisection_id)  # running again: its answer is not known yet
        return taken


def beat(store: Store, bisection_id: int, *, me: str) -> bool:
    """Move the heartbeat; False when the lease is no longer ours."""
    with store.session() as s:
        res = s.execute(update(m.Bisection)
                        .where(m.Bisection.id == bisection_id, m.Bisection.owner == me)
                        .values(heartbeat_at=datetime.now(UTC)))
        return bool(res.rowcount == 1)  # type: ignore[attr-defined]


def release(store: Store, bisection_id: int, *, me: str, state: State) -> None:
    """Give the lease back (interrupted): only if it is still ours."""
    with store.session() as s:
        s.execute(update(m.Bisection)
                  .where(m.Bisection.id == bisection_id, m.Bisection.owner == me,
                         m.Bisection.state == State.RUNNING.value)
                  .values(owner=None, state=state.value))


def finish(store: Store, bisection_id: int, *, me: str, state: State, result: dict[str, Any],
           culprit_sha: str | None, message: str | None) -> bool:
    """Write the answer, if the lease is still ours; False when another process owns it."""
    with store.session() as s:
        res = s.execute(update(m.Bisection)
                        .where(m.Bisection.id == bisection_id, m.Bisection.owner == me)
                        .values(owner=None, state=state.value, result=result,
                                culprit_sha=culprit_sha, message=message, in_flight=None,
                                culprit_inside=_inside(result)))
        done = bool(res.rowcount == 1)  # type: ignore[attr-defined]
        if done:
            s.flush()
            disagree.refresh(s, bisection_id)  # `bisect list --disagree` reads what it finds
        return done


def _inside(result: dict[str, Any] | None) -> str | None:
    """The commit inside a merge culprit the search named, kept beside the culprit so that
    `bisect list --culprit` finds it from an index (store/queries.py)."""
    sha = ((result or {}).get("into_merge") or {}).get("sha")
    return str(sha) if sha else None


def add_to_result(store: Store, bisection_id: int, entries: dict[str, Any]) -> None:
    """Add entries to a finished bisection's result (what ran at the culprit after the
    answer was written: ``run/at_culprit.py``); the answer itself is never changed."""
    with store.session() as s:
        b = s.get(m.Bisection, bisection_id)
        if b is None:
            return
        result = dict(b.result or {})
        result.update({k: v for k, v in entries.items() if k not in result})
        b.result = result


def set_in_flight(store: Store, bisection_id: int, *, me: str, round_: int,
                  positions: Sequence[int]) -> bool:
    """Note the round about to run, before it runs: ``resume`` re-runs what of it is missing."""
    with store.session() as s:
        res = s.execute(update(m.Bisection)
                        .where(m.Bisection.id == bisection_id, m.Bisection.owner == me)
                        .values(in_flight={"round": round_, "positions": list(positions)}))
        return bool(res.rowcount == 1)  # type: ignore[attr-defined]


def owned_by(s: Any, bisection_id: int, me: str) -> bool:
    """Inside a caller's transaction: is the lease still ours? A write (the heartbeat), so the
    check and the caller's insert are one transaction on SQLite too (a SELECT would run before
    SQLite's BEGIN, and FOR UPDATE means nothing there)."""
    res = s.execute(update(m.Bisection)
                    .where(m.Bisection.id == bisection_id, m.Bisection.owner == me)
                    .values(heartbeat_at=datetime.now(UTC)))
    return bool(res.rowcount == 1)


def request_cancel(store: Store, bisection_id: int, *, dead_owner: str | None = None,
                   nobody_runs: bool = False) -> bool:
    """``bisect cancel``: ask whoever runs the bisection to stop (its coordinator looks every
    ``defaults.CANCEL_POLL_S``). With ``nobody_runs`` (its owner ``dead_owner`` is gone) it is
    marked cancelled here and now, if that is still its owner, so nothing (the watch's next
    tick) takes it up again. False when it is already finished."""
    open_states = [st.value for st in State if not st.finished]
    cond = [m.Bisection.id == bisection_id, m.Bisection.state.in_(open_states)]
    values: dict[str, Any] = {"cancel_requested_at": datetime.now(UTC)}
    if nobody_runs:
        values.update(state=State.CANCELLED.value, owner=None)
        cond.append(m.Bisection.owner.is_(None) if dead_owner is None
                    else m.Bisection.owner == dead_owner)
    with store.session() as s:
        res = s.execute(update(m.Bisection).where(*cond).values(**values))
        return bool(res.rowcount == 1)  # type: ignore[attr-defined]


def cancel_requested(store: Store, bisection_id: int) -> bool:
    with store.session() as s:
        return s.scalar(select(m.Bisection.cancel_requested_at)
                        .where(m.Bisection.id == bisection_id)) is not None


def confirmed_before(store: Store, *, oracle_sha256: str, env_fingerprint: str,
                     culprit_sha: str, judged_by: str,
                     exclude: int) -> tuple[int, dict[str, Any]] | None:
    """The newest finished bisection under the same key (oracle bytes, environment) whose
    culprit was this commit and whose confirmation, judged the same way, confirmed it: its id
    and that confirmation. A repeat of the same hunt then needs no fresh runs."""
    with store.session() as s:
        rows = s.scalars(
            select(m.Bisection)
            .where(m.Bisection.culprit_sha == culprit_sha,
                   m.Bisection.oracle_sha256 == oracle_sha256,
                   m.Bisection.env_fingerprint == env_fingerprint,
                   m.Bisection.state == State.DONE.value, m.Bisection.id != exclude)
            .order_by(m.Bisection.id.desc()))
        for b in rows:
            checked = (b.result or {}).get("confirmation")
            if (isinstance(checked, dict) and checked.get("status") == "confirmed"
                    and checked.get("judged_by", "verdicts") == judged_by):
                return int(checked.get("reused_from", b.id)), dict(checked)
    return None
