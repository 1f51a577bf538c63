"""The one composition root: every entry point (the CLI today; a scheduler, a worker or a web
view tomorrow) calls these functions and nothing below them.

Each function takes plain values (a :class:`~bisector.run.config.Request`, a bisection id, a
:class:`~bisector.store.db.Store`) and returns plain data; none of them prints. Progress goes to
the :class:`~bisector.base.events.Events` the caller passes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bisector.app import disk
from bisector.app import gc as cleanup
from bisector.app import reports as report
from bisector.app.plan import PlanReport, make_plan, price
from bisector.artifacts.cache import sweep_scratch
from bisector.base.errors import UsageError
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import BuildPlace, ExecutorKind, State
from bisector.base.paths import data_dir
from bisector.core.sampling import sampling_for
from bisector.infra.containers import client, local_owner_alive, sweep_orphans
from bisector.infra.owner import local_pid_alive
from bisector.infra.proc import sweep_probes
from bisector.project import history
from bisector.run.config import Request, RunConfig, decode, legacy_rules
from bisector.run.factory import Parts, materialise_oracle
from bisector.run.prepare import Prepared, discover, prepare, record
from bisector.run.remote import Remote
from bisector.run.runner import Finished, Runner
from bisector.run.strategies.plain import stored_verdicts
from bisector.store import bisections, durations, tasks, verdicts, workers
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store
from bisector.store.records import BisectionRecord

if TYPE_CHECKING:
    from bisector.app.watch.config import WatchConfig
    from bisector.app.watch.tick import TickReport


def create(open_store: Callable[[], Store], req: Request,
           oracles_dir: Path | None = None) -> tuple[Store, int]:
    """Validate (before the store is even opened), map prebuilt wheels, record; returns the id.

    A refused request leaves no database behind, and an index problem records nothing.
    """
    prepared = prepare(req, oracles_dir)
    store = open_store()
    return store, record(store, discover(store, prepared))


def bisection(store: Store, bisection_id: int) -> BisectionRecord:
    """The stored bisection (NotFoundError, one line, for an unknown id)."""
    return bisections.get(store, bisection_id)


def config_of(store: Store, bisection_id: int) -> RunConfig:
    """The stored configuration, also of a bisection stored by an older bisector."""
    rec = bisections.get(store, bisection_id)
    cfg = decode(rec.settings)
    if rec.settings.get("version") != 2:
        oracle = materialise_oracle(bisections.get_oracle(store, rec.oracle_sha256))
        cfg = replace(cfg, request=replace(cfg.request, good=rec.good_ref, bad=rec.bad_ref,
                                           oracle=rec.oracle_name),
                      rules=legacy_rules(rec.polarity, cfg.request.find_fix,
                                         oracle.meta.on_timeout.value))
    return cfg


def runner(store: Store, bisection_id: int, events: Events | None = None,
           remote: Remote | None = None, width: int | None = None) -> Runner:
    """Everything one stored bisection needs to run, built from the store alone; with
    ``remote``, its rounds of ``width`` probes go to workers instead of this process."""
    events = events or QuietEvents()
    rec = bisections.get(store, bisection_id)
    cfg = config_of(store, bisection_id)
    cands = bisections.candidates(store, bisection_id)
    oracle = materialise_oracle(bisections.get_oracle(store, rec.oracle_sha256))
    parts = Parts(store, cfg, cands, events, labels={"bisector.bisection": str(bisection_id)})

    def subject(sha: str) -> str:
        try:
            return history.commit_info(parts.repos(), sha).subject
        except Exception:
            return ""

    slots: list[str | None] = cfg.slots() if remote is None else [None] * (width or 1)
    return Runner(store, rec, cands, oracle, cfg.rules, parts.provider, parts.executor,
                  slots=slots, events=events, subject=subject,
                  confirm=cfg.request.confirm and not cfg.request.manual, remote=remote)


def queue_for(store: Store, cfg: RunConfig, enqueue: bool | None,
              events: Events) -> tuple[Remote | None, int | None]:
    """Whether this run's probes go to workers, and how many a round: ``enqueue`` True or
    False forces it; None enqueues when the store is PostgreSQL and a live worker serves the
    probe queue. A round is ``--jobs`` probes, else one per live worker."""
    postgres = store.engine.dialect.name == "postgresql"
    if enqueue is False or (enqueue is None and not postgres):
        return None, None
    if cfg.request.manual:
        if enqueue:
            raise UsageError("--manual asks a person at this terminal about each probe: drop "
                             "--enqueue")
        return None, None
    live = workers.live(store) if postgres else []
    if not live and not enqueue:
        return None, None
    if not enqueue and not need_queue(required=False):
        events.note(f"{len(live)} live worker(s), but procrastinate is not installed here: "
                    f"probing in this process (pip install 'bisector[postgres]' to enqueue)")
        return None, None
    need_queue()
    from bisector.queue.procrastinate import JobQueue, conninfo

    conninfo(store)  # --enqueue on SQLite: one line saying what to give instead
    width = cfg.request.jobs or max(1, len(live))
    if live:
        events.note(f"{len(live)} live worker(s): each round's {width} probe(s) go to the "
                    f"queue (bisect workers lists them)")
    else:
        events.note("no live worker serves the probe queue yet: probes wait there until "
                    "`bisect worker` starts")
    return Remote(store, JobQueue(store)), width


def run(store: Store, bisection_id: int, events: Events | None = None,
        enqueue: bool | None = None) -> Finished:
    """Run (or continue) a stored bisection to its end (``enqueue``: see ``queue_for``)."""
    events = events or QuietEvents()
    cfg = config_of(store, bisection_id)
    remote, width = queue_for(store, cfg, enqueue, events)
    r = runner(store, bisection_id, events, remote, width)
    sweep_leftovers(events)
    if cfg.executor is ExecutorKind.DOCKER or cfg.build.place is BuildPlace.DOCKER:
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
        if bisections.get(store, bisection_id).state in (State.DONE, State.AMBIGUOUS,
                                                         State.FAILED):
            try:
                write_reports(store, bisection_id)
            except Exception as e:  # the answer is stored: a report must never cost it
                events.note(f"could not write the reports ({type(e).__name__}: {e}); "
                            f"`bisect show {bisection_id} --format issue` prints them")
            apply_cache_cap(store, events)


def apply_cache_cap(store: Store, events: Events) -> None:
    """The optional cache cap (``BISECTOR_MAX_CACHE``) after a bisection ended: a warning at
    worst, never a failed bisection."""
    try:
        said = cleanup.after_bisection(store)
    except Exception as e:
        said = f"warning: the cache cap was not applied ({type(e).__name__}: {e})"
    if said:
        events.note(said)


def report_paths(store: Store, bisection_id: int) -> tuple[Path, Path]:
    """Where a finished bisection's issue report (Markdown) and HTML report are written: named
    by the store too, since ids repeat across stores (a team's PostgreSQL and a local file)."""
    tag = hashlib.sha256(store.url.encode()).hexdigest()[:8]
    folder = data_dir() / "reports"
    stem = f"bisection-{bisection_id}-{tag}"
    return folder / f"{stem}.md", folder / f"{stem}.html"


def write_reports(store: Store, bisection_id: int) -> tuple[Path, Path]:
    """Write both reports at the end of a bisection, so they exist without anyone asking."""
    md, html = report_paths(store, bisection_id)
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(issue_report(store, bisection_id), encoding="utf-8")
    html.write_text(html_report(store, bisection_id), encoding="utf-8")
    return md, html


def sweep_leftovers(events: Events) -> None:
    """What killed controllers left on this host: probe processes and scratch folders."""
    killed = sweep_probes(lambda owner: local_pid_alive(owner) is False)
    if killed:
        events.note(f"stopped {len(killed)} oracle process(es) left by a controller that is gone")
    sweep_scratch()


def resume(store: Store, bisection_id: int, events: Events | None = None,
           enqueue: bool | None = None) -> Finished:
    """Finish a stored bisection; a finished one is only reported again."""
    rec = bisections.get(store, bisection_id)
    if rec.state in (State.DONE, State.AMBIGUOUS):
        return Finished(rec, 0)
    if rec.state is State.FAILED:
        raise UsageError(f"bisection {bisection_id} stopped: {rec.message} "
                         f"(start a new one instead)")
    return run(store, bisection_id, events, enqueue)


def cancel(store: Store, bisection_id: int) -> dict[str, Any]:
    """``bisect cancel``: stop a bisection's probes in flight, none of them judged, and its
    coordinator (at its next look; an in-process run at its next heartbeat). What is stored
    stays; ``resume`` finishes the bisection."""
    rec = bisections.get(store, bisection_id)
    if rec.state.finished or not bisections.request_cancel(store, bisection_id):
        raise UsageError(f"bisection {bisection_id} is already {rec.state.value}: there is "
                         f"nothing to cancel (bisect show {bisection_id})")
    stopped = tasks.cancel_open(store, bisection_id)
    jobs = tasks.jobs_of(stopped)
    # Without the queue's package here the jobs are left alone: a running one's worker sees
    # its task cancelled within seconds and stops, a waiting one finds nothing to do.
    if jobs and need_queue(required=False):
        from bisector.queue.procrastinate import JobQueue

        queue = JobQueue(store)
        try:
            for job in jobs:
                queue.abort(job)
        finally:
            queue.close()
    return {"bisection": bisection_id, "coordinator": rec.owner,
            "stopped": [{"commit": t.commit_sha, "worker": t.worker, "attempt": t.attempt,
                         "state": t.state.value} for t in stopped]}


def worker(store: Store, *, gpu: str | None, queues: tuple[str, ...], name: str | None,
           say: Callable[[str], None]) -> None:
    """``bisect worker``: take probes from the store's queue until stopped."""
    need_queue()
    from bisector.worker.process import serve

    serve(store, gpu=gpu, queues=queues, name=name, say=say)


def need_queue(required: bool = True) -> bool:
    """Is the queue's package (procrastinate, the ``postgres`` extra) installed? A one-line
    error saying how to get it when ``required``."""
    import importlib.util

    if importlib.util.find_spec("procrastinate") is not None:
        return True
    if required:
        raise UsageError("workers need the procrastinate package: pip install "
                         "'bisector[postgres]' (or pip install 'procrastinate>=3')")
    return False


def workers_data(store: Store) -> dict[str, Any]:
    """``bisect workers``: the workers seen in the last day (live ones first), each with its
    GPU, the probe it runs and its last heartbeat, and the queue's jobs by status."""
    rows = [w.as_dict() for w in workers.listing(store)]
    queue: list[dict[str, Any]] = []
    if store.engine.dialect.name == "postgresql" and need_queue(required=False):
        from bisector.queue.procrastinate import JobQueue, has_queue

        if has_queue(store):
            jq = JobQueue(store)
            try:
                queue = jq.summary()
            finally:
                jq.close()
    return {"workers": rows, "queues": queue}


def plan(store: Store, req: Request, costs: dict[str, float]) -> PlanReport:
    """``bisect plan``: the projection for a range, from the same parts a run uses.

    ``costs``: the user's ``--cost`` overrides; every other step is priced with what it took
    on this repository, else a default. The search starts from the verdicts a run of this
    request would reuse (same oracle bytes, same environment fingerprint), found by the
    runner's own lookup.
    """
    p: Prepared = discover(store, prepare(req))
    cfg, cands = p.config, list(p.plan.candidates)
    parts = Parts(store, cfg, cands, QuietEvents())
    key = verdicts.Key(p.oracle.sha256, p.fingerprint)
    known = {pos: v for pos, (_, v) in stored_verdicts(store, key, cands, cfg.rules).items()}
    measured: dict[str, tuple[durations.Measured, str]] = {}
    if (build := durations.build_seconds(store, cfg.repo, cfg.profile)) is not None:
        measured["build"] = (build, f"{cfg.profile} source builds of this repository")
    if (oracle := durations.oracle_seconds(store, p.oracle.sha256)) is not None:
        measured["oracle"] = (oracle, "runs of this oracle")
    elif (oracle := durations.repo_oracle_seconds(store, cfg.repo)) is not None:
        measured["oracle"] = (oracle, "oracle runs on this repository")
    table, sources = price(costs, measured)
    prebuilt = [{"position": pb.position, "commit": pb.wheel.commit, "kind": pb.wheel.kind,
                 "filename": pb.wheel.filename, "source": pb.wheel.source,
                 "sha256_from": pb.wheel.sha256_from} for pb in cfg.prebuilts]
    if cfg.installed:
        sha = cfg.installed.commit
        prebuilt.append({"position": cands.index(sha) if sha in cands else None,
                         "commit": sha, "kind": "installed", "filename": cfg.installed.site})
    found = p.discovery
    return make_plan(
        parts.provider, len(cands), table,
        missing=[pb.filename for pb in found.missing] if found else [],
        unmapped=[f"{pb.filename}: {pb.reason}" for pb in found.unmapped] if found else [],
        prebuilt=prebuilt, notes=list(p.plan.notes), known=known, cost_sources=sources,
        sampling=sampling_for(p.oracle.meta, cfg.request.confirm))


def show(store: Store, bisection_id: int) -> dict[str, Any]:
    # Logs removed by `bisect gc` are named as such, so no rendering points at a missing file.
    return disk.mark_removed_logs(report.show_data(store, bisection_id,
                                                   config_of(store, bisection_id)))


def issue_report(store: Store, bisection_id: int) -> str:
    """The paste-ready GitHub issue text (no local paths)."""
    from bisector.app.issue import issue_markdown

    return issue_markdown(show(store, bisection_id), config_of(store, bisection_id).request)


def html_report(store: Store, bisection_id: int) -> str:
    """One self-contained HTML file: timeline, probes with their output, facts."""
    from bisector.app.html import render_report

    d = show(store, bisection_id)
    return render_report(d, issue=issue_report(store, bisection_id))


def listing(store: Store, limit: int,
            where: report.ListFilter | None = None) -> list[dict[str, Any]]:
    return report.list_data(store, limit, where)


def log(store: Store, bisection_id: int) -> str:
    return report.log_text(show(store, bisection_id))


def log_data(store: Store, bisection_id: int) -> list[dict[str, Any]]:
    return report.log_data(show(store, bisection_id))


def disk_usage(store: Store | None) -> dict[str, Any]:
    """``bisect du``: usage by kind; the store (when there is one) adds its record of when
    each artifact was last used."""
    uses = ({u.key: u.last_used.timestamp() for u in ArtifactStore(store).last_uses()}
            if store is not None else None)
    return disk.du_data(disk.inventory(uses))


def gc(store: Store, *, max_size: int | None, older_than_s: float | None,
       dry_run: bool) -> cleanup.Plan:
    """``bisect gc``: least recently used artifacts no unfinished bisection of ``store`` needs."""
    return cleanup.collect(store, max_size=max_size, older_than_s=older_than_s,
                           dry_run=dry_run)


def tick(store: Store, cfg: WatchConfig, *, bisect: bool, events: Events | None = None,
         say: Callable[[str], None] = lambda _line: None, only: tuple[str, ...] = ()
         ) -> TickReport:
    """``bisect tick``: one idempotent pass of the nightly watch (see ``watch/tick.py``)."""
    from bisector.app.watch.tick import Tick

    return Tick(store, cfg, bisect=bisect, events=events, say=say, only=only).run()


def watch_table(store: Store) -> dict[str, Any]:
    """``bisect watch --json`` and ``/api/watch``: oracle x torch per suite, from the store."""
    from bisector.app.watch.table import table_data

    return table_data(store)
