"""The performance search, pure: from every paired run so far to the next step.

A performance oracle prints samples; one run says little, and a shared box drifts while a
bisection runs, so no commit is ever compared with a baseline measured at the start. The good
endpoint (the reference) runs beside the candidates all along (:func:`layout`: with one slot the
runs alternate, candidate then reference, so each candidate run has a reference run just before
and just after it; with several slots the reference runs in each round beside the candidates).
Each candidate run is paired with its nearest reference runs in time on its own GPU, and the
paired differences decide (:mod:`bisector.core.paired`: a t-test against the oracle's threshold
with the bisection's own scale, learnt from the reference against itself and every commit's
repeated pairs). The bad endpoint is judged so after every pair (a clear change in one pair once
the reference has run a few times; undecided at the oracle's ``max-runs`` pairs: a skip, "cannot
tell", never a guess). Once it is bad, one posterior over the change point
(:mod:`bisector.core.perf_posterior`) chooses each next commit, where its runs tell most about
which commit moved the metric, and says when the search is done; its answer goes through
:func:`bisector.core.search.next_step`, so a performance bisection has the same windows and
skips as any other.

Apart from the strategy that reads the store and writes the answer
(:mod:`bisector.run.strategies.perf`) because ``make bench`` section 13 drives this very search
over thousands of simulated hunts, with no store. Pure: no I/O, no clock.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bisector.core import paired, perf, perf_posterior
from bisector.core.prior import Prior
from bisector.core.search import Next, Problem, Step, Stop, Verdict, next_step

UNTESTABLE_SKIPS = 2  # runs without samples before a commit counts as a skip


@dataclass(frozen=True)
class Run:
    """One stored run of a commit as the search sees it."""

    samples: tuple[float, ...] | None  # None: the run gave none (a skip)
    unit: str | None
    direction: perf.Direction
    own: bool  # made by this bisection (a probe it paid for), not adopted from another
    start: float = 0.0  # when it started (epoch seconds): what pairs it with its references
    lane: str | None = None  # the GPU it ran on ("host/index"): pairs never cross GPUs

    @classmethod
    def of(cls, got: dict[str, Any] | None, own: bool, start: float = 0.0,
           lane: str | None = None) -> Run:
        got = got or {}
        samples = got.get("samples")
        return cls(tuple(samples) if samples else None, got.get("unit"),
                   perf.Direction(got.get("direction", perf.Direction.LOWER.value)), own,
                   start, lane)

    @functools.cached_property
    def timed(self) -> paired.Timed:  # asked for every commit each round: made once
        assert self.samples
        return paired.Timed.of(self.start, self.samples, self.lane)

    def fits(self, like: Run) -> bool:
        """Declares what ``like`` declares: samples in another unit or direction would be
        compared as if they were the same quantity."""
        return self.unit == like.unit and self.direction is like.direction


def references(runs: list[Run]) -> tuple[Run | None, list[Run]]:
    """The reference: this bisection's own runs of the good endpoint that gave samples in the
    first such run's unit and direction (that first run, ``like``, sets them for all)."""
    mine = [r for r in runs if r.own and r.samples]
    like = mine[0] if mine else None
    return like, [r for r in mine if like is not None and r.fits(like)]


def sought(like: Run, find_fix: bool) -> perf.Direction:
    """The direction a commit must move in to count as the change: the metric's own (worse is
    the change: a slowdown), or with ``--find-fix`` the opposite (better is the change: the
    commit that made it faster; the nightly watch bisects a speed-up so)."""
    if not find_fix:
        return like.direction
    return (perf.Direction.HIGHER if like.direction is perf.Direction.LOWER
            else perf.Direction.LOWER)


@dataclass(frozen=True)
class Assessed:
    """A commit's standing: decided (with the comparison), skipped, or needing more runs."""

    verdict: Verdict | None
    more: int
    runs: int
    comparison: paired.Paired | None
    mismatched: int = 0  # runs whose unit or direction differ from the reference's
    median: float | None = None  # the median of its run medians, in the metric's unit


def valid_runs(runs: list[Run], like: Run) -> list[Run]:
    """This bisection's own runs that gave samples in the reference's unit and direction."""
    return [r for r in runs if r.own and r.samples and r.fits(like)]


def pairs_of(runs: list[Run], refs: list[Run], like: Run,
             rule: paired.Rule) -> list[tuple[float, float]]:
    """A commit's paired differences with their own standard errors."""
    return paired.paired_runs([r.timed for r in refs],
                              [r.timed for r in valid_runs(runs, like)], rule)


def spread_of(by_pos: dict[int, list[Run]], refs: list[Run], like: Run,
              rule: paired.Rule) -> paired.Scale:
    """The bisection's robust scale (:func:`bisector.core.paired.scale`) from the reference
    and every commit this bisection ran."""
    commits = [pairs_of(runs, refs, like, rule) for p, runs in by_pos.items()
               if p != 0 and any(r.own for r in runs)]
    return paired.scale([r.timed for r in refs], commits, rule, robust=True)


def assess(runs: list[Run], refs: list[Run], like: Run, rule: paired.Rule,
           cap: int, spread: paired.Scale) -> Assessed:
    """Where a commit with these runs stands against the reference runs beside them
    (``like``: a reference run, whose unit and direction every paired run must share;
    ``rule``: the way that counts as the change and the threshold; ``spread``: the
    bisection's scale)."""
    mine = [r for r in runs if r.own]
    valid = valid_runs(runs, like)
    mismatched = sum(1 for r in mine if r.samples and not r.fits(like))
    n = len(mine)
    if not valid:  # one skip may be a passing failure (an install that broke): try once more
        if n >= UNTESTABLE_SKIPS:
            return Assessed(Verdict.SKIP, 0, n, None, mismatched)
        return Assessed(None, UNTESTABLE_SKIPS - n, n, None, mismatched)
    level = perf.median([r.timed.median for r in valid])
    diffs = paired.differences([r.timed for r in refs], [r.timed for r in valid], rule)
    k = len(diffs)
    if n - len(valid) >= UNTESTABLE_SKIPS + cap:  # mostly runs without samples: give up
        return Assessed(Verdict.SKIP, 0, n, None, mismatched, level)
    cmp = paired.compare(diffs, rule, spread)
    if cmp.verdict is perf.PerfVerdict.BAD:
        return Assessed(Verdict.BAD, 0, n, cmp, mismatched, level)
    if cmp.verdict is perf.PerfVerdict.GOOD:
        return Assessed(Verdict.GOOD, 0, n, cmp, mismatched, level)
    # Runs whose pairs were left out (the machine changed under them) count towards a second
    # bound, twice the cap, so a machine that never holds still ends in a skip.
    if k >= cap or len(valid) >= 2 * cap:  # cannot tell at the cap: a skip, never a guess
        return Assessed(Verdict.SKIP, 0, n, cmp, mismatched, level)
    return Assessed(None, 1, n, cmp, mismatched, level)


@dataclass(frozen=True)
class Searched:
    """A search step from the runs so far, with what the answer shows: the reference
    (``like``, ``refs``), the rule with the bisection's scale lent to the confirmation, each
    commit's standing and, once the posterior is on, P(commit at the bad level)."""

    step: Step
    like: Run | None = None
    refs: tuple[Run, ...] = ()
    rule: paired.Rule | None = None
    spread: paired.Scale | None = None
    assessed: dict[int, Assessed] = field(default_factory=dict)
    after: Callable[[int], float] | None = None


def search(by_pos: dict[int, list[Run]], n: int, width: int, cap: int, base: paired.Rule,
           find_fix: bool, prior_of: Callable[[bool], Prior | None],
           shown: bool = False) -> Searched:
    """The search's next step from every run so far (``base``: the threshold; the direction
    comes from the reference's runs). Until the bad endpoint is shown bad (a t-test of its
    pairs against the threshold, :func:`assess`), the endpoints are run; from then on one
    posterior over the change point chooses each next commit and says when to stop
    (:func:`placed`). ``prior_of(ready)``: the prior over culprits, once ready. ``shown``:
    the bad endpoint was shown bad before (the watch's series): it is not run, unless a run
    of it says otherwise."""
    like, refs = references(by_pos.get(0, []))
    if like is None:
        if sum(1 for r in by_pos.get(0, []) if r.own) >= 2 * UNTESTABLE_SKIPS:
            return Searched(Stop(Problem.GOOD_UNTESTABLE, 0))
        return Searched(Next((0,)))
    rule = replace(base, direction=sought(like, find_fix))
    spread = spread_of(by_pos, refs, like, rule)
    rule = replace(rule, spread=spread)  # lent to the confirmation
    known: dict[int, Verdict] = {0: Verdict.GOOD}
    assessed: dict[int, Assessed] = {}
    wanted: list[int] = []
    for p, runs in sorted(by_pos.items()):
        if p == 0 or not any(r.own for r in runs):
            continue  # another bisection's runs (another day) are never paired
        a = assessed[p] = assess(runs, refs, like, rule, cap, spread)
        if a.verdict is not None:
            known[p] = a.verdict
        else:
            wanted.append(p)
    if shown and n - 1 not in known and n - 1 not in wanted:
        known[n - 1] = Verdict.BAD
    ready = known.get(n - 1) is Verdict.BAD
    done = functools.partial(Searched, like=like, refs=tuple(refs), rule=rule, spread=spread,
                             assessed=assessed)
    if ready and spread.dof >= 1 and math.isfinite(spread.used):
        pairs = {p: paired.differences([r.timed for r in refs],
                                       [r.timed for r in valid_runs(runs, like)], rule)
                 for p, runs in by_pos.items() if p > 0 and any(r.own for r in runs)}
        step, after = placed(by_pos, n, width, cap, pairs, rule, known, prior_of(True))
        if isinstance(step, Next):
            return done(step, after=after)
        # every commit's pairs lent to the confirmation, which counts the culprit's and its
        # parent's beside its fresh ones (core/perf_confirm)
        lent = tuple((p, tuple(ds)) for p, ds in sorted(pairs.items()) if ds)
        return done(step, after=after, rule=replace(rule, searched=lent))
    if wanted:
        return done(Next(tuple(wanted)))
    return done(next_step(n, known, width=max(1, width - 1), prior=prior_of(ready)))


def placed(by_pos: dict[int, list[Run]], n: int, width: int, cap: int,
           pairs: dict[int, list[float]], rule: paired.Rule, known: dict[int, Verdict],
           prior: Prior | None) -> tuple[Step, Callable[[int], float]]:
    """Once the bad endpoint is bad: the search's step from one posterior over the change
    point (:mod:`bisector.core.perf_posterior`) of each commit's paired differences
    (``pairs``), and P(commit at the bad level). A commit
    whose runs gave no samples yet is run again first (two such runs and it is a skip); a
    skip, and a commit at the cap of pairs or runs, is never run again."""
    assert rule.spread is not None
    skipped = {p for p, x in known.items() if x is Verdict.SKIP}
    pending = [p for p in pairs if not pairs[p] and p not in skipped
               and not any(r.samples for r in by_pos[p] if r.own)]

    def able(p: int) -> bool:
        runs = sum(1 for r in by_pos.get(p, []) if r.own)
        return p not in skipped and len(pairs.get(p, ())) < cap and runs < 2 * cap

    upto = None if prior is None else _normalised(prior, n)
    post = perf_posterior.posterior(n, pairs, rule.spread.used, rule.spread.dof,
                                    rule.margin, upto)
    if pending:
        return Next(tuple(pending)), post.upto
    if not perf_posterior.settled(post, able):
        picks = perf_posterior.probes(post, able, max(1, width - 1))
        if picks:
            return Next(picks), post.upto
    return placed_step(post, skipped), post.upto


def layout(wanted: list[int], last: int | None, width: int, number: int) -> tuple[int, ...]:
    """The round's positions: each wanted commit once, with the reference (position 0) beside
    them. One slot: alternating, each candidate run followed by a reference run (and one first
    unless the last run made was the reference), so every candidate run has a reference just
    before and just after it. Several slots (GPUs): the reference with ``width - 1``
    candidates at once, the i-th position on the i-th GPU (the runner places them so), the
    reference's place rotating: each GPU runs the reference every ``width`` rounds, every
    other round with two GPUs (reference, candidate, reference, ... on each, as Pinpoint
    orders A and B), and each candidate run is paired with its own GPU's reference runs."""
    commits = list(dict.fromkeys(p for p in wanted if p != 0))
    if width == 1:
        out = [] if last == 0 or not commits else [0]
        for p in commits:
            out += [p, 0]
        return tuple(out) or (0,)
    chosen = [0, *commits[:width - 1]]
    turn = number % len(chosen)
    return tuple(chosen[turn:] + chosen[:turn])


def _normalised(prior: Prior, n: int) -> Callable[[int], float]:
    total = prior.mass_upto(n - 1) or 1.0
    return lambda p: prior.mass_upto(p) / total


def placed_step(post: perf_posterior.Posterior, skipped: set[int]) -> Step:
    """The search's answer from the posterior: each measured commit good or bad where the
    posterior is sure of it (all but :data:`~bisector.core.perf_posterior.EPSILON`), a skip
    where it is not, so :func:`~bisector.core.search.next_step` names the culprit, or the
    window the skips and the doubtful commits leave."""
    eps = perf_posterior.EPSILON
    known = {0: Verdict.GOOD, post.n - 1: Verdict.BAD}
    for p in post.cuts[1:-1]:
        q = post.upto(p)
        known[p] = Verdict.BAD if q >= 1 - eps else Verdict.GOOD if q <= eps else Verdict.SKIP
    known.update(dict.fromkeys(skipped, Verdict.SKIP))
    while True:  # commits never run inside the place: skips too (none can split it)
        step = next_step(post.n, known)
        if not isinstance(step, Next):
            return step
        known.update(dict.fromkeys(step.positions, Verdict.SKIP))
