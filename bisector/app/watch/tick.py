"""``bisect tick``: one idempotent pass of the nightly watch.

For each suite: find its newest torch; for each oracle, claim the result key (suite, oracle,
torch version, commit) and run the oracle once, through the same pipeline as ``bisect check``
and every probe; a key already recorded runs nothing, and one another live tick is judging is
waited for (so every tick ends knowing every result of its pass). Then compare each oracle's
last two results that said good or bad: a change (good -> bad: a regression, bad -> good: a fix)
is a flip, and the tick that inserts the flip's unique row starts its bisection, between those
two commits, through ``bisections.create``. Without ``--no-bisect`` the tick then runs the watch's
unfinished bisections nobody alive is running (its own, and those an earlier ``--no-bisect``
tick or a crash left), in-process: the SQLite one-box path. Last, every flip and every ended
bisection is announced once (``notify.py``), by whichever tick takes that right first.

Nothing here keeps state between ticks except the store, so a tick killed at any instant is
finished by the next one: a result claim or a flip claim whose owner died is taken over.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bisector.app import bisections as app
from bisector.app import views
from bisector.app.watch import series as perf_series
from bisector.app.watch import sources
from bisector.app.watch.config import Suite, WatchConfig
from bisector.app.watch.notify import flip_markdown, flip_words, send, write_event
from bisector.artifacts.installable import Installable
from bisector.base import defaults, redact
from bisector.base.errors import BisectorError, BusyError, UsageError
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import State
from bisector.base.paths import data_dir
from bisector.executors.base import Executor
from bisector.infra import cancel
from bisector.infra.owner import owner_alive, owner_id
from bisector.infra.ticker import Ticker
from bisector.oracle.script import Oracle, load_oracle
from bisector.project import history
from bisector.project.interpreter import choose_python
from bisector.project.profiles import get_profile
from bisector.run.config import Request
from bisector.run.factory import judge_for, ready_pipeline
from bisector.run.prepare import configured_index, pick_profile
from bisector.store import bisections
from bisector.store import watch as ws
from bisector.store.db import Store

POLL_S = 2.0  # how often a tick looks whether another tick's result is in


@dataclass
class TickReport:
    """What one pass did: a line per thing, and the suites that failed (one line each)."""

    lines: list[str] = field(default_factory=list)
    ran: int = 0  # oracle runs this tick paid for
    started: list[int] = field(default_factory=list)  # bisections this tick created
    finished: list[int] = field(default_factory=list)  # bisections this tick ran to the end
    errors: list[BisectorError] = field(default_factory=list)


class Tick:
    def __init__(self, store: Store, cfg: WatchConfig, *, bisect: bool,
                 events: Events | None = None, say: Callable[[str], None] = lambda _s: None,
                 only: tuple[str, ...] = ()) -> None:
        self.store, self.cfg, self.bisect = store, cfg, bisect
        self.events: Events = events or QuietEvents()
        self.report = TickReport()
        self._say, self.only = say, only
        self.me = owner_id()
        self._tried: set[int] = set()  # flips whose bisection this tick tried to start

    def say(self, line: str) -> None:
        self.report.lines.append(line)
        self._say(line)

    def run(self) -> TickReport:
        for suite in self.cfg.suites:
            if self.only and suite.name not in self.only:
                continue
            try:
                self._suite(suite)
            except BisectorError as e:
                self.report.errors.append(e)
                self.say(f"{suite.name}: {e.message}")
        for flip in ws.orphaned_flips(self.store, self.me):  # a tick died before starting it
            self._start(flip)
        for flip in ws.unstarted_flips(self.store, self.me, self.only, frozenset(self._tried)):
            # Its bisection could not start (a [suite.bisect] option, a suite gone): kept, and
            # tried again each tick, so the tick after the configuration is fixed starts it.
            self.say(f"{flip.suite}: {flip.oracle} {flip.kind} (flip {flip.id}): starting its "
                     f"bisection again")
            self._start(flip)
        if self.bisect:
            self._run_bisections()
        self._announce_ends()
        if not (self.report.ran or self.report.started or self.report.finished
                or self.report.errors):
            self.say("nothing new: every result of this pass was recorded before")
        return self.report

    # -- results -------------------------------------------------------------------------

    def _place(self, suite: Suite) -> sources.Place:
        repo = sources.open_repo(suite.repo)
        profile = (get_profile(suite.profile) if suite.profile else
                   pick_profile(repo, history.resolve(repo, "HEAD", "HEAD"), None))
        python = choose_python(suite.python, profile.import_name).path
        variant = suite.variant or profile.default_variant
        index = suite.index
        if suite.torch == "nightly" and index is None and profile.nightly_index:
            index = profile.nightly_index.format(variant=variant)
        if suite.torch == "release" and index is None and profile.name == "pytorch":
            index = configured_index()
        if suite.torch in ("nightly", "release") and (index is None
                                                      or profile.distribution is None):
            raise UsageError(f"{suite.where}: torch = {suite.torch!r} needs index = \"URL\" "
                             f"(the {profile.name} profile has no default {suite.torch} index)")
        return sources.Place(suite.torch, repo, profile, python, variant, index, suite.wheel)

    def _suite(self, suite: Suite) -> None:
        place = self._place(suite)
        if place.index is not None and place.kind in ("nightly", "release"):
            # An index's listing can take a minute: never a silent wait (issue 21)
            self.events.status(f"{suite.name}: listing {redact.url(place.index)} for the "
                               f"newest {place.kind} torch")
        torch = sources.newest(self.store, place)
        self.say(f"{suite.name}: newest {torch.kind} torch {torch.version} "
                 f"(main commit {torch.commit[:12]})")
        # Builds are compared by what they are (sources.precedes), never by when a tick saw
        # them: results from before positions were recorded get theirs first.
        ws.fill_positions(self.store, suite.name, lambda sha: sources.position(place.repo, sha))
        latest = ws.newest_judged(self.store, suite.name)
        if latest is not None and sources.precedes(place.repo, torch, latest):
            self.say(f"{suite.name}: torch {torch.version} is older than torch "
                     f"{latest.key.torch_version} (main commit {latest.key.commit_sha[:12]}), "
                     f"judged already (withdrawn from the index?): nothing new, no flip")
            return
        env: list[tuple[Installable, Executor]] = []  # made once, only if a run is ours

        def environment() -> tuple[Installable, Executor]:
            if not env:
                env.append(sources.environment(self.store, torch, place,
                                               self.events.download))
            return env[0]

        for spec in suite.oracles:
            oracle = load_oracle(spec)
            key = ws.ResultKey(suite.name, oracle.name, torch.version, torch.commit)
            self._result(key, torch, oracle, environment)
            if oracle.meta.threshold is not None:  # measured: its steps, not its exit codes
                self._steps(suite, spec, oracle.name, oracle.meta.threshold, place)
            else:
                self._flip(suite, spec, oracle.name, place)

    def _result(self, key: ws.ResultKey, torch: sources.Torch, oracle: Oracle,
                environment: Callable[[], tuple[Installable, Executor]]) -> ws.ResultRecord:
        waited = False
        while True:
            state, rec = ws.claim_result(self.store, key, source=torch.source,
                                         git_version=torch.git_version, me=self.me,
                                         position=torch.position)
            if state == "done":
                if not waited:
                    self.say(f"  {key.oracle}: {rec.verdict} (recorded before)")
                else:
                    self.say(f"  {key.oracle}: {rec.verdict} (judged by {rec.owner})")
                return rec
            if state == "mine":
                return self._judge(rec, torch, oracle, environment)
            if not waited:
                self.say(f"  {key.oracle}: being judged by {rec.owner}; waiting for it")
                waited = True
            if cancel.stopping():
                raise cancel.Stopped("stopped while waiting for another tick")
            time.sleep(POLL_S)

    def _judge(self, rec: ws.ResultRecord, torch: sources.Torch, oracle: Oracle,
               environment: Callable[[], tuple[Installable, Executor]]) -> ws.ResultRecord:
        def beat() -> bool:
            ws.beat_result(self.store, rec.id, self.me)
            return True

        beating = Ticker(defaults.LEASE_BEAT_S, beat, f"watch-result-{rec.id}").start()
        done = False
        try:
            inst, executor = environment()
            judging, rules = judge_for(oracle)
            # Quiet: the one line this run deserves is said below, with the oracle's name.
            res = ready_pipeline(inst, executor, judging, rules).probe(0, torch.commit)
            run = res.run
            ws.finish_result(self.store, rec.id, self.me, ws.Finding(
                verdict=res.verdict.value, outcome=run.outcome.value, reason=run.reason,
                exit_code=run.exit_code, duration_s=run.duration_s,
                output_tail=run.output_tail, oracle_sha256=oracle.sha256,
                # A skip of this machine (an install that failed, a timeout) is tried again
                # by the next tick; a skip that is a fact (exit 125) is not.
                facts={**run.facts, "reusable": run.reusable}))
            done = True
        finally:
            beating.stop()
            if not done:  # stopped or failed before a verdict: the next tick runs it
                ws.release_result(self.store, rec.id, self.me)
        self.report.ran += 1
        out = ws.get_result(self.store, rec.id)
        self.say(f"  {rec.key.oracle}: {out.verdict} ({out.reason or 'ran now'})")
        return out

    # -- flips and their bisections -----------------------------------------------------

    def _flip(self, suite: Suite, spec: str, oracle: str, place: sources.Place) -> None:
        last = ws.last_decided(self.store, suite.name, oracle, 2)
        if len(last) < 2 or last[0].verdict == last[1].verdict:
            return
        newer, older = last
        kind = "regression" if older.verdict == "good" else "fix"
        flip = ws.claim_flip(self.store, suite=suite.name, oracle=oracle, kind=kind,
                             older=older, newer=newer, me=self.me)
        if flip is None:
            return  # started by another tick (or an earlier one): exactly once
        self.say(f"  {oracle}: {kind} between torch {older.key.torch_version} and "
                 f"{newer.key.torch_version}")
        self._start(flip, suite, spec, place)

    def _steps(self, suite: Suite, spec: str, oracle: str, threshold: float,
               place: sources.Place) -> None:
        """A performance oracle's change points that no flip covers yet: each is a flip (the
        same unique key as an exit-code flip, so one tick acts on it); a slowdown starts a
        performance bisection between the two builds' commits, so does a speed-up (with
        ``--find-fix``: the commit that made it faster), except one that gives back an
        earlier slowdown: that is reported as its fix."""
        for series in perf_series.all_series(self.store, suite.name, oracle):
            for new in perf_series.new_steps(self.store, series, threshold):
                kind = ws.SLOWDOWN if new.step.worse else ws.SPEEDUP
                older = ws.get_result(self.store, new.older)
                newer = ws.get_result(self.store, new.newer)
                flip = ws.claim_flip(self.store, suite=suite.name, oracle=oracle, kind=kind,
                                     older=older, newer=newer, me=self.me,
                                     facts=perf_series.step_facts(new, threshold))
                if flip is None:
                    continue
                self.say(f"  {oracle}: {flip_words(flip.kind, flip.facts)} between torch "
                         f"{older.key.torch_version} and {newer.key.torch_version} "
                         f"(p = {new.step.p_value:.2g})")
                if kind == ws.SLOWDOWN or new.undoes is None:
                    self._start(flip, suite, spec, place)
                    continue
                self._tried.add(flip.id)
                flip = ws.started(self.store, flip.id, bisection_id=None,
                                  message=f"the fix of flip {new.undoes}: reported, not "
                                          f"bisected")
                self._announce(flip, "flip")

    def _start(self, flip: ws.FlipRecord, suite: Suite | None = None, spec: str | None = None,
               place: sources.Place | None = None) -> None:
        message: str | None = None
        bisection_id: int | None = None
        self._tried.add(flip.id)
        try:
            if suite is None:  # taken over from a dead tick: find its suite again
                suite = next((s for s in self.cfg.suites if s.name == flip.suite), None)
                if suite is None:
                    raise UsageError(f"suite {flip.suite!r} is no longer configured")
                spec = next(o for o in suite.oracles if load_oracle(o).name == flip.oracle)
                place = self._place(suite)
            assert spec is not None and place is not None
            if flip.from_commit == flip.to_commit:
                raise UsageError("one commit gave both answers: the oracle is flaky here; "
                                 "mark it flaky = true, or make it deterministic")
            _store, bisection_id = app.create(lambda: self.store, self._request(
                flip, suite, spec, place))
            self.report.started.append(bisection_id)
            self.say(f"  started bisection {bisection_id} "
                     f"({flip.from_commit[:12]}..{flip.to_commit[:12]})")
        except (BisectorError, StopIteration) as e:
            message = getattr(e, "message", None) or f"oracle {flip.oracle} is no longer listed"
            self.say(f"  no bisection for this flip: {message}")
        flip = ws.started(self.store, flip.id, bisection_id=bisection_id, message=message)
        self._announce(flip, "flip")

    def _request(self, flip: ws.FlipRecord, suite: Suite, spec: str,
                 place: sources.Place) -> Request:
        """good..bad always run oldest to newest; a fix, and a speed-up, are found with
        ``--find-fix``."""
        return Request(
            repo=suite.repo, good=flip.from_commit, bad=flip.to_commit, oracle=spec,
            find_fix=flip.kind in ("fix", ws.SPEEDUP), python=place.python,
            profile=place.profile.name, variant=place.variant,
            nightly_index=place.index if place.kind == "nightly" else None,
            release_index=place.index if place.kind == "release" else None, **suite.start)

    def _run_bisections(self) -> None:
        for flip in ws.flips(self.store):
            if flip.bisection_id is None or (self.only and flip.suite not in self.only):
                continue
            b = bisections.get(self.store, flip.bisection_id)
            if b.state.finished or (b.owner != self.me and b.state is State.RUNNING
                                    and owner_alive(b.owner, b.heartbeat_at)):
                continue
            if b.state is State.CANCELLED or bisections.cancel_requested(self.store, b.id):
                continue  # `bisect cancel` said stop: only `bisect resume` takes it up again
            self.say(f"running bisection {b.id} ({flip.suite}: {flip.oracle} {flip.kind})")
            try:
                app.resume(self.store, b.id, self.events)
            except BusyError:
                continue  # another tick took it a moment ago: it runs it
            except BisectorError as e:
                self.say(f"bisection {b.id}: {e.message}")
            b = bisections.get(self.store, b.id)
            if b.state.finished:
                self.report.finished.append(b.id)
                self.say(f"bisection {b.id}: {b.state.value}"
                         + (f", culprit {b.culprit_sha}" if b.culprit_sha else ""))

    # -- announcements ---------------------------------------------------------------------

    def _announce_ends(self) -> None:
        for flip in ws.flips(self.store):
            if flip.bisection_id is None or flip.end_notified_at is not None:
                continue
            if bisections.get(self.store, flip.bisection_id).state.finished:
                self._announce(flip, "end")

    def _announce(self, flip: ws.FlipRecord, which: str) -> None:
        if not ws.mark_notified(self.store, flip.id, "flip" if which == "flip" else "end"):
            return
        event = self._event(flip, which)
        if which == "flip":
            body = flip_markdown(event, ws.get_result(self.store, flip.to_result_id).output_tail)
        else:
            try:
                body = views.issue_report(self.store, event["bisection"]["id"])
            except BisectorError as e:
                body = flip_markdown(event, f"(no issue report: {e.message})")
        tag = hashlib.sha256(self.store.url.encode()).hexdigest()[:8]
        folder = events_folder(self.cfg)
        picture = perf_series.flip_picture(self.store, flip) if flip.performance else None
        try:
            write_event(folder, f"flip-{flip.id}-{event['event']}-{tag}", event, body,
                        picture)
        except OSError as e:
            self.say(f"warning: could not write the {event['event']} event into {folder} "
                     f"({e.strerror}); fix [watch] events")
            return
        said = send(self.cfg.notify, event)
        if said:
            self.say(said)

    def _event(self, flip: ws.FlipRecord, which: str) -> dict[str, Any]:
        old = ws.get_result(self.store, flip.from_result_id)
        new = ws.get_result(self.store, flip.to_result_id)

        def side(r: ws.ResultRecord) -> dict[str, Any]:
            # A private index's URL may carry a token: never in a message that leaves the box.
            return {"version": r.key.torch_version, "commit": r.key.commit_sha,
                    "verdict": r.verdict, "source": redact.url(r.source)}

        word = flip_words(flip.kind, flip.facts)
        text = (f"[{flip.suite}] {flip.oracle} {word} between torch {old.key.torch_version} "
                f"and {new.key.torch_version}")
        bisection: dict[str, Any] | None = {"id": None, "message": flip.message}
        name = "flip"
        if flip.bisection_id is not None:
            b = bisections.get(self.store, flip.bisection_id)
            bisection = {"id": b.id, "state": b.state.value, "culprit": b.culprit_sha,
                         "message": b.message}
            if which == "end":
                name = "culprit" if b.state is State.DONE and b.culprit_sha else "inconclusive"
                text += (f": culprit {b.culprit_sha[:12]} (bisection {b.id})" if name ==
                         "culprit" and b.culprit_sha else f": bisection {b.id} {b.state.value}")
            else:
                text += f": bisection {b.id} started"
        return {"event": name, "text": text, "suite": flip.suite, "oracle": flip.oracle,
                "kind": flip.kind, "from": side(old), "to": side(new), "bisection": bisection,
                "flip": flip.id, "store": redact.url(self.store.url),
                **({"step": flip.facts} if flip.performance else {})}


def events_folder(cfg: WatchConfig) -> Path:
    """Where event JSON and Markdown bodies go: ``[watch] events``, else the data folder."""
    return cfg.events_dir or data_dir() / "watch"


def tick(store: Store, cfg: WatchConfig, *, bisect: bool, events: Events | None = None,
         say: Callable[[str], None] = lambda _line: None, only: tuple[str, ...] = ()
         ) -> TickReport:
    """``bisect tick``: one idempotent pass of the nightly watch."""
    return Tick(store, cfg, bisect=bisect, events=events, say=say, only=only).run()
