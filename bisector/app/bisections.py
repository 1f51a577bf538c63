"""A bisection's use cases: create, run, resume, cancel. Every entry point (the CLI, the watch's
tick, a worker, the web view) calls these; the parts they run are built in ``run/factory.py``.

Each function takes plain values (a :class:`~bisector.run.config.Request`, a bisection id, a
:class:`~bisector.store.db.Store`) and returns plain data; none of them prints. Progress goes to
the :class:`~bisector.base.events.Events` the caller passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bisector.app import gc as cleanup
from bisector.app.report.views import report_paths, show, write_reports
from bisector.artifacts.cache import sweep_scratch
from bisector.base.errors import UsageError
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import State
from bisector.infra.containers import client, local_owner_alive, sweep_orphans
from bisector.infra.owner import local_pid_alive, owner_alive
from bisector.infra.proc import sweep_probes
from bisector.queue import need_queue
from bisector.queue.routing import PROBE, Need, kind
from bisector.run.config import Request, RunConfig
from bisector.run.opened import open_bisection
from bisector.run.policy import Policy
from bisector.run.prepare import discover, prepare, record
from bisector.run.remote import Workers
from bisector.run.runner import Finished, Runner
from bisector.store import bisections, tasks, workers
from bisector.store.db import Store, connection_lost
from bisector.store.records import BisectionRecord


def create(open_store: Callable[[], Store], req: Request,
           oracles_dir: Path | None = None, events: Events | None = None) -> tuple[Store, int]:
    """Validate (before the store is even opened), map prebuilt wheels, record; returns the id.

    A refused request leaves no database behind, and an index problem records nothing.
    ``events`` hears of each wait on an index before it starts.
    """
    prepared = prepare(req, oracles_dir)
    store = open_store()
    return store, record(store, discover(store, prepared, (events or QuietEvents()).status))


@dataclass(frozen=True)
class Ran:
    """A bisection run to its end (or reported again), as a command shows it."""

    store: Store
    bisection_id: int
    shown: dict[str, Any]  # app/report/views.show
    reports: tuple[Path, Path] | None  # (Markdown, HTML) when this run wrote them

    @property
    def exit_code(self) -> int:
        """0 for an answer; its own code for one openly unsure, or "no regression"."""
        return State(self.shown["state"]).exit_code


Begun = Callable[[Store, int], None]


def start(open_store: Callable[[], Store], req: Request, events: Events | None = None,
          enqueue: bool | None = None, oracles_dir: Path | None = None,
          begun: Begun = lambda _store, _id: None, *, policy: Policy) -> Ran:
    """``bisect start`` in one call: check and record the request (:func:`create`), run it
    to its end (:func:`run`) and read back what a command shows. ``begun`` hears the id once
    it is stored: a caller interrupted after that says how to resume. ``policy``: the
    command's resolved choices (its object store), as every run function takes them."""
    events = events or QuietEvents()
    store, bisection_id = create(open_store, req, oracles_dir, events)
    return carry_on(store, bisection_id, events, enqueue, begun, fresh=True, policy=policy)


def carry_on(store: Store, bisection_id: int, events: Events | None = None,
             enqueue: bool | None = None, begun: Begun = lambda _store, _id: None, *,
             fresh: bool = False, policy: Policy) -> Ran:
    """Run a stored bisection (``fresh``: just created; otherwise as :func:`resume`, which
    reports a finished one again) and read back what a command shows: its view and its
    reports."""
    rec = bisection(store, bisection_id)  # an unknown id: one line, before anything runs
    begun(store, bisection_id)
    if fresh:
        run(store, rec, events, enqueue, policy=policy)
    else:
        resume(store, bisection_id, events, enqueue, policy=policy)
    md, html = report_paths(store, bisection_id)
    # The names are this store's and this bisection's: they exist when this run wrote them.
    return Ran(store, bisection_id, show(store, bisection_id),
               (md, html) if md.exists() else None)


def bisection(store: Store, bisection_id: int) -> BisectionRecord:
    """The stored bisection (NotFoundError, one line, for an unknown id)."""
    return bisections.get(store, bisection_id)


def queue_for(store: Store, cfg: RunConfig, enqueue: bool | None, events: Events,
              need: Need) -> tuple[Workers | None, int | None]:
    """Whether this run's probes go to workers, and how many a round: ``enqueue`` True or
    False forces it; None enqueues when the store is PostgreSQL and a live worker offers the
    bisection's environment (``need``, ``queue/routing.py``). A round is ``--jobs`` probes,
    else one per such worker."""
    postgres = store.engine.dialect.name == "postgresql"
    if enqueue is False or (enqueue is None and not postgres):
        return None, None
    if cfg.request.manual:
        if enqueue:
            raise UsageError("--manual asks a person at this terminal about each probe: drop "
                             "--enqueue")
        return None, None
    every = workers.live(store) if postgres else []
    live = [w for w in every if need.queue in w.queues]
    others = len([w for w in every if any(kind(q) == PROBE for q in w.queues)]) - len(live)
    hint = (" (a bisection started on a box without their GPU: give --gpu-model as "
            "`bisect workers` shows it)" if others and not need.gpus else "")
    if not live and not enqueue:
        if others:
            events.note(f"{others} live worker(s), none offering this bisection's environment "
                        f"({need.words()}): probing in this process{hint}")
        return None, None
    if not enqueue and not need_queue(required=False):
        events.note(f"{len(live)} live worker(s), but procrastinate is not installed here: "
                    f"probing in this process (pip install 'bisector[postgres]' to enqueue)")
        return None, None
    need_queue()
    # lazy: procrastinate is the optional postgres extra
    from bisector.queue.procrastinate import JobQueue, conninfo

    conninfo(store)  # --enqueue on SQLite: one line saying what to give instead
    width = cfg.asked_width or max(1, len(live))
    if live:
        events.note(f"{len(live)} live worker(s) offer this bisection's environment "
                    f"({need.words()}): each round's {width} probe(s) go to their queue "
                    f"(bisect workers lists them)")
    else:
        events.note(f"no live worker offers this bisection's environment ({need.words()})"
                    + (f"; {others} other(s) do not" if others else "")
                    + f": probes wait in its queue until such a `bisect worker` starts{hint}")
    return Workers(store, JobQueue(store), route=need.queue, build_route=need.build_queue), width


def run(store: Store, bisection: int | BisectionRecord, events: Events | None = None,
        enqueue: bool | None = None, *, policy: Policy) -> Finished:
    """Run (or continue) a stored bisection to its end (``enqueue``: see ``queue_for``);
    its row read once, here or by the caller."""
    events = events or QuietEvents()
    opened = open_bisection(store, bisection, events, policy=policy)
    bisection_id, cfg = opened.record.id, opened.cfg
    remote, width = queue_for(store, cfg, enqueue, events,
                              Need.of(opened.record.environment, cfg.variant))
    r = Runner.of(opened, remote, width)
    sweep_leftovers(events)
    if r.means.contained:
        for name in sweep_orphans(client(), local_owner_alive):
            events.note(f"removed container {name} left by a controller that is gone")
    for note in r.record.notes:
        events.note(str(note))
    try:
        return r.run()
    finally:
        if remote is not None:
            remote.close()
        # Every bisection that ended (a culprit, a window, or stopped on an endpoint) gets its
        # reports; one that was interrupted is not over and gets none.
        if _ended(store, bisection_id):
            try:
                write_reports(store, bisection_id)
            except Exception as e:  # the answer is stored: a report must never cost it
                events.note(f"could not write the reports ({type(e).__name__}: {e}); "
                            f"`bisect show {bisection_id} --format issue` prints them")
            apply_cache_cap(store, events)


def _ended(store: Store, bisection_id: int) -> bool:
    """Did the bisection end? False when the store is away (the run says so on its own)."""
    try:
        return bisections.get(store, bisection_id).state.finished
    except Exception as e:
        if connection_lost(e):
            return False
        raise


def apply_cache_cap(store: Store, events: Events) -> None:
    """The optional cache cap (``BISECTOR_MAX_CACHE``) after a bisection ended: a warning at
    worst, never a failed bisection."""
    try:
        said = cleanup.after_bisection(store)
    except Exception as e:
        said = f"warning: the cache cap was not applied ({type(e).__name__}: {e})"
    if said:
        events.note(said)


def sweep_leftovers(events: Events) -> None:
    """What killed controllers left on this host: probe processes and scratch folders."""
    killed = sweep_probes(lambda owner: local_pid_alive(owner) is False)
    if killed:
        events.note(f"stopped {len(killed)} oracle process(es) left by a controller that is gone")
    sweep_scratch()


def resume(store: Store, bisection_id: int, events: Events | None = None,
           enqueue: bool | None = None, *, policy: Policy) -> Finished:
    """Finish a stored bisection; a finished one is only reported again."""
    rec = bisections.get(store, bisection_id)
    if rec.state.answered:
        return Finished(rec, 0)
    if rec.state is State.FAILED:
        raise UsageError(f"bisection {bisection_id} stopped: {rec.message} "
                         f"(start a new one instead)")
    return run(store, rec, events, enqueue, policy=policy)


def cancel(store: Store, bisection_id: int) -> dict[str, Any]:
    """``bisect cancel``: stop a bisection's probes in flight (oracle runs, builds, installs,
    confirmation runs), none of them judged, and its coordinator, within
    ``defaults.CANCEL_POLL_S``. It ends ``cancelled``: what is stored stays, the watch never
    takes it up again, and only ``bisect resume`` finishes it."""
    rec = bisections.get(store, bisection_id)
    # Nobody alive runs it (interrupted, or its coordinator died): cancelled now, for good;
    # otherwise its coordinator sees the request within defaults.CANCEL_POLL_S and stops.
    nobody = rec.state is not State.RUNNING or not owner_alive(rec.owner, rec.heartbeat_at)
    if rec.state.finished or not (
            bisections.request_cancel(store, bisection_id, dead_owner=rec.owner,
                                      nobody_runs=nobody)
            or (nobody and bisections.request_cancel(store, bisection_id))):
        raise UsageError(f"bisection {bisection_id} is already {rec.state.value}: there is "
                         f"nothing to cancel (bisect show {bisection_id})")
    stopped = tasks.cancel_open(store, bisection_id)
    jobs = tasks.jobs_of(stopped)
    # Without the queue's package here the jobs are left alone: a running one's worker sees
    # its task cancelled within seconds and stops, a waiting one finds nothing to do.
    if jobs and need_queue(required=False):
        # lazy: procrastinate is the optional postgres extra
        from bisector.queue.procrastinate import JobQueue

        queue = JobQueue(store)
        try:
            for job in jobs:
                queue.abort(job)
        finally:
            queue.close()
    # A run in the coordinator's own process has no queue tasks: its round in flight is what
    # the coordinator itself stops (it said "no probe was in flight" while one ran).
    own: list[str] = []
    if not stopped and not nobody and rec.in_flight:
        cands = bisections.candidates(store, bisection_id)
        own = [cands[p] for p in rec.in_flight.get("positions", []) if 0 <= p < len(cands)]
    return {"bisection": bisection_id, "coordinator": rec.owner,
            "stopped": [{"commit": t.commit_sha, "worker": t.worker, "attempt": t.attempt,
                         "state": t.state.value} for t in stopped],
            "in_process": own}


