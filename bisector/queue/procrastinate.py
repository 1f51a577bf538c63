"""The probe queue: Procrastinate's jobs, in the same PostgreSQL database as the store.

Procrastinate moves jobs; it never holds a result. A probe job carries one argument, the id of
its ``probe_task`` row, and everything it decides goes to the store through the fenced write
(``store/tasks.py``). What Procrastinate gives: a job is fetched by exactly one worker
(``FOR UPDATE SKIP LOCKED``), LISTEN/NOTIFY wakes idle workers at once, workers heartbeat in
``procrastinate_workers``, a waiting job can be cancelled and a running one asked to abort.

Its schema is applied here, once per database and under the lock that serialises bisector's
own migrations, by the first worker or coordinator that needs it: Alembic owns bisector's
tables, Procrastinate its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import procrastinate
from procrastinate.exceptions import JobAborted
from procrastinate.jobs import Job, Status
from sqlalchemy import inspect

from bisector.base.errors import TaskAborted, UsageError
from bisector.queue import routing
from bisector.queue.states import JobState, QueueCounts
from bisector.store.db import Store, migration_lock

PROBE_QUEUE = "probe"  # GPU workers: a whole probe (obtain, run the oracle, judge, record)
BUILD_QUEUE = "build"  # CPU-only build workers (see docs/fleet.md: "Several boxes")
QUEUES = (PROBE_QUEUE, BUILD_QUEUE)
PROBE_TASK = "bisector.probe"
BUILD_TASK = "bisector.build"
# A probe job whose attempt raised (not a verdict: a database hiccup, a box missing the
# clone) is tried until it has been started this many times (hand-backs of a silent worker
# count too), then fails for good and the coordinator says why.
MAX_ATTEMPTS = 5
RETRY_WAIT_S = 5

log = logging.getLogger("bisector.workers")

# Procrastinate's statuses in bisector's words: the only place its names are read.
STATES = {Status.TODO: JobState.WAITING, Status.DOING: JobState.RUNNING,
          Status.SUCCEEDED: JobState.DONE, Status.FAILED: JobState.FAILED,
          Status.CANCELLED: JobState.CANCELLED, Status.ABORTING: JobState.STOPPING,
          Status.ABORTED: JobState.STOPPED}


def ours(queue: str | None) -> bool:
    """One of bisector's queues: ``probe``, ``build``, or one per environment
    (``probe/ENVIRONMENT``, ``build/PYTHON``)."""
    return routing.kind(queue) is not None


class ProbeRetry(procrastinate.BaseRetryStrategy):
    """A probe handed back at shutdown (its worker was stopped past its grace) goes back to the
    queue at once, however often; one that raised is tried again a few times. A probe aborted
    by ``bisect cancel`` never gets here: Procrastinate does not retry a user's abort."""

    def get_retry_decision(self, *, exception: BaseException,
                           job: Job) -> procrastinate.RetryDecision | None:
        if isinstance(exception, JobAborted):
            return procrastinate.RetryDecision(retry_in={"seconds": 0})
        if job.attempts + 1 >= MAX_ATTEMPTS:
            return None
        return procrastinate.RetryDecision(retry_in={"seconds": RETRY_WAIT_S})


def conninfo(store: Store) -> str:
    """The store's URL as libpq takes it (Procrastinate connects with psycopg itself)."""
    if store.engine.dialect.name != "postgresql":
        raise UsageError(f"workers share a PostgreSQL store, and {store.url} is not one: give "
                         f"the workers and bisect start --db postgresql+psycopg://USER@HOST/DB "
                         f"(or set BISECTOR_DB)")
    return store.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def has_queue(store: Store) -> bool:
    with store.engine.connect() as conn:
        return bool(inspect(conn).has_table("procrastinate_jobs"))


def ensure_schema(store: Store) -> None:
    """Apply Procrastinate's schema to the store's database if it is not there yet."""
    conn = conninfo(store)
    if has_queue(store):
        return
    with migration_lock(store.engine):
        if has_queue(store):
            return
        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(
            conninfo=conn, min_size=1, max_size=1))
        app.open()
        try:
            app.schema_manager.apply_schema()
        finally:
            app.close()


class JobQueue:
    """A coordinator's (and ``bisect cancel``'s) handle on the queue: enqueue, look, abort.
    Synchronous: the coordinator is a plain loop."""

    def __init__(self, store: Store) -> None:
        ensure_schema(store)
        self.app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(
            conninfo=conninfo(store), min_size=1, max_size=2))
        self.app.open()

    def enqueue(self, task_id: int, *, queue: str, lock: str | None = None) -> int:
        return int(self.app.configure_task(PROBE_TASK, queue=queue, lock=lock)
                   .defer(task_id=task_id))

    def enqueue_build(self, task_id: int, *, queue: str, lock: str) -> int:
        return int(self.app.configure_task(BUILD_TASK, queue=queue, lock=lock)
                   .defer(task_id=task_id))

    def status(self, job_id: int) -> JobState:
        try:
            return STATES[self.app.job_manager.get_job_status(job_id)]
        except ValueError:  # no such job (deleted by hand)
            return JobState.MISSING

    def abort(self, job_id: int) -> None:
        """A waiting job is cancelled; a running one is asked to abort (its worker kills the
        oracle at once, through LISTEN/NOTIFY, or within its abort poll)."""
        self.app.job_manager.cancel_job_by_id(job_id, abort=True)

    def summary(self) -> list[QueueCounts]:
        """Jobs per state of each of bisector's queues (one per environment probes need)."""
        return [counts(q) for q in self.app.job_manager.list_queues() if ours(q["name"])]

    def close(self) -> None:
        self.app.close()


def counts(row: dict[str, Any]) -> QueueCounts:
    """One row of Procrastinate's ``list_queues`` (its status names as keys) in bisector's."""
    return QueueCounts(row["name"], waiting=row["todo"], running=row["doing"],
                       done=row["succeeded"], failed=row["failed"],
                       stopped=row["cancelled"] + row["aborted"])


Run = Callable[[procrastinate.JobContext, int], str]


def aborts_as_jobs(run: Run, context: procrastinate.JobContext, task_id: int) -> str:
    """``run``, bisector's own abort (``TaskAborted``) given to Procrastinate as its own: the
    only place either side meets the other's exception."""
    try:
        return run(context, task_id)
    except TaskAborted as e:
        raise JobAborted(str(e)) from None


def worker_app(store: Store, run_probe: Run, run_build: Run) -> procrastinate.App:
    """The App a worker runs: the probe and build tasks, calling ``run_probe(context,
    task_id)`` / ``run_build`` in a thread (synchronous: builds and oracles block)."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=conninfo(store), min_size=1, max_size=4))

    @app.task(name=PROBE_TASK, queue=PROBE_QUEUE, pass_context=True, retry=ProbeRetry())
    def probe(context: procrastinate.JobContext, task_id: int) -> str:
        return aborts_as_jobs(run_probe, context, task_id)

    @app.task(name=BUILD_TASK, queue=BUILD_QUEUE, pass_context=True, retry=ProbeRetry())
    def build(context: procrastinate.JobContext, task_id: int) -> str:
        return aborts_as_jobs(run_build, context, task_id)

    return app


async def hand_back_stalled(app: procrastinate.App, stale_s: float) -> list[int]:
    """Jobs whose worker stopped heartbeating (killed, frozen, its box gone) go back to the
    queue for another worker; returns their ids. Any worker may do this at any time: a job is
    handed back only while it is still ``doing`` (a second try of the same job fails in the
    database and is ignored), and the attempt fence keeps the silent worker's late result
    out. Workers silent that long are forgotten first, which also makes their jobs count."""
    await app.job_manager.prune_stalled_workers(stale_s)
    handed = []
    for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=stale_s):
        if not ours(job.queue) or job.id is None:
            continue
        try:
            await app.job_manager.retry_job(job)
        except Exception as e:  # another worker handed it back first
            log.debug("job %s was not handed back: %s", job.id, e)
            continue
        handed.append(job.id)
    return handed
