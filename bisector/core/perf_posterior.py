"""One posterior over where a performance change lies, from every paired run of the search.

A verdict per commit at a fixed level (:func:`bisector.core.paired.compare`) asks of each probed
commit whether it is worse than the reference *by more than the threshold*; near the threshold
that takes many pairs, and a commit's undecided pairs tell the search nothing. The question of a
bisection is narrower: which commit moved the metric from the good endpoint's level to the bad
one's. Commits before the change run like the reference (their paired differences sit near 0),
commits from it on like the bad endpoint (near its level); a commit is told by which of the two
its pairs sit near, which is twice as far apart as either is from the threshold.

So the search keeps one posterior over the change point ``c`` (the first commit at the bad
level): for each place of ``c`` between two measured commits, the pairs before it sit at the
reference's own level (0: the same code as the good endpoint) and the pairs from it on at the
bad level, fitted (the mean of those pairs, at least the threshold's margin), each pair weighed
by a Student *t* of the bisection's plain scale (:class:`bisector.core.paired.Scale`, with its
degrees of freedom: a scale learnt from few runs weighs every pair less), the likelihood
tempered for the reference runs neighbouring pairs share. A level before the change fitted up
to the threshold (a commit below it is not the change either) let a culprit whose pairs came
out low sit between the two levels: 32 pairs of it left the search in doubt and the answer a
window; a commit changing the metric by less than the threshold before the culprit is still
told apart, being nearer 0 than the bad level. The next run goes to the commit whose verdict
splits the posterior's mass most evenly (its median: what tells "which commit" most, as in a
probabilistic bisection), a commit already measured included; the search ends once one place
holds all but :data:`EPSILON` of the mass. The answer is then checked by the confirmation, on
fresh runs, against the threshold: a search that was misled ends openly unsure, never with a
wrong commit.

Pure: no I/O, no clock; the caller hands in the pairs and the scale.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

EPSILON = 0.001
"""Posterior mass left outside the named place when the search stops. A misstep here costs an
unsure answer (the confirmation refuses the commit), and a confirmation can err too: in the
hardest row of ``make bench`` section 13 (10 % against 5 %, 2x drift, a slow mode) 0.002 named a
wrong commit in 7 of 2500 hunts (tempered at 3/4) and one of those 60,000 hunts then ended
``done`` on it; 0.001 with :data:`TEMPER` 0.6 named none in 2500, at 105 runs a hunt."""

TAIL_DOF = 30.0
"""Degrees of freedom of the *t* each pair is weighed by, fewer when the scale itself is known
with fewer (its tails then say how little the scale is known). The scale is the plain one,
whose width already holds a machine's slow mode: weighed by a heavy-tailed *t* of the
winsorized scale (4 degrees), a slow run of a commit before the change looked like the bad
level and the hardest row of ``make bench`` section 13 named a wrong commit in 1 % of 400
hunts (0 with this, and 6 % fewer runs)."""

TEMPER = 0.6
"""Each pair's log-likelihood is scaled by this: neighbouring pairs share a reference run, so
``k`` pairs carry about ``3k/4`` independent ones' worth (:func:`bisector.core.paired.shared`),
and less again where a machine has a slow mode: a run in it lands between the two levels,
which a normal of the plain scale takes for more evidence than it is."""


@dataclass(frozen=True)
class Posterior:
    """P(change point in ``(cuts[i], cuts[i + 1]]``) = ``mass[i]``; ``cuts`` are the measured
    commits with both endpoints; inside a place the mass follows the prior (``upto_prior``:
    the prior's mass up to a position, 0 at the good endpoint, 1 at the bad one)."""

    n: int
    cuts: tuple[int, ...]
    mass: tuple[float, ...]
    upto_prior: Callable[[int], float]

    def upto(self, p: int) -> float:
        """P(c <= p): the probability that commit ``p`` is already at the bad level."""
        if p <= 0:
            return 0.0
        if p >= self.n - 1:
            return 1.0
        i = bisect_left(self.cuts, p) - 1  # cuts[i] < p <= cuts[i + 1]
        lo, hi = self.cuts[i], self.cuts[i + 1]
        span = self.upto_prior(hi) - self.upto_prior(lo)
        share = ((self.upto_prior(p) - self.upto_prior(lo)) / span if span > 0
                 else (p - lo) / (hi - lo))
        return sum(self.mass[:i]) + self.mass[i] * share

    def top(self) -> tuple[int, float]:
        """The place holding the most mass (its index into ``mass``) and that mass."""
        i = max(range(len(self.mass)), key=lambda j: (self.mass[j], -j))
        return i, self.mass[i]


def uniform(n: int) -> Callable[[int], float]:
    """Every commit between the endpoints equally likely to be the change."""
    return lambda p: min(max(p, 0), n - 1) / (n - 1)


def _t_cost(z: float, nu: float) -> float:
    """Minus the log of a Student *t* density at ``z``, less its constant."""
    return (nu + 1) / 2 * math.log1p(z * z / nu)


def posterior(n: int, pairs: Mapping[int, Sequence[float]], sd: float, dof: float,
              margin: float, upto_prior: Callable[[int], float] | None = None) -> Posterior:
    """The posterior over the change point from each commit's paired differences (oriented
    log, larger is worse; ``pairs[p]``, the bad endpoint ``n - 1`` among them), the
    bisection's scale ``sd`` known with ``dof`` degrees of freedom, and the threshold's
    ``margin``. ``upto_prior``: the prior's cumulative mass (default: uniform)."""
    prior = upto_prior or uniform(n)
    measured = sorted(p for p, d in pairs.items() if 0 < p < n - 1 and d)
    cuts = (0, *measured, n - 1)
    groups = [list(pairs.get(p, ())) for p in cuts[1:]]  # pairs of cuts[1], cuts[2], ...
    nu = max(1.0, min(dof, TAIL_DOF))
    s = sd if sd > 0 and math.isfinite(sd) else 1e-9
    logs: list[float] = []
    for i in range(len(cuts) - 1):
        before = [d for g in groups[:i] for d in g]
        after = [d for g in groups[i:] for d in g]
        high = max(margin, sum(after) / len(after)) if after else margin
        cost = sum(_t_cost(d / s, nu) for d in before)
        cost += sum(_t_cost((d - high) / s, nu) for d in after)
        weight = prior(cuts[i + 1]) - prior(cuts[i])
        logs.append(-TEMPER * cost + (math.log(weight) if weight > 0 else -math.inf))
    top = max(logs)
    raw = [math.exp(x - top) if math.isfinite(x) else 0.0 for x in logs]
    total = sum(raw)
    return Posterior(n, cuts, tuple(x / total for x in raw), prior)


def settled(post: Posterior, able: Callable[[int], bool], eps: float | None = None) -> bool:
    """One place holds all but ``eps`` of the mass, and no commit inside it can still split
    it (a single commit, or only commits that cannot be measured)."""
    i, mass = post.top()
    if mass < 1 - (EPSILON if eps is None else eps):
        return False
    return not any(able(p) for p in range(post.cuts[i] + 1, post.cuts[i + 1]))


def probes(post: Posterior, able: Callable[[int], bool], k: int = 1,
           eps: float | None = None) -> tuple[int, ...]:
    """Up to ``k`` commits to run next: those whose verdict splits the mass nearest its
    ``j / (k + 1)`` quantiles, among the commits that can still be measured and whose place
    is still in doubt (``eps < P(c <= p) < 1 - eps``); none when no such commit is left."""
    eps = EPSILON if eps is None else eps
    open_ = [(p, post.upto(p)) for p in _candidates(post)
             if able(p) and eps < post.upto(p) < 1 - eps]
    picks: list[int] = []
    for j in range(1, k + 1):
        goal = j / (k + 1)
        left = [(abs(q - goal), p) for p, q in open_ if p not in picks]
        if left:
            picks.append(min(left)[1])
    return tuple(sorted(picks))


_SPLITS = tuple(j / 8 for j in range(1, 8))  # shares of the mass a long place is cut at


def _candidates(post: Posterior) -> list[int]:
    """Commits worth considering: every measured one, and inside each place the commits
    nearest its share of the mass at each eighth (the splits a probe could make), so a
    range of thousands of commits is not walked commit by commit."""
    out: set[int] = set(post.cuts[1:-1])
    for i in range(len(post.cuts) - 1):
        lo, hi = post.cuts[i], post.cuts[i + 1]
        if hi - lo < 2:
            continue
        if hi - lo <= 64:
            out.update(range(lo + 1, hi))
            continue
        base = sum(post.mass[:i])
        for goal in _SPLITS:
            if post.mass[i] <= 0:
                break
            want = (goal - base) / post.mass[i]
            if 0 < want < 1:
                out.update(_near_share(post, lo, hi, want))
        out.update((lo + 1, (lo + hi) // 2, hi - 1))
    return sorted(out)


def _near_share(post: Posterior, lo: int, hi: int, want: float) -> tuple[int, int]:
    """The two commits of ``lo+1..hi-1`` around the one where the place's prior share
    reaches ``want``."""
    a, b = lo + 1, hi - 1
    base, span = post.upto_prior(lo), post.upto_prior(hi) - post.upto_prior(lo)
    while a < b:
        mid = (a + b) // 2
        if span <= 0 or (post.upto_prior(mid) - base) / span >= want:
            b = mid
        else:
            a = mid + 1
    return max(lo + 1, a - 1), a
