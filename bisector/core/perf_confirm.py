"""A performance culprit's claim checked on fresh pairs, with the search's pairs counted.

The search named the culprit from its pairs of every commit against the good endpoint (the
reference); its pairs of the culprit and of its parent already measure the step between the
two. Confirmation runs the culprit beside its parent afresh (one pair at a time,
:func:`bisector.core.paired.judge_beside`'s shape), and counting the search's pairs there would
save fresh runs where the claim is near the threshold. But the search chose the culprit
*because* of those pairs: a slowdown that came and went while the search measured (another job
on the GPU, a throttled clock) is in them, and an unlucky run there would confirm itself. A
confirmation that pooled them freely, tried before, ended ``done`` on a slowdown that did not
hold up (``test_a_culprit_that_does_not_hold_up_is_never_done``). So the search's pairs count
only under three guards:

- **fresh pairs first**: nothing is confirmed on the search's runs alone, and they count only
  from :data:`FRESH_PAIRS` fresh pairs on (fresh pairs alone decide from the first, as before);
- **consistency**: the fresh pairs' mean and the search's estimate of the step measure the same
  thing (two-sided, at :data:`CONSISTENT_ALPHA`, with both their errors); once they disagree
  the search's pairs are set aside for the rest of the confirmation (:class:`Claim`), which
  goes on as before, on fresh pairs alone;
- **the fresh pairs show it too**: worse than the parent by more than the threshold on their
  own, at the looser :data:`FRESH_ALPHA`, while the claim itself is tested at
  :data:`~bisector.core.paired.CONFIRM_ALPHA` on the search's estimate and the fresh pairs
  together (each weighed by its variance).

A wrong culprit's fresh pairs sit near 0 (it runs like its parent), far below the threshold's
margin, so the fresh test alone almost never passes at :data:`FRESH_ALPHA` however sure the
search's pairs look; a right one near the threshold is told in fewer fresh pairs than
:data:`~bisector.core.paired.CONFIRM_ALPHA` alone would take. A fresh test that says *not*
worse by the threshold is the fresh pairs' own verdict at the confirmation's level, as before:
the search's pairs never turn a fresh ``good`` into ``bad``, only bring a ``bad`` the fresh pairs
show on their own sooner.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bisector.core import paired
from bisector.core.perf import PerfVerdict

FRESH_ALPHA = 0.01
"""Level at which the fresh pairs alone must show the culprit worse than its parent by more
than the threshold before the search's pairs may complete the claim."""

FRESH_PAIRS = 3
"""Fresh pairs before the search's pairs may count. On a machine with a slow mode larger than
the threshold (section 13's hardest row: one run in five 8 % slower, against 5 %), one or two
fresh pairs of a culprit that changes nothing can land a slow run on it and read like the
step the search saw; a confirmation of such a slowdown that only the search saw said ``bad``
in 4 of 10,000 simulated checks counting the search's pairs from the first fresh pair, 3 from
the second, 2 from the third, as many as on fresh pairs alone. The fresh pairs alone still
decide from the first (a clear change in one pair, as before)."""

CONSISTENT_ALPHA = 0.01
"""Two-sided level at which the fresh pairs' mean and the search's estimate of the step are
taken to disagree (the search's pairs are then set aside)."""


@dataclass(frozen=True)
class Lent:
    """The search's estimate of the step from the parent to the culprit: the mean of the
    culprit's pairs minus the mean of the parent's (each against the reference, on the
    oriented log scale), and its variance in units of one pair's (``weight``)."""

    change: float
    weight: float
    culprit: int  # the culprit's pairs in the search
    parent: int  # the parent's (0: the parent is the reference itself, its level 0 by design)


def lent(rule: paired.Rule, culprit: int, parent: int) -> Lent | None:
    """What the search lends about ``culprit`` beside ``parent`` (positions), from the pairs it
    handed over with its rule (:attr:`~bisector.core.paired.Rule.searched`); None when the
    culprit, or a parent other than the reference, has no pair there."""
    pairs = dict(rule.searched)
    mine = pairs.get(culprit, ())
    theirs = () if parent == 0 else pairs.get(parent, ())
    if not mine or (parent != 0 and not theirs):
        return None
    change = sum(mine) / len(mine) - (sum(theirs) / len(theirs) if theirs else 0.0)
    weight = paired.shared(len(mine)) / len(mine)
    if theirs:
        weight += paired.shared(len(theirs)) / len(theirs)
    return Lent(change, weight, len(mine), len(theirs))


@dataclass(frozen=True)
class Judged:
    """One look of the claim: its verdict (``pairs``: the fresh ones), whether the search's
    pairs counted in it, and whether the fresh pairs contradicted them."""

    verdict: paired.Paired
    counted: bool
    contradicted: bool


def judge(refs: Sequence[paired.Timed], tests: Sequence[paired.Timed], rule: paired.Rule,
          searched: Lent | None, alpha: float = paired.CONFIRM_ALPHA) -> Judged:
    """The culprit's fresh runs ``tests`` beside its parent's ``refs``, with what the search
    lent (None: fresh pairs alone, as :func:`~bisector.core.paired.judge_beside`)."""
    pairs = paired.paired_runs(refs, tests, rule)
    diffs = [d for d, _ in pairs]
    own = paired.scale(refs, [pairs], rule)
    spread = own if rule.spread is None else rule.spread.pooled(own)
    fresh = paired.compare(diffs, rule, spread, alpha)
    if fresh.verdict is not PerfVerdict.UNDECIDED or searched is None or not diffs:
        return Judged(fresh, False, False)
    sd, dof = spread.used, spread.dof
    if dof < 1 or not math.isfinite(sd) or sd <= 0:
        return Judged(fresh, False, False)
    # lazy: only performance oracles need scipy; stdtr is Student's t CDF
    from scipy.special import stdtr  # type: ignore[import-untyped]

    k = len(diffs)
    mean, var = sum(diffs) / k, paired.shared(k) / k
    z = (mean - searched.change) / (sd * math.sqrt(var + searched.weight))
    if 2 * float(stdtr(dof, -abs(z))) < CONSISTENT_ALPHA:
        return Judged(fresh, False, True)
    if k < FRESH_PAIRS:
        return Judged(fresh, False, False)
    if paired.compare(diffs, rule, spread, FRESH_ALPHA).verdict is not PerfVerdict.BAD:
        return Judged(fresh, True, False)
    precision = 1 / var + 1 / searched.weight
    both = (mean / var + searched.change / searched.weight) / precision
    t = (both - rule.margin) / (sd * math.sqrt(1 / precision))
    worse = float(stdtr(dof, -t))
    if worse < alpha:
        return Judged(paired.Paired(PerfVerdict.BAD, k, fresh.change, worse), True, False)
    return Judged(fresh, True, False)


class Claim:
    """The culprit's check look after look: the search's pairs count until the fresh pairs
    contradict them once, and never again after (a slowdown that came and went must not come
    back into the claim when later fresh pairs happen to agree with it)."""

    def __init__(self, rule: paired.Rule, searched: Lent | None) -> None:
        self.rule, self.searched = rule, searched
        self.counted = self.contradicted = False

    def __call__(self, refs: Sequence[paired.Timed],
                 tests: Sequence[paired.Timed]) -> paired.Paired:
        got = judge(refs, tests, self.rule, None if self.contradicted else self.searched)
        self.contradicted = self.contradicted or got.contradicted
        self.counted = got.counted
        return got.verdict

    def record(self) -> dict[str, object] | None:
        """What the search lent and what became of it, for the confirmation's record."""
        s = self.searched
        if s is None:
            return None
        return {"culprit": s.culprit, "parent": s.parent,
                "change": round(math.expm1(s.change), 4), "counted": self.counted,
                "contradicted": self.contradicted}
