"""Change points in a performance series: where a metric measured on each nightly stepped.

The watch runs a performance oracle once per build and keeps its samples; one build is one
point of a series, and this module says between which builds the level changed. Two stages:

1. **Candidates** from ``ruptures`` (bottom-up segmentation, least absolute deviation cost, on
   the log of each build's median): a maintained segmentation library finds the breakpoints
   (bottom-up rather than PELT: as good on these series and 30x faster, which matters when a
   tick re-reads every series and the bench re-reads every prefix); log makes a step a
   relative one (a 10 % step is the same size at 1 ms and at 1 s) and the L1 cost lets one wild
   build pull a segment's level no more than one ordinary build does. Its penalty scales with
   the series' own noise (a robust estimate from build-to-build differences), so a noisy metric
   is not cut into pieces at every wobble.
2. **Tests** of each candidate against its neighbours: the segment after it must differ from the
   segment before by at least the oracle's ``threshold`` (medians of build medians) and a
   two-sided Mann–Whitney U test over the builds' medians must reach ``alpha``. A candidate that
   fails is removed (the weakest first) and its two segments merged, then the rest tested again.

One build counts once, as its median: samples of one run share its conditions (the build, the
machine that night), so pooling them would overstate the evidence, exactly as the bisection's
per-run rule says (:mod:`bisector.core.perf`). A segment needs :data:`MIN_BUILDS` builds, so a
lone outlier build is never a segment of its own and a step is seen that many builds after it.

A step that brings the level back to where it was before an earlier step the other way is a
**step back**: ``undoes`` names that step (a fix of a slowdown, or a speed-up given back).

Pure: numbers in, steps out; no I/O, no clock, no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bisector.core.perf import Direction, median

DEFAULT_ALPHA = 0.01
"""Level of the two-sided test between the builds before and after a candidate step."""

MIN_BUILDS = 3
"""Builds each side of a step needs: a single outlier build can never be a segment, and one
more build after a step than a pair keeps a two-night hiccup out as well."""

PENALTY = 2.0
"""The segmentation's penalty per breakpoint, in units of noise x log(builds) (BIC-like). It
only offers candidates, every one is tested after, so it errs on the side of offering many."""


@dataclass(frozen=True)
class Step:
    """A change of level between build ``index - 1`` and build ``index`` (0-based)."""

    index: int
    before: float  # the median of the build medians of the segment before
    after: float  # ... and of the segment after
    change: float  # relative, signed so that positive is worse (as perf.Comparison's)
    p_value: float
    builds_before: int
    builds_after: int
    undoes: int | None = None  # index of the earlier step this one brings the level back from

    @property
    def worse(self) -> bool:
        return self.change > 0


def relative_change(before: float, after: float, direction: Direction) -> float:
    """``after`` against ``before``, positive when worse whatever the direction."""
    change = (after - before) / before
    return change if direction is Direction.LOWER else -change


def build_medians(builds: Sequence[Sequence[float]]) -> list[float]:
    """One value per build: the median of its samples (a build without samples is left out
    by the caller, never here)."""
    return [median(list(b)) for b in builds]


def noise(values: Sequence[float]) -> float:
    """Build-to-build noise of ``values`` (log scale): the MAD of successive differences over
    sqrt(2), robust to a step (one large difference) and to an outlier (two)."""
    if len(values) < 3:
        return 0.0
    diffs = np.abs(np.diff(np.asarray(values, dtype=float)))
    return float(1.4826 * np.median(diffs) / math.sqrt(2))


def _candidates(x: np.ndarray, min_builds: int) -> list[int]:
    # Lazy, as core/perf.py's scipy: ruptures imports scipy.stats (a second of CPU), and every
    # `bisect tick` imports this module while most series are too short to ever get here.
    import ruptures as rpt  # type: ignore[import-untyped]

    n = len(x)
    sigma = max(noise(list(x)), 1e-6)
    algo = rpt.BottomUp(model="l1", min_size=min_builds, jump=1).fit(x.reshape(-1, 1))
    ends: list[int] = algo.predict(pen=PENALTY * sigma * math.log(n))
    return [int(e) for e in ends if 0 < e < n]


def _l1(seg: np.ndarray) -> float:
    return float(np.abs(seg - np.median(seg)).sum())


def _refine(x: np.ndarray, cuts: list[int], min_builds: int) -> list[int]:
    """Each cut moved to the exact build that splits its two neighbouring segments best (least
    absolute deviation): bottom-up merging leaves cuts on its starting grid, and a bisection
    started a build off would search the wrong range."""
    out = list(cuts)
    for j in range(len(out)):
        lo = out[j - 1] if j else 0
        hi = out[j + 1] if j + 1 < len(out) else len(x)
        positions = range(lo + min_builds, hi - min_builds + 1)
        if positions:
            out[j] = min(positions, key=lambda c: (_l1(x[lo:c]) + _l1(x[c:hi]), abs(c - out[j])))
    return out


def _test(x: np.ndarray, lo: int, cut: int, hi: int) -> tuple[float, float]:
    """(the p-value, the relative step in log space) between x[lo:cut] and x[cut:hi]."""
    from scipy.stats import mannwhitneyu  # type: ignore[import-untyped]

    left, right = x[lo:cut], x[cut:hi]
    if np.ptp(x[lo:hi]) == 0:
        return 1.0, 0.0
    p = float(mannwhitneyu(left, right, alternative="two-sided").pvalue)
    return p, float(np.median(right) - np.median(left))


def detect(medians: Sequence[float], threshold: float,
           direction: Direction = Direction.LOWER, *, alpha: float = DEFAULT_ALPHA,
           min_builds: int = MIN_BUILDS) -> list[Step]:
    """The steps of a series of build medians (oldest first), oldest step first: each at
    least ``threshold`` (a fraction) between the medians of its neighbouring segments and
    significant at ``alpha``."""
    n = len(medians)
    if n < 2 * min_builds or any(v <= 0 or not math.isfinite(v) for v in medians):
        return []
    x = np.log(np.asarray(medians, dtype=float))
    cuts = _candidates(x, min_builds)
    while cuts:
        cuts = _refine(x, cuts, min_builds)
        bounds = [0, *cuts, n]
        worst: tuple[float, float, int] | None = None  # (p, -|step|, position in cuts)
        for j, cut in enumerate(cuts):
            p, step = _test(x, bounds[j], cut, bounds[j + 2])
            if p > alpha or math.expm1(abs(step)) < threshold:
                key = (p, -abs(step), j)
                if worst is None or key > worst:
                    worst = key
        if worst is None:
            break
        del cuts[worst[2]]
    bounds = [0, *cuts, n]
    steps: list[Step] = []
    for j, cut in enumerate(cuts):
        lo, hi = bounds[j], bounds[j + 2]
        p, _ = _test(x, lo, cut, hi)
        before = median(list(medians[lo:cut]))
        after = median(list(medians[cut:hi]))
        steps.append(Step(index=cut, before=before, after=after,
                          change=relative_change(before, after, direction), p_value=p,
                          builds_before=cut - lo, builds_after=hi - cut,
                          undoes=_undoes(steps, before, after, threshold)))
    return steps


def _undoes(earlier: list[Step], before: float, after: float, threshold: float) -> int | None:
    """The latest earlier step, the other way, whose level before this one's ``after`` comes
    back to (within the threshold): this step gives that one back."""
    for s in reversed(earlier):
        if (s.after - s.before) * (after - before) >= 0:
            continue  # the same way: not a step back
        if abs(after - s.before) / s.before < threshold:
            return s.index
        return None
    return None
