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

from collections.abc import Callable

from bisector.app.watch import announce, reports, results, starts
from bisector.app.watch.announce import events_folder
from bisector.app.watch.config import WatchConfig
from bisector.app.watch.context import Pass, TickReport
from bisector.base.errors import BisectorError
from bisector.base.events import Events, QuietEvents
from bisector.infra.owner import owner_id
from bisector.run.policy import LOCAL, Policy
from bisector.store import watch as ws
from bisector.store.db import Store

__all__ = ["TickReport", "events_folder", "tick"]


def tick(store: Store, cfg: WatchConfig, *, bisect: bool, events: Events | None = None,
         say: Callable[[str], None] = lambda _line: None, only: tuple[str, ...] = (),
         policy: Policy = LOCAL) -> TickReport:
    """``bisect tick``: one idempotent pass of the nightly watch. Its parts, in order:
    results (and the flips they show, each flip's bisection started), flips left unstarted,
    the unfinished bisections (unless ``bisect`` is False), the announcements."""
    p = Pass(store, cfg, owner_id(), events or QuietEvents(), say, only, policy)
    for suite in cfg.suites:
        if only and suite.name not in only:
            continue
        try:
            if suite.reports is not None:
                reports.report_pass(p, suite, bisect)
                continue
            results.suite_pass(p, suite)
        except BisectorError as e:
            p.report.errors.append(e)
            p.say(f"{suite.name}: {e.message}")
    for flip in ws.orphaned_flips(store, p.me):  # a tick died before starting it
        starts.start(p, flip)
    for flip in ws.unstarted_flips(store, p.me, only, frozenset(p.tried)):
        # Its bisection could not start (a [suite.bisect] option, a suite gone): kept, and
        # tried again each tick, so the tick after the configuration is fixed starts it.
        p.say(f"{flip.suite}: {flip.oracle} {flip.kind} (flip {flip.id}): starting its "
              f"bisection again")
        starts.start(p, flip)
    if bisect:
        starts.run_unfinished(p)
    announce.ends(p)
    r = p.report
    if not (r.ran or r.started or r.finished or r.errors):
        p.say("nothing new: every result of this pass was recorded before")
    return r
