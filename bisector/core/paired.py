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

The decision on those paired differences is a one-sided Wilcoxon signed-rank test against the
threshold (a shift of ``log(1 + t)`` in the log, where ``t`` is the oracle's relative
threshold): BAD when the candidate is significantly worse than the reference by more than the
threshold, GOOD when it is significantly not, UNDECIDED otherwise (sample more; at the cap it
is a skip: "cannot tell" is never guessed). The test is exact and needs no normality, and a
bimodal machine (some runs land in a slow mode) moves ranks, not the mean. Its price: with k
pairs the smallest p-value is 2**-k, so a decision at 0.01 needs at least :data:`MIN_PAIRS`.

Pure: no I/O, no clock; every value comes in as numbers.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from bisector.core.perf import DEFAULT_ALPHA, Direction, PerfVerdict, median

MIN_PAIRS = 7
"""Pairs before the first comparison: 2**-7 = 0.0078 is the smallest exact one-sided p-value
of 7 pairs, the first below :data:`~bisector.core.perf.DEFAULT_ALPHA`."""

DEFAULT_MAX_PAIRS = 32
"""Pairs a commit may get before an undecided one is a skip ("cannot tell")."""


STRADDLED = 2.0
"""A run whose two reference runs (before and after it) differ by more than this many times
the threshold's margin is left out: the machine changed under it (another job's load came or
went), and the mean of the two is a level the run never met. On an H100 with a load of our
own making switched every 40 s, such pairs gave differences of +-40 % for a commit changing
nothing, and their large ranks kept the Wilcoxon test from deciding in 32 pairs (``make
bench`` section 13 has the row). A steady drift moves two neighbouring runs far less."""


@dataclass(frozen=True)
class Timed:
    """One run as the pairing sees it: when it started (seconds, any origin) and its median."""

    start: float
    median: float


@dataclass(frozen=True)
class Rule:
    """What counts as the change: which way is worse (the metric's direction, or its opposite
    when a fix is sought) and the relative threshold."""

    direction: Direction
    threshold: float

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


def differences(refs: Sequence[Timed], runs: Sequence[Timed], rule: Rule) -> list[float]:
    """Each run's oriented log median minus its reference: the mean of the oriented log
    medians of the nearest reference run started before it and the nearest started after it
    (one of them where only one exists). A run with no reference at all gives nothing, nor
    one whose two references differ by more than :data:`STRADDLED` margins."""
    ordered = sorted(refs, key=lambda r: r.start)
    starts = [r.start for r in ordered]
    out: list[float] = []
    for run in runs:
        before = bisect_right(starts, run.start) - 1
        after = bisect_left(starts, run.start)
        if after <= before:  # a reference that started at the same instant: both sides
            after = before + 1
        near = [ordered[i] for i in (before, after) if 0 <= i < len(ordered)]
        if not near:
            continue
        levels = [rule.oriented(r.median) for r in near]
        if max(levels) - min(levels) > STRADDLED * rule.margin:
            continue  # the machine changed under this pair, not the commit
        ref = sum(levels) / len(levels)
        out.append(rule.oriented(run.median) - ref)
    return out


def _p(x: Sequence[float], alternative: str) -> float:
    """One-sided exact Wilcoxon signed-rank p-value; 1.0 where it cannot be asked."""
    if not any(x):
        return 1.0
    # lazy: only performance oracles need scipy
    from scipy.stats import wilcoxon  # type: ignore[import-untyped]

    p = float(wilcoxon(x, alternative=alternative).pvalue)
    return p if math.isfinite(p) else 1.0


def compare(diffs: Sequence[float], rule: Rule, alpha: float = DEFAULT_ALPHA) -> Paired:
    """BAD when the paired differences sit significantly above the threshold's margin, GOOD
    when significantly below, else UNDECIDED (also below :data:`MIN_PAIRS` pairs)."""
    k = len(diffs)
    change = math.expm1(median(diffs)) if diffs else None
    if k < MIN_PAIRS:
        return Paired(PerfVerdict.UNDECIDED, k, change, 1.0)
    shifted = [d - rule.margin for d in diffs]
    worse, better = _p(shifted, "greater"), _p(shifted, "less")
    if worse < alpha:
        return Paired(PerfVerdict.BAD, k, change, worse)
    if better < alpha:
        return Paired(PerfVerdict.GOOD, k, change, better)
    return Paired(PerfVerdict.UNDECIDED, k, change, min(worse, better))


def due(pairs: int, cap: int) -> int:
    """Pairs still to make before the next comparison: 0 at a point of the schedule
    (:data:`MIN_PAIRS`, then doubling, then the cap), else how far the next point is. Few
    looks keep the chances of a false verdict near the test's own level."""
    point = MIN_PAIRS
    while point < pairs and point < cap:
        point = min(cap, point * 2)
    return max(0, min(point, cap) - pairs) if pairs < cap else 0


def next_look(made: int, cap: int) -> int:
    """The pairs of the next comparison after an undecided one at ``made``: the schedule's
    next point (:func:`due`), at most ``cap``. A confirmation grows by it as the search does."""
    return min(cap, made + due(made + 1, cap) + 1)


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
