"""A tick's flips: an oracle's last two decided results that differ (good -> bad: a
regression, bad -> good: a fix), or a performance oracle's change point that no flip covers
yet. The tick that inserts a flip's unique row acts on it (``store/watch.claim_flip``):
exactly once, however many ticks run.
"""

from __future__ import annotations

from bisector.app.watch import series as perf_series
from bisector.app.watch.announce import announce
from bisector.app.watch.config import Suite
from bisector.app.watch.context import Pass
from bisector.app.watch.notify import flip_words
from bisector.app.watch.starts import start
from bisector.store import watch as ws


def exit_codes(p: Pass, suite: Suite, spec: str, oracle: str) -> None:
    """A pass/fail oracle: its last two decided results, compared."""
    last = ws.last_decided(p.store, suite.name, oracle, 2)
    if len(last) < 2 or last[0].verdict == last[1].verdict:
        return
    newer, older = last
    kind = "regression" if older.verdict == "good" else "fix"
    flip = ws.claim_flip(p.store, suite=suite.name, oracle=oracle, kind=kind,
                         older=older, newer=newer, me=p.me)
    if flip is None:
        return  # started by another tick (or an earlier one): exactly once
    p.say(f"  {oracle}: {kind} between torch {older.key.torch_version} and "
          f"{newer.key.torch_version}")
    start(p, flip, suite, spec)


def steps(p: Pass, suite: Suite, spec: str, oracle: str, threshold: float) -> None:
    """A performance oracle's change points that no flip covers yet: each is a flip (the
    same unique key as an exit-code flip, so one tick acts on it); a slowdown starts a
    performance bisection between the two builds' commits, so does a speed-up (with
    ``--find-fix``: the commit that made it faster), except one that gives back an
    earlier slowdown: that is reported as its fix."""
    for series in perf_series.all_series(p.store, suite.name, oracle):
        for new in perf_series.new_steps(p.store, series, threshold):
            kind = ws.SLOWDOWN if new.step.worse else ws.SPEEDUP
            older = ws.get_result(p.store, new.older)
            newer = ws.get_result(p.store, new.newer)
            flip = ws.claim_flip(p.store, suite=suite.name, oracle=oracle, kind=kind,
                                 older=older, newer=newer, me=p.me,
                                 facts=perf_series.step_facts(new, threshold))
            if flip is None:
                continue
            p.say(f"  {oracle}: {flip_words(flip.kind, flip.facts)} between torch "
                  f"{older.key.torch_version} and {newer.key.torch_version} "
                  f"(p = {new.step.p_value:.2g})")
            if kind == ws.SLOWDOWN or new.undoes is None:
                start(p, flip, suite, spec)
                continue
            p.tried.add(flip.id)
            flip = ws.started(p.store, flip.id, bisection_id=None,
                              message=f"the fix of flip {new.undoes}: reported, not bisected")
            announce(p, flip, "flip")
