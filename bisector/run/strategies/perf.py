"""Driving a bisection whose oracle measures speed: commits are judged by paired samples.

A performance oracle prints samples (``BISECTOR_RESULT {"samples": [...]}``); one run says
little, and a shared box drifts while a bisection runs, so no commit is ever compared with a
baseline measured at the start. The good endpoint (the reference) runs beside the candidates
all along: with one slot the runs alternate, candidate then reference, so each candidate run
has a reference run just before and just after it; with several slots the reference runs in
each round beside the candidates. Each candidate run is paired with its nearest reference runs
in time on its own GPU, and the paired differences decide (:mod:`bisector.core.paired`: a
t-test against the oracle's threshold with the bisection's own scale, learnt from the reference
against itself and every commit's repeated pairs). The bad endpoint is judged so after every
pair (a clear change in one pair once the reference has run a few times; undecided at the
oracle's ``max-runs`` pairs: a skip, "cannot tell", never a guess). Once it is bad, one
posterior over the change point (:mod:`bisector.core.perf_posterior`) chooses each next
commit, where its runs tell most about which commit moved the metric, and says when the
search is done; its answer goes through :func:`bisector.core.search.next_step`, so a
performance bisection has the same windows and skips as any other. The reference's own drift
over the bisection is measured and shown with the answer.

Only this bisection's own runs are paired: runs another bisection made (another day of the
machine) are listed, never compared. Every run is a stored sample, so resume pairs the same runs
again. A run whose declared unit or direction differs from the reference's is not paired: it
counts as a run without samples, and its commit's row says so.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bisector.core import paired, perf, perf_posterior, sampling
from bisector.core.prior import Prior
from bisector.core.search import Next, Problem, Step, Stop, Verdict, next_step
from bisector.run.strategies.base import (
    Adopted,
    Decision,
    Round,
    View,
    answer_for,
    in_round_later,
    is_confirmation,
    prior_for,
)
from bisector.store import runs as run_store

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


def gather(view: View) -> tuple[dict[int, list[Run]], Adopted]:
    """position -> its stored runs, oldest first, and the runs this bisection has not logged
    yet."""
    pos = {sha: i for i, sha in enumerate(view.candidates)}
    logged = run_store.logged_runs(view.store, view.record.id)
    own = run_store.own_runs(view.store, view.record.id)
    by_pos: dict[int, list[Run]] = {}
    adopted: Adopted = []
    found = run_store.samples(view.store, view.key, list(view.candidates))
    for x in sorted((x for xs in found.values() for x in xs), key=lambda x: x.run.id):
        if x.run.commit_sha not in pos or is_confirmation(x.facts):
            continue  # a confirmation run checks an answer; it is no evidence for one
        p = pos[x.run.commit_sha]
        at = x.run.started_at.timestamp() if x.run.started_at else float(x.run.id)
        by_pos.setdefault(p, []).append(Run.of(x.facts.get("perf"), x.run.id in own, at,
                                               x.facts.get("lane")))
        if x.run.id not in logged:
            v = view.rules.judge(x.run.outcome)
            adopted.append((run_store.Adopted(p, x.run.commit_sha, x.run.id, v.value),
                            x.run.reason))
    return by_pos, adopted


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
        return done(step, after=after)
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


class Performance:
    def __init__(self, view: View) -> None:
        self.view = view
        self.round: int | None = None

    def ahead(self, r: Round) -> list[tuple[int, float]]:
        """Only the round's own later runs: its next commits hang on samples, not on one
        verdict, and a commit probed again needs nothing made."""
        return in_round_later(self.view, r)

    def decide(self) -> Decision:
        v, meta = self.view, self.view.meta
        assert meta.threshold is not None
        if self.round is None:
            self.round = run_store.last_round(v.store, v.record.id)
        by_pos, adopted = gather(v)
        informed = self.round or None
        own = [(r.start, p) for p, runs in by_pos.items() for r in runs if r.own]
        last = max(own)[1] if own else None
        got = search(by_pos, v.n, v.width, sampling.perf_max_runs(meta.max_runs),
                     paired.Rule(perf.Direction.LOWER, meta.threshold), v.rules.find_fix,
                     lambda ready: prior_for(v, ready), shown=bad_shown(v))
        if not isinstance(got.step, Next):
            summary: dict[str, object] | None = None
            if got.like is not None and got.spread is not None:
                like, spread = got.like, got.spread
                timed = [r.timed for r in got.refs]
                table = [_row(v, p, a, like, got.after) for p, a in sorted(got.assessed.items())]
                numbers: dict[str, object] = {
                    "threshold": meta.threshold, "unit": like.unit,
                    "direction": like.direction.value, "baseline_runs": len(got.refs),
                    "sought": "better" if v.rules.find_fix else "worse",
                    "baseline_median": perf.median([t.median for t in timed]),
                    "compared": "paired", "reference": paired.drift(timed),
                    "scale": {"sd": round(spread.used, 5), "dof": spread.dof},
                    "commits": table}
                if bad_shown(v):  # the bad endpoint not run: what showed it bad instead
                    numbers["bad_shown"] = v.record.settings["request"]["bad_shown"]
                summary = {"perf": numbers}
            return Decision(answer_for(v, got.step, summary, got.rule), adopted, informed)
        wanted = list(got.step.positions)
        self.round += 1
        positions = layout(wanted, last, v.width, self.round)
        return Decision(Round(self.round, positions, runs_left(v.n, known_window(by_pos, v))),
                        adopted, informed)


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


def bad_shown(view: View) -> bool:
    """Whether something before this search showed its bad endpoint bad (the watch's series:
    ``Request.bad_shown``, stored with the bisection)."""
    request = view.record.settings.get("request") or {}
    return bool(request.get("bad_shown")) and view.offset == 0


def known_window(by_pos: dict[int, list[Run]], view: View) -> int:
    """About how many commits the change may still be among, for the estimate of runs left:
    those no run has measured yet."""
    return max(1, view.n - len(by_pos))


def runs_left(n: int, unplaced: int) -> int:
    """About how many runs the search still needs: a commit per halving of what is left, each
    :data:`~bisector.core.paired.TYPICAL_PAIRS` pairs of two runs (its own and the
    reference's)."""
    halvings = max(1, math.ceil(math.log2(max(2, min(n, unplaced)))))
    return 2 * paired.TYPICAL_PAIRS * halvings


def _row(view: View, p: int, a: Assessed, like: Run,
         after: Callable[[int], float] | None = None) -> dict[str, Any]:
    """A judged commit as the answer shows it. Once the posterior placed the change, a
    commit's verdict is where the posterior puts it (its own t-test against the threshold is
    still shown, as ``p_value``), with ``p_after``: P(it runs at the bad level)."""
    c = a.comparison
    verdict = a.verdict.value if a.verdict else "undecided"
    extra: dict[str, Any] = {}
    if after is not None and a.verdict is not Verdict.SKIP:
        q, eps = after(p), perf_posterior.EPSILON
        verdict = "bad" if q >= 1 - eps else "good" if q <= eps else "undecided"
        extra["p_after"] = round(q, 6)
    note = None
    if a.mismatched:
        note = (f"{a.mismatched} run(s) declared another unit or direction than the "
                f"reference's ({like.unit or 'no unit'}, {like.direction.value}): not paired")
    change = None
    if c is not None and c.change is not None:
        # positive = worse in the metric's own direction, also when a speed-up is sought
        change = round(-c.change / (1 + c.change) if view.rules.find_fix else c.change, 4)
    return {"position": p, "sha": view.candidates[p], "runs": a.runs,
            "verdict": verdict, "median": a.median, "change": change,
            "p_value": c.p_value if c else None, "pairs": c.pairs if c else 0,
            "unit": like.unit, "compared": "paired",
            "mismatched": a.mismatched, "note": note, **extra}
