"""Probes handed to the workers (``probe_task``), and the fenced write of their results.

The coordinator (the process holding the bisection's lease) opens one task per probe of a
round and appends each finished task to the bisection's probes; a worker starts a task, which
bumps its ``attempt``, and writes its result with a compare-and-set on that attempt. A job
retried because its worker stopped heartbeating is started again by another worker, with the
next attempt: from then on the first worker can write nothing, however late it wakes up. The
check and the run's insert are one transaction, so a result is never half written either.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bisector.base.kinds import TaskState
from bisector.store import models as m
from bisector.store.bisections import owned_by
from bisector.store.db import Store
from bisector.store.records import NewRun, RunRecord
from bisector.store.runs import Key, next_seq, run_record, run_row

OPEN = [TaskState.QUEUED.value, TaskState.RUNNING.value]


@dataclass(frozen=True)
class TaskRecord:
    id: int
    bisection_id: int
    round: int
    position: int
    commit_sha: str
    attempt: int
    state: TaskState
    job_id: int | None
    build_job_id: int | None
    worker: str | None
    owner: str | None
    run_id: int | None
    verdict: str | None
    reused: bool
    recorded: bool
    error: str | None


@dataclass(frozen=True)
class Attempt:
    """A worker's start of a task: the attempt number that fences its writes, and the owner
    of the attempt it replaced (its claim on the run's key may be taken over at once)."""

    task: TaskRecord
    number: int
    previous_owner: str | None


def _rec(t: m.ProbeTask) -> TaskRecord:
    return TaskRecord(t.id, t.bisection_id, t.round, t.position, t.commit_sha, t.attempt,
                      TaskState(t.state), t.job_id, t.build_job_id, t.worker, t.owner,
                      t.run_id, t.verdict, t.reused, t.recorded, t.error)


def open_round(store: Store, bisection_id: int, me: str, round_: int,
               wanted: Sequence[tuple[int, str]]) -> list[TaskRecord] | None:
    """One task per (position, sha) of this round, in order. A task of the same round and
    position that is not recorded yet and is queued, running or done is taken up again (a
    resumed coordinator waits for a probe still on a worker instead of enqueuing it twice);
    a cancelled or failed one gets a new task. None, with nothing written, when the lease is
    not ``me``'s."""
    with store.session() as s:
        if not owned_by(s, bisection_id, me):
            return None
        pool: dict[int, list[m.ProbeTask]] = defaultdict(list)
        for t in s.scalars(select(m.ProbeTask).where(
                m.ProbeTask.bisection_id == bisection_id, m.ProbeTask.round == round_,
                m.ProbeTask.recorded.is_(False),
                m.ProbeTask.state.in_([*OPEN, TaskState.DONE.value]))
                .order_by(m.ProbeTask.id)):
            pool[t.position].append(t)
        out = []
        for pos, sha in wanted:
            if pool[pos]:
                out.append(pool[pos].pop(0))
                continue
            row = m.ProbeTask(bisection_id=bisection_id, round=round_, position=pos,
                              commit_sha=sha, attempt=0, state=TaskState.QUEUED.value,
                              reused=False, recorded=False)
            s.add(row)
            out.append(row)
        s.flush()
        return [_rec(t) for t in out]


def set_job(store: Store, task_id: int, job_id: int, build_job_id: int | None = None) -> None:
    with store.session() as s:
        s.execute(update(m.ProbeTask).where(m.ProbeTask.id == task_id)
                  .values(job_id=job_id, build_job_id=build_job_id))


def jobs_of(stopped: Iterable[TaskRecord]) -> list[int]:
    """The queue jobs of these tasks, probes and builds sent ahead."""
    return [j for t in stopped for j in (t.job_id, t.build_job_id) if j is not None]


def get(store: Store, ids: Iterable[int]) -> list[TaskRecord]:
    with store.session() as s:
        return [_rec(t) for t in s.scalars(select(m.ProbeTask)
                                           .where(m.ProbeTask.id.in_(list(ids)))
                                           .order_by(m.ProbeTask.id))]


def of_bisection(store: Store, bisection_id: int) -> list[TaskRecord]:
    with store.session() as s:
        return [_rec(t) for t in s.scalars(select(m.ProbeTask)
                                           .where(m.ProbeTask.bisection_id == bisection_id)
                                           .order_by(m.ProbeTask.id))]


def start(store: Store, task_id: int, *, owner: str, worker: str) -> Attempt | None:
    """Begin the next attempt of an open task; None when there is nothing to do (it is done
    or was cancelled). The row is locked while it is bumped, so a fenced write of the attempt
    being replaced either lands before (and this sees the task done) or is refused after."""
    with store.session() as s:
        # A write first: it takes the row's lock on PostgreSQL and the database's write lock
        # on SQLite, so the read below is the row as it is, not a snapshot a rival bumps.
        s.execute(update(m.ProbeTask).where(m.ProbeTask.id == task_id)
                  .values(updated_at=datetime.now(UTC)))
        row = s.get(m.ProbeTask, task_id, populate_existing=True)
        if row is None or row.state not in OPEN:
            return None
        previous = row.owner
        row.attempt += 1
        row.state, row.owner, row.worker, row.error = (TaskState.RUNNING.value, owner, worker,
                                                      None)
        s.flush()
        return Attempt(_rec(row), row.attempt, previous)


def current(store: Store, task_id: int, attempt: int) -> bool:
    """Is ``attempt`` still the task's attempt (running, or done by it), not superseded by a
    retry and not cancelled?"""
    with store.session() as s:
        row = s.get(m.ProbeTask, task_id)
        return (row is not None and row.attempt == attempt
                and row.state in (TaskState.RUNNING.value, TaskState.DONE.value))


def _finish(store: Store, task_id: int, attempt: int, key: Key, run: NewRun | None,
            run_id: int | None, verdict: str, reusable: bool) -> int | None:
    with store.session() as s:
        fenced = s.execute(update(m.ProbeTask).where(
            m.ProbeTask.id == task_id, m.ProbeTask.attempt == attempt,
            m.ProbeTask.state == TaskState.RUNNING.value)
            .values(state=TaskState.DONE.value, verdict=verdict, reused=run is None,
                    updated_at=datetime.now(UTC)))
        if fenced.rowcount != 1:  # type: ignore[attr-defined]
            return None  # superseded or cancelled: the session writes nothing
        if run is not None:
            row = run_row(key, run, reusable)
            s.add(row)
            s.flush()
            run_id = row.id
        s.execute(update(m.ProbeTask).where(m.ProbeTask.id == task_id)
                  .values(run_id=run_id))
        return run_id


def finish(store: Store, task_id: int, attempt: int, key: Key, *, verdict: str,
           run: NewRun | None = None, run_id: int | None = None) -> int | None:
    """The fenced write: store ``run`` (or point at the stored ``run_id``, a run made
    elsewhere) as the task's result, with its ``verdict``, only if ``attempt`` is still its
    running attempt. Returns the run's id, or None when nothing was written (superseded or
    cancelled).

    As with ``run_store.save_run``, a run landing on a key another process decided meanwhile is
    kept as history (not reusable); the fence and the insert stay one transaction."""
    reusable = run.reusable if run is not None else False
    try:
        return _finish(store, task_id, attempt, key, run, run_id, verdict, reusable)
    except IntegrityError:
        if run is None or not run.reusable:
            raise
        return _finish(store, task_id, attempt, key, run, run_id, verdict, False)


def note_error(store: Store, task_id: int, attempt: int, error: str) -> None:
    """Why an attempt failed (shown by the coordinator if the job fails for good)."""
    with store.session() as s:
        s.execute(update(m.ProbeTask).where(m.ProbeTask.id == task_id,
                                            m.ProbeTask.attempt == attempt)
                  .values(error=error[:2000]))


def fail(store: Store, task_id: int) -> None:
    with store.session() as s:
        s.execute(update(m.ProbeTask).where(m.ProbeTask.id == task_id,
                                            m.ProbeTask.state.in_(OPEN))
                  .values(state=TaskState.FAILED.value))


def cancel_open(store: Store, bisection_id: int, keep: Iterable[int] = ()) -> list[TaskRecord]:
    """Cancel every open task of the bisection but ``keep``; returns them (their jobs are
    the caller's to abort). A cancelled task fences out its running attempt's result."""
    kept = set(keep)
    with store.session() as s:
        rows = [t for t in s.scalars(select(m.ProbeTask).where(
            m.ProbeTask.bisection_id == bisection_id, m.ProbeTask.state.in_(OPEN))
            .with_for_update()) if t.id not in kept]
        for t in rows:
            t.state = TaskState.CANCELLED.value
        s.flush()
        return [_rec(t) for t in rows]


def _append(s: Session, t: m.ProbeTask) -> None:
    s.add(m.Probe(bisection_id=t.bisection_id, seq=next_seq(s, t.bisection_id),
                  position=t.position, commit_sha=t.commit_sha, run_id=t.run_id,
                  verdict=t.verdict, reused=t.reused, round=t.round))
    t.recorded = True


def record(store: Store, task_id: int, me: str) -> RunRecord | bool:
    """Append a done task to its bisection's probes (once, and only while the lease is
    ``me``'s: False otherwise); returns the run it points at (True: it was recorded before)."""
    with store.session() as s:
        t = s.get(m.ProbeTask, task_id)
        if t is None or t.recorded:
            return True
        if t.state != TaskState.DONE.value or t.run_id is None:
            raise ValueError(f"task {task_id} is {t.state}, not done")
        if not owned_by(s, t.bisection_id, me):
            return False
        _append(s, t)
        v = s.get(m.RunRow, t.run_id)
        assert v is not None
        return run_record(v)


def unrecorded_done(store: Store, bisection_id: int) -> list[TaskRecord]:
    with store.session() as s:
        return [_rec(t) for t in s.scalars(select(m.ProbeTask).where(
            m.ProbeTask.bisection_id == bisection_id, m.ProbeTask.recorded.is_(False),
            m.ProbeTask.state == TaskState.DONE.value).order_by(m.ProbeTask.id))]


def open_tasks(store: Store) -> list[TaskRecord]:
    """Every task queued or running, of every bisection (``bisect workers``, the tests)."""
    with store.session() as s:
        return [_rec(t) for t in s.scalars(select(m.ProbeTask)
                                           .where(m.ProbeTask.state.in_(OPEN))
                                           .order_by(m.ProbeTask.id))]
