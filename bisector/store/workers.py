"""``bisect worker`` processes as the store sees them: what each serves, what it runs now,
and its heartbeat.

A coordinator decides from this table whether to enqueue (a live worker serves the probe
queue) and how many probes a round gets; ``bisect workers`` lists it. Liveness is judged as
for leases (``owner.owner_alive``): on this host by the process itself, on another host by a
heartbeat younger than the stale limit. Procrastinate keeps its own worker heartbeats for the
jobs; these rows are bisector's view, with the GPU and the probe.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update

from bisector.base import defaults
from bisector.base.kinds import WorkerState
from bisector.infra.owner import owner_alive
from bisector.store import models as m
from bisector.store.db import Store


@dataclass(frozen=True)
class WorkerRecord:
    id: int
    name: str
    owner: str
    host: str
    pid: int
    gpu: str | None
    queues: list[str]
    offer: dict[str, Any] | None
    state: WorkerState
    alive: bool
    task_id: int | None
    bisection_id: int | None
    commit_sha: str | None
    attempt: int | None
    jobs: int
    started_at: datetime
    heartbeat_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "host": self.host, "pid": self.pid,
                "gpu": self.gpu, "queues": self.queues, "offer": self.offer,
                "state": (self.state.value if self.alive or self.state is WorkerState.STOPPED
                          else "gone"), "alive": self.alive,
                "probe": None if self.task_id is None else {
                    "task": self.task_id, "bisection": self.bisection_id,
                    "commit": self.commit_sha, "attempt": self.attempt},
                "jobs": self.jobs, "started": self.started_at.isoformat(),
                "heartbeat": self.heartbeat_at.isoformat()}


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def register(store: Store, *, name: str, owner: str, host: str, pid: int, gpu: str | None,
             queues: list[str], offer: dict[str, Any] | None = None) -> int:
    now = datetime.now(UTC)
    with store.session() as s:
        row = m.WorkerRow(name=name, owner=owner, host=host, pid=pid, gpu=gpu, queues=queues,
                          offer=offer,
                          state=WorkerState.IDLE.value, jobs=0, started_at=now,
                          heartbeat_at=now)
        s.add(row)
        s.flush()
        return int(row.id)


def beat(store: Store, worker_id: int) -> None:
    with store.session() as s:
        s.execute(update(m.WorkerRow).where(m.WorkerRow.id == worker_id)
                  .values(heartbeat_at=datetime.now(UTC)))


def busy(store: Store, worker_id: int, task_id: int | None) -> None:
    """The worker started (``task_id``) or ended (None) a job: a probe or a build."""
    values: dict[str, Any] = {"task_id": task_id, "heartbeat_at": datetime.now(UTC),
                              "state": (WorkerState.BUSY if task_id else WorkerState.IDLE).value}
    with store.session() as s:
        if task_id is None:
            values["jobs"] = m.WorkerRow.jobs + 1
        s.execute(update(m.WorkerRow).where(m.WorkerRow.id == worker_id).values(**values))


def stop(store: Store, worker_id: int) -> None:
    with store.session() as s:
        s.execute(update(m.WorkerRow).where(m.WorkerRow.id == worker_id)
                  .values(state=WorkerState.STOPPED.value, task_id=None))


def listing(store: Store, *, stale_s: float = defaults.WORKER_STALE_S,
            since_s: float = 86400.0) -> list[WorkerRecord]:
    """Workers seen in the last ``since_s`` (a day), live ones first, each with the probe it
    runs now."""
    after = datetime.now(UTC) - timedelta(seconds=since_s)
    with store.session() as s:
        rows = s.execute(select(m.WorkerRow, m.ProbeTask)
                         .outerjoin(m.ProbeTask, m.WorkerRow.task_id == m.ProbeTask.id)
                         .where(m.WorkerRow.heartbeat_at >= after)
                         .order_by(m.WorkerRow.id)).all()
    out = []
    for w, task in rows:
        beat_at = _aware(w.heartbeat_at)
        # A task retried by another worker is not what this (dead) one runs: attempt 2 was
        # shown beside the worker killed during attempt 1.
        t: m.ProbeTask | None = (None if task is not None and task.worker is not None
                                 and task.worker != w.name else task)
        alive = (w.state != WorkerState.STOPPED.value
                 and owner_alive(w.owner, beat_at, stale_s)
                 and datetime.now(UTC) - beat_at < timedelta(seconds=stale_s))
        out.append(WorkerRecord(
            w.id, w.name, w.owner, w.host, w.pid, w.gpu, list(w.queues or []), w.offer,
            WorkerState(w.state), alive, t.id if t else None, t.bisection_id if t else None,
            t.commit_sha if t else None, t.attempt if t else None, w.jobs,
            _aware(w.started_at), beat_at))
    return sorted(out, key=lambda r: (not r.alive, r.id))


def live(store: Store, queue: str | None = None,
         stale_s: float = defaults.WORKER_STALE_S) -> list[WorkerRecord]:
    """Workers alive now that take jobs from ``queue`` (every live one when None)."""
    return [w for w in listing(store, stale_s=stale_s)
            if w.alive and (queue is None or queue in w.queues)]


def origins(store: Store, since_s: float = 86400.0) -> dict[str, dict[str, int]]:
    """Per worker, how the probes it ran in the last ``since_s`` got their package (the
    probe's ``obtained_as`` fact, a ``base/kinds.Way``: cached, bucket, prebuilt, ...); probes that
    adopted a verdict already stored ran nothing and are not counted."""
    after = datetime.now(UTC) - timedelta(seconds=since_s)
    with store.session() as s:
        rows = s.execute(select(m.ProbeTask.worker, m.RunRow.facts)
                         .join(m.RunRow, m.RunRow.id == m.ProbeTask.run_id)
                         .where(m.ProbeTask.updated_at >= after,
                                m.ProbeTask.reused.is_(False))).all()
    out: dict[str, dict[str, int]] = {}
    for worker, facts in rows:
        how = str((facts or {}).get("obtained_as") or "unknown")
        counts = out.setdefault(worker or "?", {})
        counts[how] = counts.get(how, 0) + 1
    return out
