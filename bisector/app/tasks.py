"""One probe task in a worker: start the next attempt, run the probe pipeline, write the result
fenced by that attempt.

The probe is the same :class:`~bisector.run.pipeline.Pipeline` every in-process probe and
``bisect check`` go through, built from the bisection's stored configuration (``app``'s
parts), so a verdict judged on a worker means what it means anywhere. While it runs, a watcher
thread stops it (``cancel.stop_all``: the oracle's process group, its reaper and every
container it registered) when the job is asked to abort (``bisect cancel``, or a shutdown past
its grace) or when the task is no longer this attempt's (a retry took it over after this
worker was silent too long). Nothing stopped is ever recorded.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bisector.app.bisections import sweep_leftovers
from bisector.artifacts.build import python_tag_or_none
from bisector.artifacts.obtained import Unobtainable
from bisector.base.errors import BisectorError, RepoError, TaskAborted, UsageError
from bisector.base.events import QuietEvents
from bisector.base.kinds import BuildPlace, TaskState
from bisector.core.search import Verdict
from bisector.infra import cancel
from bisector.infra.owner import owner_id
from bisector.infra.ticker import Ticker
from bisector.project import mirrors
from bisector.run.config import RunConfig
from bisector.run.opened import Opened, open_bisection
from bisector.run.policy import LOCAL, Policy
from bisector.run.remote import Superseded, TaskRecorder
from bisector.store import tasks, workers
from bisector.store.db import Store
from bisector.store.records import BisectionRecord

WATCH_S = 0.5  # how often the watcher asks whether to stop
FENCE_EVERY = 4  # ... and every this many looks, whether the task is still this attempt's
CONTEXTS = 8  # bisections whose parts a worker keeps between probes


class LogEvents(QuietEvents):
    """A worker's progress: one line per step, for the journal (what it does not say, it
    leaves to :class:`QuietEvents`)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say

    def note(self, text: str) -> None:
        self.say(f"note: {text}")

    def phase(self, sha: str, text: str) -> None:
        self.say(text)

    def status(self, text: str) -> None:
        self.say(text)

    def download(self, name: str, done: int, total: int | None) -> None:
        if total is not None and done == total:
            self.say(f"downloaded {name}")

    def probe_done(self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float,
                   reused: bool) -> None:
        how = "adopted" if reused else f"{seconds:.1f} s"
        self.say(f"{sha[:12]}: {verdict.value} ({how}){': ' + reason if reason else ''}")


class Host:
    """The worker process's side of a probe: its store, GPU, name and owner id."""

    def __init__(self, store: Store, *, gpu: str | None, name: str,
                 say: Callable[[str], None], pythons: Mapping[str, str] | None = None,
                 policy: Policy = LOCAL) -> None:
        self.store, self.gpu, self.name, self.say = store, gpu, name, say
        self.policy = policy  # the worker command's, for every task (run/policy.py)
        self.pythons = dict(pythons or {})  # tag -> this box's interpreter (worker/offer.py)
        self.me = owner_id()
        self.worker_id: int | None = None
        self.events = LogEvents(say)
        self._contexts: OrderedDict[int, Opened] = OrderedDict()

    def context(self, bisection_id: int) -> Opened:
        """The bisection as this box runs it (run/opened.py: its row read once), kept for the
        next probes; its repository and Python made this box's own (:meth:`here`)."""
        if bisection_id in self._contexts:
            self._contexts.move_to_end(bisection_id)
            return self._contexts[bisection_id]
        opened = open_bisection(self.store, bisection_id, self.events, here=self.here,
                                policy=self.policy)
        self._contexts[bisection_id] = opened
        while len(self._contexts) > CONTEXTS:
            self._contexts.popitem(last=False)
        return opened

    def here(self, cfg: RunConfig, rec: BisectionRecord, cands: list[str]) -> RunConfig:
        """The stored configuration as this box runs it: its own mirror of the repository's
        URL (or the clone at the coordinator's path) and its own Python of that version."""
        if cfg.repo_url:
            cfg = replace(cfg, repo=self._mirror(cfg, cands, rec.id))
        elif not Path(cfg.repo).is_dir():
            raise UsageError(f"the clone {cfg.repo} of bisection {rec.id} is not on "
                             f"this box ({self.name}) and the bisection has no repository "
                             f"URL: start it with --repo-url URL (or from a clone with an "
                             f"origin), or clone it at that path here")
        return replace(cfg, python=self._python(cfg, rec.environment, rec.id))

    def _python(self, cfg: RunConfig, environment: Mapping[str, Any], bisection_id: int) -> str:
        """The Python this box probes the bisection with: the one it was started with when
        that path is here and of the version its verdicts are keyed by, else this box's own
        of that version (its queue promised one: boxes keep interpreters in different
        places). A container's probes and builds bring their own."""
        facts = environment.get("executor") or {}
        if facts.get("executor") == "docker" and cfg.build.place is BuildPlace.DOCKER:
            return cfg.python
        tag = str(facts.get("python") or "")
        here = "/" in cfg.python and Path(cfg.python).exists()
        if here and python_tag_or_none(cfg.python) == tag:
            return cfg.python
        if tag in self.pythons:
            self.say(f"bisection {bisection_id}: probing with this box's Python "
                     f"{self.pythons[tag]} ({tag}), not {cfg.python}")
            return self.pythons[tag]
        if "/" not in cfg.python:
            return cfg.python  # a name this box's PATH resolves
        raise UsageError(f"the Python of bisection {bisection_id} ({tag or cfg.python}) is not "
                         f"on this box ({self.name}): install it and start the worker with "
                         f"--python PATH")

    def _mirror(self, cfg: RunConfig, cands: list[str], bisection_id: int) -> str:
        """This box's own mirror of the bisection's repository URL; a box that cannot reach
        the URL but has the clone at the coordinator's path works from that, and says so."""
        try:
            return str(mirrors.mirror(cfg.repo_url, cands))
        except RepoError as e:
            if not Path(cfg.repo).is_dir():
                raise RepoError(f"bisection {bisection_id}: {e.message}; nor is the clone "
                                f"{cfg.repo} on this box ({self.name})") from None
            self.say(f"bisection {bisection_id}: {e.message}; working from the clone at "
                     f"{cfg.repo} instead")
            return cfg.repo

    def run(self, task_id: int, should_abort: Callable[[], bool]) -> str:
        """Run the task's probe (a procrastinate job calls this in a thread). Returns a line
        for the job's log; raises ``TaskAborted`` when the job was asked to abort, and any
        other failure after noting it on the task (the job is retried, then fails)."""
        cancel.reset()
        sweep_leftovers(self.events)  # what a killed worker on this box left running
        att = tasks.start(self.store, task_id, owner=self.me, worker=self.name)
        if att is None:
            return f"task {task_id}: nothing to do (done or cancelled meanwhile)"
        t = att.task
        if self.worker_id is not None:
            workers.busy(self.store, self.worker_id, task_id)
        why: list[str] = []
        watcher = self._watcher(why, should_abort, task_id, att.number, f"watch-{task_id}")
        try:
            ctx = self.context(t.bisection_id)
            recorder = TaskRecorder(self.store, ctx.key, self.me, att, ctx.oracle.meta.sampled)
            pipe = ctx.parts.pipeline(ctx.oracle, recorder, ctx.parts.hunt(ctx.oracle, ctx.key))
            self.say(f"bisection {t.bisection_id}: probing {t.commit_sha[:12]} (task {task_id}"
                     f", attempt {att.number}{', GPU ' + self.gpu if self.gpu else ''})")
            res = pipe.probe(t.position, t.commit_sha, gpu=self.gpu, round_=t.round)
            return f"{t.commit_sha[:12]}: {res.verdict.value}"
        except (cancel.Stopped, Superseded) as e:
            if should_abort():
                self.say(f"{t.commit_sha[:12]}: stopped (the job was cancelled); not recorded")
                raise TaskAborted(f"task {task_id} aborted") from None
            self.say(f"{t.commit_sha[:12]}: stopped, {why[0] if why else e}; not recorded")
            return f"task {task_id} attempt {att.number}: superseded, nothing written"
        except BaseException as e:
            msg = e.message if isinstance(e, BisectorError) else f"{type(e).__name__}: {e}"
            tasks.note_error(self.store, task_id, att.number, msg)
            self.say(f"{t.commit_sha[:12]}: the probe failed: {msg}")
            raise
        finally:
            watcher.stop()
            if self.worker_id is not None:
                workers.busy(self.store, self.worker_id, None)

    def build(self, task_id: int, should_abort: Callable[[], bool]) -> str:
        """Build the commit of a task whose probe is still waiting into the cache (a build
        job on a CPU-only worker; the probe job holds the same lock, so it starts after).
        Not fenced: a wheel is content-addressed and published once, so a build made twice
        costs time, never a wrong result."""
        cancel.reset()
        found = tasks.get(self.store, [task_id])
        if not found or found[0].state is not TaskState.QUEUED:
            return f"task {task_id}: no build needed (its probe has started or ended)"
        t = found[0]
        if self.worker_id is not None:
            workers.busy(self.store, self.worker_id, task_id)
        watcher = self._watcher([], should_abort, None, 0, f"watch-build-{task_id}")
        try:
            ctx = self.context(t.bisection_id)
            self.say(f"bisection {t.bisection_id}: building {t.commit_sha[:12]} ahead of its "
                     f"probe (task {task_id})")
            got = ctx.parts.source.obtain(t.position)
            said = got.reason if isinstance(got, Unobtainable) else "ready"
            return f"{t.commit_sha[:12]}: {said}"
        except cancel.Stopped:
            if should_abort():
                raise TaskAborted(f"build for task {task_id} aborted") from None
            raise
        finally:
            watcher.stop()
            if self.worker_id is not None:
                workers.busy(self.store, self.worker_id, None)

    def _watcher(self, why: list[str], should_abort: Callable[[], bool], task_id: int | None,
                 attempt: int, name: str) -> Ticker:
        """Stops the probe in hand (``cancel.stop_all``) when its job is aborted or, every
        :data:`FENCE_EVERY` looks, when another attempt took the task over; ``why`` says
        which."""
        looks = [0]

        def look() -> bool:
            looks[0] += 1
            if should_abort():
                why.append("the job was cancelled")
            elif (task_id is not None and looks[0] % FENCE_EVERY == 0
                  and not tasks.current(self.store, task_id, attempt)):
                why.append("another attempt took the task over")
            else:
                return True
            cancel.stop_all()
            return False

        return Ticker(WATCH_S, look, name).start()
