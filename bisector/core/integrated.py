"""The culprit's probability with the oracle's error rates unknown, not estimated.

:class:`bisector.core.noisy.Posterior` takes the rates as given: a false-failure rate read off
a handful of good-endpoint runs. Three runs of a test that fails spuriously 40 % of the time
show no failure one time in five, the search then believes its runs far more than it should,
and simulated hunts at 40 % named a wrong culprit in about 4 % of them. Here each rate is
integrated out instead: for a culprit ``c`` the runs before it are a Bernoulli with an unknown
false-failure rate, the runs from it on one with an unknown false-pass rate, each under a
uniform prior on [0, 1/2] (an oracle wrong more than half the time says the opposite), so the
likelihood of ``c`` is a product of two Beta-binomial marginals. Every run then informs the
rates, interior runs included, and a search with few runs is as unsure as it should be.

The false-pass rate's prior also holds "broken for good" (weight
:data:`~bisector.base.defaults.NOISY_BROKEN_FOR_GOOD`): a regression that breaks a flaky test
usually makes it fail every run, and then a pass after a commit says it is not the culprit,
not a flake. With a uniform rate alone one pass weighed like a few failures, and the search
paid a third more runs; a regression that only raises the failure rate still has the uniform
half of the prior, and simulated hunts of those stay right (``make bench`` section 14).

The flaky search reads its error rates off this model (:meth:`Integrated.rates`, for a prior's
posterior and the answer's words); whether and where the culprit is sure, "no regression"
included, is :mod:`bisector.core.joint`'s. Pure; scipy's special functions on first use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from bisector.base import defaults


def _log_marginal(lies: int, runs: int) -> float:
    """log of the integral over r in [0, 1/2] of 2 r^lies (1 - r)^(runs - lies)."""
    # lazy: only flaky oracles need scipy
    from scipy.special import betainc, betaln  # type: ignore[import-untyped]

    a, b = 1 + lies, 1 + runs - lies
    part = float(betainc(a, b, 0.5))
    return math.log(2.0) + float(betaln(a, b)) + (math.log(part) if part > 0 else -math.inf)


def _log_after(good: int, runs: int, broken: float) -> float:
    """log of the after side's marginal: with prior weight ``broken`` the test fails every
    run from the culprit on (no false pass at all), else its false-pass rate is uniform on
    [0, 1/2] (:func:`_log_marginal`). One pass rules the first out for this culprit."""
    slab = math.log1p(-broken) + _log_marginal(good, runs)
    if good or broken <= 0:
        return slab
    spike = math.log(broken)
    top = max(spike, slab)
    return top + math.log(math.exp(spike - top) + math.exp(slab - top))


class Integrated:
    """The culprit's most likely split with the rates integrated out, and the rates read off
    every run there (:meth:`rates`); constant between probed positions."""

    def __init__(self, n: int, observations: Iterable[tuple[int, bool]],
                 broken: float = defaults.NOISY_BROKEN_FOR_GOOD) -> None:
        if n < 2:
            raise ValueError("a bisection needs at least the good and the bad endpoint")
        if not 0.0 <= broken < 1.0:  # at 1 one pass anywhere would leave no culprit at all
            raise ValueError("broken must be in [0, 1)")
        self.n = n
        self.broken = broken
        at: dict[int, list[int]] = {}  # position -> [runs, reported bad]
        for p, bad in observations:
            cell = at.setdefault(p, [0, 0])
            cell[0] += 1
            cell[1] += int(bad)
        inner = sorted(p for p in at if 0 < p < n - 1)
        # Segments of culprits sharing one split: culprits ``lo + 1 .. hi`` have every run at
        # or below ``lo`` before them and every run at or above ``hi`` after them.
        bounds = [0, *inner, n - 1]
        total_runs = sum(c[0] for c in at.values())
        total_bad = sum(c[1] for c in at.values())
        before_runs = before_bad = 0
        segments: list[tuple[int, int, float]] = []  # (first c, last c, log weight per c)
        # (failures before, runs before, passes after, runs after) of each segment
        splits: list[tuple[int, int, int, int]] = []
        for j in range(len(bounds) - 1):
            lo, hi = bounds[j], bounds[j + 1]
            runs_lo, bad_lo = at.get(lo, [0, 0])
            before_runs += runs_lo
            before_bad += bad_lo
            after_runs = total_runs - before_runs
            after_good = after_runs - (total_bad - before_bad)
            logw = _log_marginal(before_bad, before_runs) + _log_after(after_good, after_runs,
                                                                       broken)
            segments.append((lo + 1, hi, logw))
            splits.append((before_bad, before_runs, after_good, after_runs))
        top = max(w for _, _, w in segments)
        self._splits = splits
        self._segments = [(f, l_, math.exp(w - top)) for f, l_, w in segments]
        self._z = sum((l_ - f + 1) * w for f, l_, w in self._segments)

    def best(self) -> tuple[int, float]:
        """(most likely culprit, its probability); ties go to the older commit."""
        first, _, w = max(self._segments, key=lambda s: (s[2], -s[0]))
        return first, w / self._z

    def rates(self) -> tuple[float, float]:
        """(false failures, false passes) read off every run at the most likely split: the
        share of failures before the most likely culprit and of passes from it on, each with
        one imagined run of either kind (the Beta(1, 1) mean)."""
        first, _ = self.best()
        j = next(i for i, (f, _, _) in enumerate(self._segments) if f == first)
        bad_before, before, good_after, after = self._splits[j]
        fn = (good_after + 1) / (after + 2)
        if good_after == 0 and self.broken > 0:  # times P(not broken for good | runs)
            fn *= math.exp(math.log1p(-self.broken) + _log_marginal(0, after)
                           - _log_after(0, after, self.broken))
        return (bad_before + 1) / (before + 2), fn
