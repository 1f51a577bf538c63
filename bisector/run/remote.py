"""Probes on workers: a round's K probes enqueued as K jobs, their verdicts awaited in the store.

The runner (:mod:`bisector.run.runner`) stays the coordinator (the lease, the search, the
rounds, the answer); with a :class:`Workers` its ``dispatch`` enqueues instead of starting
threads. Each probe is a ``probe_task`` row (``store/tasks.py``) plus a queue job naming it; the
coordinator polls the rows, appends each finished one to the bisection's probes, and goes on
when the round is complete. The queue itself is behind :class:`Queue` (Procrastinate on
PostgreSQL, ``queue/procrastinate.py``), so nothing here knows about it.

The worker's side is :class:`TaskRecorder`: the probe pipeline's recorder whose every write is
fenced by the attempt the worker started, so a worker that was given up on (killed, or silent
past the stale limit) can never write a result over its retry's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Protocol

from bisector.base import defaults
from bisector.base.errors import BisectorError, Cancelled, LeaseLost
from bisector.base.events import Events
from bisector.base.kinds import TaskState, Way
from bisector.core.search import Verdict
from bisector.queue.routing import PROBE
from bisector.queue.states import JobState
from bisector.run.pipeline import StoreRecorder
from bisector.store import claims, tasks, workers
from bisector.store.db import Store
from bisector.store.records import BisectionRecord, NewRun, RunRecord
from bisector.store.runs import Key

BUILD_QUEUE = "build"
LISTENERS_EVERY = 30  # polls between looks at whether a live worker takes the route's jobs


class Queue(Protocol):
    """What the coordinator needs of a job queue."""

    def enqueue(self, task_id: int, *, queue: str, lock: str | None = None) -> int:
        """Put the task's probe on ``queue`` (its environment's, ``queue/routing.py``);
        returns the job id. Jobs sharing a ``lock`` run one after the other, in the order
        they were enqueued."""
        ...

    def enqueue_build(self, task_id: int, *, queue: str, lock: str) -> int:
        """Put a source build of the task's commit on ``queue`` (a build worker with the
        bisection's Python builds and uploads it before the probe, which holds the same
        lock)."""
        ...

    def status(self, job_id: int) -> JobState:
        """What became of the job, in bisector's words (the queue translates its own)."""
        ...

    def abort(self, job_id: int) -> None:
        """Cancel a waiting job; ask the worker running one to stop it."""
        ...

    def close(self) -> None: ...


class Coordinator(Protocol):
    """What dispatching through a queue needs of the bisection's runner."""

    @property
    def record(self) -> BisectionRecord: ...
    @property
    def candidates(self) -> Sequence[str]: ...
    @property
    def events(self) -> Events: ...
    @property
    def me(self) -> str:
        """The lease holder's owner id (every task write is made as it)."""
        ...

    def cost(self, pos: int) -> int:
        """The provider's cost rank of a position (a build gets a build job ahead)."""
        ...

    def check_lease(self) -> None:
        """Raise if the lease was lost or `bisect cancel` asked."""
        ...


class ProbeFailed(BisectorError):
    """A worker could not run a probe at all (not a verdict: a bug, a box missing the clone)."""

    exit_code = 11


def cancelled_message(bisection_id: int) -> str:
    return (f"bisection {bisection_id} was cancelled (bisect cancel): no probe in flight was "
            f"judged; `bisect resume {bisection_id}` (same --db) finishes it")


class Workers:
    """The coordinator's dispatch through a queue."""

    def __init__(self, store: Store, queue: Queue, *, route: str = PROBE,
                 build_route: str = BUILD_QUEUE, poll_s: float = defaults.TASK_POLL_S) -> None:
        """``route``: the probe queue of the bisection's environment (``Need.queue``), which
        only the workers offering that environment take jobs from; ``build_route`` its build
        queue (``Need.build_queue``)."""
        self.store, self.queue, self.poll_s, self.route = store, queue, poll_s, route
        self.build_route = build_route
        self._unserved_said = False

    def close(self) -> None:
        self.queue.close()

    def settle(self, r: Coordinator) -> None:
        """Before the first round: append what workers finished while no coordinator was
        looking (Ctrl-C or a kill of the last one), as the probes they are."""
        for t in tasks.unrecorded_done(self.store, r.record.id):
            self._record(r, t)

    def run(self, r: Coordinator, positions: Sequence[int], round_: int) -> None:
        """Enqueue one job per position (probes still on a worker from an earlier coordinator
        are waited for, not enqueued again) and wait until each has a recorded verdict."""
        bid = r.record.id
        wanted = [(p, r.candidates[p]) for p in positions]
        opened = tasks.open_round(self.store, bid, r.me, round_, wanted)
        if opened is None:
            raise LeaseLost(f"bisection {bid} was taken over by another process")
        # One round at a time: an open task of another round is no longer wanted.
        for job in tasks.jobs_of(tasks.cancel_open(self.store, bid,
                                                   keep=[t.id for t in opened])):
            self.queue.abort(job)
        pending = {t.id: t for t in opened}
        for t in opened:
            if t.state is TaskState.DONE:
                continue
            if t.job_id is None or self.queue.status(t.job_id).ended:
                self._enqueue(r, t)
        seen: dict[int, tuple[TaskState, int]] = {}
        polls = 0
        while pending:
            r.check_lease()  # also stops on `bisect cancel`
            polls += 1
            if polls % LISTENERS_EVERY == 0:
                self._say_if_unserved(r, pending.values())
            for t in tasks.get(self.store, list(pending)):
                if t.state is TaskState.DONE:
                    self._record(r, t)
                    del pending[t.id]
                    continue
                if t.state is TaskState.CANCELLED:
                    raise Cancelled(cancelled_message(bid))
                if seen.get(t.id) != (t.state, t.attempt) and t.state is TaskState.RUNNING:
                    again = f", attempt {t.attempt}" if t.attempt > 1 else ""
                    r.events.phase(t.commit_sha, f"{t.commit_sha[:12]} on worker {t.worker}"
                                                 f"{again}")
                seen[t.id] = (t.state, t.attempt)
                self._check_job(r, t)
            if pending:
                time.sleep(self.poll_s)

    def _say_if_unserved(self, r: Coordinator, waiting: Iterable[tasks.TaskRecord]) -> None:
        """Once, when probes wait in a queue no live worker takes jobs from (its last worker
        died, or none ever offered this environment): they wait, and the user hears why."""
        if self._unserved_said or not any(t.state is TaskState.QUEUED for t in waiting):
            return
        if not workers.live(self.store, self.route):
            self._unserved_said = True
            r.events.note(f"no live worker takes jobs from {self.route}: this bisection's "
                          f"probes wait there until one offering its environment starts (or "
                          f"`bisect cancel {r.record.id}`, then `bisect resume "
                          f"{r.record.id} --no-enqueue` on a box that can probe)")

    def _enqueue(self, r: Coordinator, t: tasks.TaskRecord) -> None:
        """A probe whose commit needs a source build, while a build worker is alive, gets
        the build enqueued first under a lock the probe shares: the GPU worker then finds the
        wheel built (in the cache the boxes share) instead of building it itself."""
        lock = build = None
        if (r.cost(t.position) == Way.BUILD.rank
                and workers.live(self.store, self.build_route)):
            lock = f"bisector-task-{t.id}"
            build = self.queue.enqueue_build(t.id, queue=self.build_route, lock=lock)
        job = self.queue.enqueue(t.id, queue=self.route, lock=lock)
        tasks.set_job(self.store, t.id, job, build)
        r.events.phase(t.commit_sha, f"{t.commit_sha[:12]} queued for a "
                                     f"{'build worker, then a ' if build else ''}worker")

    def _check_job(self, r: Coordinator, t: tasks.TaskRecord) -> None:
        """The job of an open task ended without a result: it failed for good (say why), was
        stopped from outside (as a cancel), or ended some other way (enqueue it again)."""
        if t.job_id is None:
            return
        if (t.build_job_id is not None and t.state is TaskState.QUEUED
                and self.queue.status(t.build_job_id) is JobState.WAITING
                and not workers.live(self.store, self.build_route)):
            self.queue.abort(t.build_job_id)  # no build worker left: the probe builds it
        status = self.queue.status(t.job_id)
        if not status.ended:
            return
        now = tasks.get(self.store, [t.id])[0]  # it may have finished since it was read
        if now.state is not t.state or now.attempt != t.attempt:
            return
        if status is JobState.FAILED:
            tasks.fail(self.store, t.id)
            why = now.error or "see the worker's log"
            raise ProbeFailed(f"the probe of {t.commit_sha[:12]} failed on worker {now.worker} "
                              f"({why}); fix that, then `bisect resume {t.bisection_id}`")
        if status.stopped:
            tasks.cancel_open(self.store, t.bisection_id)
            raise Cancelled(cancelled_message(t.bisection_id))
        self._enqueue(r, t)

    def _record(self, r: Coordinator, t: tasks.TaskRecord) -> None:
        run = tasks.record(self.store, t.id, r.me)
        if run is False:
            raise LeaseLost(f"bisection {r.record.id} was taken over by another process")
        if isinstance(run, RunRecord):
            r.events.probe_done(t.position, t.commit_sha, Verdict(t.verdict or "skip"),
                                run.reason, run.duration_s, t.reused)


class Superseded(Exception):
    """This attempt is no longer the task's (a retry started, or it was cancelled): its
    result is not written."""


class TaskRecorder(StoreRecorder):
    """A worker's recorder: results go to its task, fenced by the attempt it started.

    Claims work as for any probe (two bisections' jobs on one commit: the second waits and
    adopts), except that the claim of the attempt this one replaced is taken over at once:
    that attempt can no longer write, whether its process lives or not."""

    def __init__(self, store: Store, key: Key, me: str, attempt: tasks.Attempt,
                 sampled: bool) -> None:
        super().__init__(store, attempt.task.bisection_id, key, me)
        self.attempt, self.sampled = attempt, sampled

    def begin(self, sha: str) -> RunRecord | None:
        return None if self.sampled else super().begin(sha)

    def end(self, sha: str) -> None:
        if not self.sampled:
            super().end(sha)

    def gone(self, holder: claims.Holder) -> bool:
        previous = self.attempt.previous_owner
        return (previous is not None and holder.owner == previous) or super().gone(holder)

    def adopt(self, position: int, sha: str, run: RunRecord, verdict: Verdict,
              round_: int | None) -> None:
        self._finish(verdict, None, run.id)

    def record(self, position: int, sha: str, run: NewRun, verdict: Verdict,
               round_: int | None) -> None:
        if self.sampled:  # as SampleRecorder: a sample, never the key's reusable verdict
            facts = ({**run.facts, "permanent": run.reusable} if verdict is Verdict.SKIP
                     else run.facts)
            run = replace(run, reusable=False, facts=facts)
        self._finish(verdict, run, None)

    def _finish(self, verdict: Verdict, run: NewRun | None, run_id: int | None) -> None:
        a = self.attempt
        if tasks.finish(self.store, a.task.id, a.number, self.key, verdict=verdict.value,
                        run=run, run_id=run_id) is None:
            raise Superseded(f"attempt {a.number} of task {a.task.id} was superseded or "
                             f"cancelled: its result is not written")
