"""Paired performance decisions: every candidate run is compared with reference runs made
beside it, never with a baseline measured at the start.

A shared GPU box drifts: another job starts, clocks throttle, a cache fills. Measured on
histories made for it, a bisection that compared each commit with the good endpoint's first
three runs named a wrong commit as ``done`` once each run came out about 3 % slower than the
one before: every later commit looked slower than the early baseline. Chromium's Pinpoint
answers this by measuring A and B in the same conditions. Here each run of a candidate is
paired with the reference (good endpoint) runs nearest it in time, one started before it and
one after where both exist, so a drift that is linear over those few runs cancels exactly; the
difference of the log medians is one observation, and runs on other days or GPUs never meet.

The decision on those paired differences is a one-sided t-test against the threshold (a shift
of ``log(1 + t)`` in the log, where ``t`` is the oracle's relative threshold), after every pair:
BAD when the candidate is worse than the reference by more than the threshold at level
:data:`ALPHA`, GOOD when significantly not, UNDECIDED otherwise (one more pair; at the cap a
skip: "cannot tell" is never guessed). Its scale is the bisection's, not the commit's
(:func:`scale`): how much one paired difference moves between runs, learnt from every
reference run sandwiched between two others (the very shape of a pair, on a commit that is the
same each time) and from every commit's repeated pairs, with those degrees of freedom. So a
+50 % step in 2 % noise is told by one pair once the reference has run a few times, and a
change near the threshold, or a machine whose runs move, costs more pairs, as it must. The
samples inside a run only set a floor under that scale: a run whose samples agree says nothing
of how the next run will land (a slow run is often slow in all its samples), so within-run
spread alone never decides. The Wilcoxon test it replaced needed 7 pairs before it could say
anything at all (2**-7 is its smallest p-value), whatever the size of the change.

Pure: no I/O, no clock; every value comes in as numbers.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from bisector.core.perf import Direction, PerfVerdict, median

ALPHA = 0.002
"""Level of each one-sided test of the search, made after every pair. A false BAD or GOOD
sends the search the wrong way, which its confirmation then refuses (an answer openly unsure,
never a wrong one): so this trades runs for "unsure" answers. In the hardest row of ``make
bench`` section 13 (10 % against 5 %, a slow mode, 2x drift), 300 hunts: 0.005 gave 100 runs a
hunt and 1.3 % unsure, 0.002 116 runs and 0.3 %, 0.001 about a fifth more runs again."""

REVERT_ALPHA = 0.05
"""Level at which a confirmation calls the revert *fixed* (no worse than the parent by the
threshold). The claim of a confirmation is the culprit's, tested at :data:`CONFIRM_ALPHA`; the
revert is a check against it (a revert still worse says the change is not that commit's
alone), called *not fixed* only at :data:`CONFIRM_ALPHA` too. On the H200 watch proof a revert
at 0.001 took 4 pairs to call fixed where the culprit took one."""

CONFIRM_ALPHA = 0.001
"""Level of the confirmation's tests, on fresh runs: a wrong culprit is named only when the
search erred *and* this test did, about one hunt in 100,000 at the margin."""

TYPICAL_PAIRS = 2
"""Pairs a commit takes on average, for projections (``bisect plan``, the runs left): one once
the reference has run a few times for a change far from the threshold, more near it."""

DEFAULT_MAX_PAIRS = 32
"""Pairs a commit may get before an undecided one is a skip ("cannot tell")."""

MEDIAN_SE = 1.2533
"""The standard error of a median of n normal samples is this times the mean's (sd / sqrt n)."""


STRADDLED = 2.0
"""A run whose two reference runs (before and after it) differ by more than this many times
the threshold's margin is left out: the machine changed under it (another job's load came or
went), and the mean of the two is a level the run never met. On an H100 with a load of our
own making switched every 40 s, such pairs gave differences of +-40 % for a commit changing
nothing, and their large ranks kept the Wilcoxon test from deciding in 32 pairs (``make
bench`` section 13 has the row). A steady drift moves two neighbouring runs far less."""


@dataclass(frozen=True)
class Timed:
    """One run as the pairing sees it: when it started (seconds, any origin), its median and
    that median's standard error on the log scale from the run's own samples (0: unknown),
    and the GPU it ran on (``lane``; None: not pinned): runs on two GPUs are never paired,
    two H200s of one box differ by more than many a regression."""

    start: float
    median: float
    se: float = 0.0
    lane: str | None = None

    @classmethod
    def of(cls, start: float, samples: Sequence[float], lane: str | None = None) -> Timed:
        logs = [math.log(x) for x in samples if x > 0]
        se = 0.0
        if len(logs) >= 2:
            mean = sum(logs) / len(logs)
            sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
            se = MEDIAN_SE * sd / math.sqrt(len(logs))
        return cls(start, median(samples), se, lane)


@dataclass(frozen=True)
class Rule:
    """What counts as the change: which way is worse (the metric's direction, or its opposite
    when a fix is sought) and the relative threshold."""

    direction: Direction
    threshold: float
    spread: Scale | None = None  # the search's scale, handed to its confirmation
    # the search's paired differences of each commit it ran, (position, differences), also
    # handed to its confirmation (core/perf_confirm: the culprit's and its parent's count)
    searched: tuple[tuple[int, tuple[float, ...]], ...] = ()

    def oriented(self, value: float) -> float:
        """``value`` on a log scale where larger is worse."""
        return math.log(value) if self.direction is Direction.LOWER else -math.log(value)

    @property
    def margin(self) -> float:
        """The threshold as a shift of the oriented log: ``log(1 + t)`` for a slowdown,
        ``-log(1 - t)`` for a throughput drop."""
        t = self.threshold
        return math.log1p(t) if self.direction is Direction.LOWER else -math.log1p(-t)


@dataclass(frozen=True)
class Paired:
    """The verdict on a commit from its paired differences, with the numbers a report shows.
    ``change`` is the median paired change, positive = worse (``+0.31`` = 31 % slower)."""

    verdict: PerfVerdict
    pairs: int
    change: float | None
    p_value: float


@dataclass(frozen=True)
class Scale:
    """How much one paired difference moves from run to run (``sd``, on the oriented log
    scale), known with ``dof`` degrees of freedom; ``floor`` is what the runs' own samples
    say of it (a lower bound, never the estimate). A robust scale also has ``robust``, the
    spread of the residuals winsorized at ``clip`` (inf: none)."""

    sd: float
    dof: float
    floor: float = 0.0
    robust: float = math.inf
    clip: float = math.inf

    def judging(self, diffs: Sequence[float]) -> tuple[list[float], float]:
        """The pairs as judged and the scale to judge them by. From :data:`ROBUST_PAIRS`
        pairs on, a robust scale pulls them in to ``clip`` of their median (a run in a
        machine's slow mode weighs as a large difference, not as an outlier's square) and
        judges by the winsorized spread; fewer pairs cannot show which of them is the
        outlier, so they are judged as they are, by the plain spread."""
        if len(diffs) < ROBUST_PAIRS or not math.isfinite(self.clip):
            return list(diffs), max(self.sd, self.floor)
        mid = median(diffs)
        return ([min(max(d, mid - self.clip), mid + self.clip) for d in diffs],
                max(self.robust, self.floor))

    @property
    def used(self) -> float:
        return max(self.sd, self.floor)

    def pooled(self, other: Scale) -> Scale:
        """Both plain estimates as one: sums of squares and degrees of freedom added, the
        higher floor kept (the search's scale and a confirmation's own pairs, which are judged
        unwinsorized)."""
        dof = self.dof + other.dof
        ss = sum(x.sd ** 2 * x.dof for x in (self, other) if x.dof)
        return Scale(math.sqrt(ss / dof) if dof and math.isfinite(ss) else math.inf, dof,
                     max(self.floor, other.floor))


def differences(refs: Sequence[Timed], runs: Sequence[Timed], rule: Rule) -> list[float]:
    """Each run's oriented log median minus its reference: the mean of the oriented log
    medians of the nearest reference run started before it and the nearest started after it
    (one of them where only one exists). A run with no reference at all gives nothing, nor
    one whose two references differ by more than :data:`STRADDLED` margins."""
    return [d for d, _ in paired_runs(refs, runs, rule)]


def paired_runs(refs: Sequence[Timed], runs: Sequence[Timed],
                rule: Rule) -> list[tuple[float, float]]:
    """:func:`differences` with each difference's standard error from the runs' own samples
    (the floor under :class:`Scale`). A run is paired only with reference runs of its own
    GPU (:attr:`Timed.lane`)."""
    lanes: dict[str | None, list[Timed]] = {}
    for r in sorted(refs, key=lambda r: r.start):
        lanes.setdefault(r.lane, []).append(r)
    starts = {lane: [r.start for r in rs] for lane, rs in lanes.items()}
    out: list[tuple[float, float]] = []
    for run in runs:
        ordered = lanes.get(run.lane, [])
        before = bisect_right(starts.get(run.lane, []), run.start) - 1
        after = bisect_left(starts.get(run.lane, []), run.start)
        if after <= before:  # a reference that started at the same instant: both sides
            after = before + 1
        near = [ordered[i] for i in (before, after) if 0 <= i < len(ordered)]
        if not near:
            continue
        levels = [rule.oriented(r.median) for r in near]
        if max(levels) - min(levels) > STRADDLED * rule.margin:
            continue  # the machine changed under this pair, not the commit
        ref = sum(levels) / len(levels)
        se2 = run.se ** 2 + sum(r.se ** 2 for r in near) / len(near) ** 2
        out.append((rule.oriented(run.median) - ref, math.sqrt(se2)))
    return out


def reference_differences(refs: Sequence[Timed], rule: Rule) -> list[float]:
    """The reference against itself, in the shape of a pair: each reference run against the
    mean of the two beside it, in triples that share no middle run (so the differences are
    nearly independent), the straddle rule applied, each GPU's runs on their own. Their spread
    is how much a pair moves when nothing changed, learnt beside the candidates all along."""
    lanes: dict[str | None, list[float]] = {}
    for r in sorted(refs, key=lambda r: r.start):
        lanes.setdefault(r.lane, []).append(rule.oriented(r.median))
    out = []
    for x in lanes.values():
        for j in range(1, len(x) - 1, 2):
            if abs(x[j + 1] - x[j - 1]) > STRADDLED * rule.margin:
                continue
            out.append(x[j] - (x[j - 1] + x[j + 1]) / 2)
    return out


WINSOR = 1.5
"""A robust scale winsorizes at this many robust standard deviations (median absolute
deviation x 1.4826) of the pooled residuals: a Gaussian loses about 13 % of its variance to
it, a machine with a slow mode (one run in five 8 % slower) most of its outliers' weight (the
hardest row of section 13: 127 runs a hunt at 2.0, 105 at 1.5, as often right)."""

ROBUST_FROM = 6
"""Residuals needed before the median absolute deviation is trusted; fewer: no winsorizing."""

ROBUST_PAIRS = 3
"""Pairs of one commit before they are winsorized around their median (:meth:`Scale.judging`)."""


def scale(refs: Sequence[Timed], commits: Sequence[Sequence[tuple[float, float]]],
          rule: Rule, robust: bool = False) -> Scale:
    """The bisection's :class:`Scale`: pooled from the reference against itself
    (:func:`reference_differences`, mean zero by construction) and each commit's pairs around
    their own mean (``commits``: each commit's :func:`paired_runs`), with their degrees of
    freedom; the floor is the root mean square of the pairs' own standard errors.

    ``robust``: the spread of the residuals winsorized at :data:`WINSOR` robust standard
    deviations is kept beside the plain one, with ``clip``, so that :func:`compare`
    winsorizes a commit's pairs alike once it has :data:`ROBUST_PAIRS` of them."""
    groups = [[(e, 0.0) for e in reference_differences(refs, rule)]]
    errors: list[float] = []
    for pairs in commits:
        errors += [se for _, se in pairs]
        if len(pairs) >= 2:
            ds = [d for d, _ in pairs]
            groups.append([(d, median(ds)) for d in ds])
    residuals = [d - mid for g in groups for d, mid in g]
    clip = math.inf
    if robust and len(residuals) >= ROBUST_FROM:
        clip = WINSOR * 1.4826 * median([abs(r) for r in residuals]) or math.inf
    floor = math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else 0.0
    plain, dof = _spread(groups, math.inf)
    return Scale(plain, dof, floor, _spread(groups, clip)[0] if math.isfinite(clip)
                 else math.inf, clip)


def _spread(groups: list[list[tuple[float, float]]], clip: float) -> tuple[float, float]:
    """The pooled standard deviation of the residuals, each pulled in to ``clip`` of its
    centre (the reference's, the first group, is zero; a commit's is the mean of its own
    pulled-in pairs), and its degrees of freedom."""
    ss, dof = 0.0, 0.0
    for i, g in enumerate(groups):
        vals = [min(max(d, mid - clip), mid + clip) for d, mid in g]
        if i == 0:
            ss, dof = ss + sum(v * v for v in vals), dof + len(vals)
        elif vals:
            mean = sum(vals) / len(vals)
            ss, dof = ss + sum((v - mean) ** 2 for v in vals), dof + len(vals) - 1
    return (math.sqrt(ss / dof) if dof else math.inf), dof


def shared(k: int) -> float:
    """How much more the mean of ``k`` pairs of one commit varies than ``k`` independent
    pairs would: made one after another (reference, run, reference, run, ...), neighbouring
    pairs share a reference run, so the mean's variance is (2k - 1/2) / (3k/2) times the
    independent one (1 for one pair, towards 4/3 for many)."""
    return (2 * k - 0.5) / (1.5 * k)


def compare(diffs: Sequence[float], rule: Rule, spread: Scale, alpha: float = ALPHA,
            alpha_good: float | None = None) -> Paired:
    """BAD when the paired differences sit above the threshold's margin at level ``alpha``
    (a one-sided t-test with the bisection's scale and its degrees of freedom), GOOD when
    below at ``alpha_good`` (default: ``alpha``), else UNDECIDED (no pair yet, or no degree
    of freedom)."""
    k = len(diffs)
    change = math.expm1(median(diffs)) if diffs else None
    judged, sd = spread.judging(diffs)
    if k == 0 or spread.dof < 1 or not math.isfinite(sd):
        return Paired(PerfVerdict.UNDECIDED, k, change, 1.0)
    mean = sum(judged) / k
    if sd <= 0:  # every pair alike to the last digit: the sign of the shift says it all
        t = math.copysign(math.inf, mean - rule.margin) if mean != rule.margin else 0.0
    else:
        t = (mean - rule.margin) / (sd * math.sqrt(shared(k) / k))
    # lazy: only performance oracles need scipy; stdtr is Student's t CDF, a ufunc (fast)
    from scipy.special import stdtr  # type: ignore[import-untyped]

    worse = float(stdtr(spread.dof, -t))  # P(this or worse | exactly at the margin)
    better = float(stdtr(spread.dof, t))
    if worse < alpha:
        return Paired(PerfVerdict.BAD, k, change, worse)
    if better < (alpha if alpha_good is None else alpha_good):
        return Paired(PerfVerdict.GOOD, k, change, better)
    return Paired(PerfVerdict.UNDECIDED, k, change, min(worse, better))


def judge_beside(refs: Sequence[Timed], tests: Sequence[Timed], rule: Rule,
                 alpha: float = CONFIRM_ALPHA, alpha_good: float | None = None) -> Paired:
    """A confirmation's fresh runs of ``tests`` beside ``refs`` (the revert beside the
    parent; the culprit's claim, which also counts the search's pairs under guards, is
    :func:`bisector.core.perf_confirm.judge`): judged by their own pairs alone, with the
    search's plain scale (``rule.spread``) pooled with these runs' own, so a clear change is
    decided by one fresh pair."""
    pairs = paired_runs(refs, tests, rule)
    own = scale(refs, [pairs], rule)
    # The claim is judged as the pairs are, by the plain spread (pooled() keeps no robust
    # part): winsorizing around the median of a skewed machine (a slow mode on one side)
    # moved a confirmation's mean once in 5000 simulated hunts enough to confirm a wrong
    # culprit the search had named.
    spread = own if rule.spread is None else rule.spread.pooled(own)
    return compare([d for d, _ in pairs], rule, spread, alpha, alpha_good)


def drift(refs: Sequence[Timed]) -> dict[str, float] | None:
    """How the reference itself moved over the bisection: its first and last run medians,
    their ratio, and the range over all its runs (``None`` under two runs)."""
    ordered = sorted(refs, key=lambda r: r.start)
    if len(ordered) < 2:
        return None
    values = [r.median for r in ordered]
    first, last = values[0], values[-1]
    return {"runs": len(values), "first": first, "last": last,
            "change": round(last / first - 1, 4),
            "spread": round(max(values) / min(values) - 1, 4)}
