"""A tick's bisections: one started per flip, between the two builds' commits, through the
same ``app/bisections.create`` as ``bisect start`` (a flip whose bisection could not start is
kept and tried again each tick); then, without ``--no-bisect``, the watch's unfinished
bisections nobody alive runs are run here, in-process: the SQLite one-box path.
"""

from __future__ import annotations

from bisector.app import bisections as app
from bisector.app.watch import sources
from bisector.app.watch.announce import announce
from bisector.app.watch.config import Suite
from bisector.app.watch.context import Pass
from bisector.base.errors import BisectorError, BusyError, UsageError
from bisector.base.kinds import State
from bisector.infra.owner import owner_alive
from bisector.run.config import Request
from bisector.store import bisections
from bisector.store import watch as ws


def start(p: Pass, flip: ws.FlipRecord, suite: Suite | None = None,
          spec: str | None = None) -> None:
    """Start the flip's bisection (``suite`` and ``spec`` None: a flip taken over from a
    dead tick, or one that could not start before: found again by name), then announce it."""
    message: str | None = None
    bisection_id: int | None = None
    p.tried.add(flip.id)
    try:
        if suite is None:
            suite = p.suite(flip.suite)
            if suite is None:
                raise UsageError(f"suite {flip.suite!r} is no longer configured")
        if spec is None:
            spec = next(o for o in suite.oracles if p.oracle(o).name == flip.oracle)
        if flip.from_commit == flip.to_commit:
            raise UsageError("one commit gave both answers: the oracle is flaky here; "
                             "mark it flaky = true, or make it deterministic")
        _store, bisection_id = app.create(lambda: p.store,
                                          request(flip, suite, spec, p.place(suite)))
        p.report.started.append(bisection_id)
        p.say(f"  started bisection {bisection_id} "
              f"({flip.from_commit[:12]}..{flip.to_commit[:12]})")
    except (BisectorError, StopIteration) as e:
        message = getattr(e, "message", None) or f"oracle {flip.oracle} is no longer listed"
        p.say(f"  no bisection for this flip: {message}")
    flip = ws.started(p.store, flip.id, bisection_id=bisection_id, message=message)
    announce(p, flip, "flip")


def request(flip: ws.FlipRecord, suite: Suite, spec: str, place: sources.Place) -> Request:
    """good..bad always run oldest to newest; a fix, and a speed-up, are found with
    ``--find-fix``."""
    return Request(
        repo=suite.repo, good=flip.from_commit, bad=flip.to_commit, oracle=spec,
        find_fix=flip.kind in ("fix", ws.SPEEDUP), python=place.python,
        profile=place.profile.name, variant=place.variant,
        nightly_index=place.index if place.kind == "nightly" else None,
        release_index=place.index if place.kind == "release" else None,
        bad_shown=shown(flip), **suite.start)


def shown(flip: ws.FlipRecord) -> str:
    """The series' step that showed the bad build bad, as the search is told it: a
    performance search then takes the bad endpoint as shown and spends no pair on it (the
    nightlies' runs are evidence; the confirmation still measures the culprit afresh)."""
    change, p = flip.facts.get("change"), flip.facts.get("p_value")
    if flip.kind != ws.SLOWDOWN or change is None or p is None:
        return ""
    return f"the watch's series: {100 * float(change):+.1f} % between the builds (p {float(p):.2g})"


def run_unfinished(p: Pass) -> None:
    """Run every flip's bisection that is not over and that nobody alive runs."""
    for flip in ws.flips(p.store):
        if flip.bisection_id is None or (p.only and flip.suite not in p.only):
            continue
        run_one(p, flip.bisection_id, f"{flip.suite}: {flip.oracle} {flip.kind}")


def run_one(p: Pass, bisection_id: int, what: str) -> None:
    """Run one of the watch's bisections here, unless it is over, cancelled, or another live
    process runs it."""
    b = bisections.get(p.store, bisection_id)
    if b.state.finished or (b.owner != p.me and b.state is State.RUNNING
                            and owner_alive(b.owner, b.heartbeat_at)):
        return
    if b.state is State.CANCELLED or bisections.cancel_requested(p.store, b.id):
        return  # `bisect cancel` said stop: only `bisect resume` takes it up again
    p.say(f"running bisection {b.id} ({what})")
    try:
        app.resume(p.store, b.id, p.events, policy=p.policy)
    except BusyError:
        return  # another tick took it a moment ago: it runs it
    except BisectorError as e:
        p.say(f"bisection {b.id}: {e.message}")
    b = bisections.get(p.store, b.id)
    if b.state.finished:
        p.report.finished.append(b.id)
        p.say(f"bisection {b.id}: {b.state.value}"
              + (f", culprit {b.culprit_sha}" if b.culprit_sha else ""))
