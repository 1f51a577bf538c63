"""The coordinator's dispatch through a queue, and `bisect cancel` of an in-process run, on a
real SQLite store with fakes of the queue and the executor (the real queue, Procrastinate on
PostgreSQL with worker processes, is in tests/integration/test_workers.py)."""

from __future__ import annotations

import math
import threading

import pytest

from bisector.base.errors import Cancelled
from bisector.base.kinds import State, TaskState
from bisector.core.verdict import Rules
from bisector.infra import cancel
from bisector.queue.states import JobState
from bisector.run.lease import Lease
from bisector.run.pipeline import Pipeline
from bisector.run.remote import ProbeFailed, TaskRecorder, Workers
from bisector.store import bisections, tasks
from bisector.store import runs as run_store
from bisector.store.db import Store
from tests.unit.fakes import (
    ORACLE,
    FakeExecutor,
    FakeSource,
    block_until_stopped,
    make_runner,
    new_bisection,
    shas,
)


class ThreadQueue:
    """Each job runs at once in a thread, as a worker would run it: start the attempt, run the
    probe pipeline with the worker's fenced recorder."""

    def __init__(self, store: Store, bisection_id: int, candidates: list[str],
                 executor: FakeExecutor) -> None:
        rec = bisections.get(store, bisection_id)
        self.key = run_store.Key(rec.oracle_sha256, rec.env_fingerprint)
        self.store, self.candidates, self.executor = store, candidates, executor
        self.states: dict[int, JobState] = {}
        self.threads: list[threading.Thread] = []
        self.queues: list[str] = []  # where each job went

    def enqueue(self, task_id: int, *, queue: str, lock: str | None = None) -> int:
        self.queues.append(queue)
        job = len(self.states) + 1
        self.states[job] = JobState.RUNNING
        th = threading.Thread(target=self._work, args=(job, task_id))
        self.threads.append(th)
        th.start()
        return job

    def enqueue_build(self, task_id: int, *, queue: str, lock: str) -> int:
        raise AssertionError("no build worker here")

    def _work(self, job: int, task_id: int) -> None:
        att = tasks.start(self.store, task_id, owner=f"box:{job}:1", worker=f"w{job}")
        if att is not None:
            t = att.task
            recorder = TaskRecorder(self.store, self.key, f"box:{job}:1", att, sampled=False)
            Pipeline(FakeSource().obtain, self.executor, ORACLE, Rules(), recorder).probe(
                t.position, t.commit_sha, gpu=str(job % 3), round_=t.round)
        self.states[job] = JobState.DONE

    def status(self, job_id: int) -> JobState:
        return self.states[job_id]

    def abort(self, job_id: int) -> None:
        self.states[job_id] = JobState.CANCELLED

    def close(self) -> None:
        for th in self.threads:
            th.join()


@pytest.mark.parametrize("k", [1, 3])
def test_rounds_on_workers_find_the_culprit_within_the_bound(store: Store, k: int) -> None:
    cands = shas(300)
    bid = new_bisection(store, cands)
    ex = FakeExecutor(cands, culprit=211)
    queue = ThreadQueue(store, bid, cands, ex)
    r = make_runner(store, bid, cands, ex, width=k, gpus=False)
    r.workers = Workers(store, queue, poll_s=0.01)
    done = r.run()
    queue.close()
    assert done.record.culprit_sha == cands[211]
    probes = run_store.probes(store, bid)
    assert len({p.commit_sha for p in probes}) == len(probes) == len(ex.calls)
    assert max(p.round or 0 for p in probes) <= math.ceil(math.log(300, k + 1)) + 1
    every = tasks.of_bisection(store, bid)
    assert all(t.state is TaskState.DONE and t.recorded and t.attempt == 1 for t in every)
    assert len(every) == len(probes)


@pytest.mark.parametrize("k", [1, 3])
def test_cancel_stops_an_in_process_run_and_resume_finishes(store: Store, k: int) -> None:
    cands = shas(200)
    bid = new_bisection(store, cands)

    def cancel_mid_probe(index: int, commit: str) -> None:
        if index == 4:
            assert bisections.request_cancel(store, bid)
            block_until_stopped(index, commit)  # killed by the lease's next beat
            raise cancel.Stopped("killed")

    first = FakeExecutor(cands, culprit=120, hook=cancel_mid_probe)
    with pytest.raises(Cancelled, match=f"bisect resume {bid}"):
        make_runner(store, bid, cands, first, width=k,
                    lease=Lease(store, bid, beat_s=0.02)).run()
    rec = bisections.get(store, bid)
    assert rec.state is State.CANCELLED and rec.owner is None
    stored = {p.commit_sha for p in run_store.probes(store, bid)}
    assert first.calls[3].commit not in stored  # the cancelled run was not recorded
    done = make_runner(store, bid, cands, FakeExecutor(cands, culprit=120), width=k).run()
    assert done.record.culprit_sha == cands[120]
    assert not bisections.cancel_requested(store, bid)  # resume cleared the request


class BrokenBoxQueue(ThreadQueue):
    """Every job fails for good on a box that lacks the clone (as a worker notes it)."""

    def _work(self, job: int, task_id: int) -> None:
        att = tasks.start(self.store, task_id, owner=f"box:{job}:1", worker="box/gpu0")
        assert att is not None
        tasks.note_error(self.store, task_id, att.number, "the clone /r of bisection 1 is not "
                         "on this box (box/gpu0): clone it at that path here")
        self.states[job] = JobState.FAILED


def test_a_probe_that_fails_on_its_worker_stops_the_run_with_why(store: Store) -> None:
    cands = shas(50)
    bid = new_bisection(store, cands)
    r = make_runner(store, bid, cands, FakeExecutor(cands, culprit=20), width=2, gpus=False)
    queue = BrokenBoxQueue(store, bid, cands, r.pipeline.executor)
    r.workers = Workers(store, queue, poll_s=0.01)
    with pytest.raises(ProbeFailed, match=r"failed on worker box/gpu0 \(the clone /r .*clone "
                                          r"it at that path here\); fix that, then `bisect "
                                          rf"resume {bid}`") as e:
        r.run()
    queue.close()
    assert e.value.exit_code == 11
    assert bisections.get(store, bid).state is State.INTERRUPTED
