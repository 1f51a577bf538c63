"""The noisy search core: bisection that stays right when the oracle sometimes lies.

No git, no I/O, no clock; the same observations always give the same step. Positions are those of
:mod:`bisector.core.search` (``0`` the good endpoint, ``n - 1`` the bad one) and the culprit ``c``
is the first bad position, ``1 <= c <= n - 1``, uniform a priori unless a
:class:`~bisector.core.prior.Prior` (from what the failure names) is given: then the segments
start as the prior's and each carries its own weight.

The model: a run at ``p`` is truly bad iff ``p >= c``; it reports bad with probability
``1 - fn`` when truly bad and ``fp`` when truly good, independently of every other run. A skipped
run carries no information, so the caller simply does not observe it. GPU regressions are often
flaky, and one wrong verdict sends plain bisection to the wrong commit for good; here every run
only shifts probability, so a lie is outvoted by later runs instead of being believed forever.

An observation at ``p`` multiplies every ``c <= p`` by one likelihood and every ``c > p`` by
another, so the posterior is constant between distinct probed positions. :class:`Posterior` keeps
one log-weight per such segment: an update costs O(distinct probed positions) whatever ``n`` is
(10**6 commits are as cheap as 10), and nothing is approximated.

Rates: an oracle's metadata may give them; otherwise each endpoint is run ``repeats`` times (the
oracle's ``repeats``, or the runner's default) and :func:`estimate_rates` turns those runs into
``(fp, fn)``: a "bad" at the good endpoint is a false positive, a "good" at the bad endpoint a
false negative. Re-estimated rates apply to the past too: rebuild with
:meth:`Posterior.from_observations`.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import mul

from bisector.core.prior import Prior
from bisector.core.search import Next as Next  # the same step; a position may repeat

DEFAULT_CONFIDENCE = 0.99
# Rates are clamped here: 0 would make one lie impossible to outvote (log 0), and at 0.5 a run
# says nothing at all.
RATE_MIN = 0.001
RATE_MAX = 0.45
# The run cap is CAP_FACTOR times the expected cost of the search: the bits to name one of n - 1
# commits at the asked confidence over the capacity 1 - H(max(fp, fn)) of the oracle as a channel.
# Simulated greedy information-gain hunts (rates 10-45 %, n 100-10 000, 2 000 each) cost 0.65-0.8
# of that on average, 1.5x at the 99th percentile and about 2x at the very worst: 3x leaves giving
# up to searches whose oracle lies more than its rates say, and still stops those.
CAP_FACTOR = 3.0
# Gains this close are equal: a rounding error must not override "ties go to the older commit".
TIE = 1e-12


@dataclass(frozen=True)
class Culprit:
    """``position`` is the first bad commit with posterior ``probability`` >= the confidence."""

    position: int
    probability: float


@dataclass(frozen=True)
class GiveUp:
    """The run cap is reached first: ``position`` is only the most likely culprit."""

    position: int
    probability: float


NoisyStep = Next | Culprit | GiveUp


@dataclass(frozen=True)
class BetaPrior:
    """Beta(a, b) prior on an error rate: ``a`` pseudo-lies in ``a + b`` pseudo-runs.

    The default is uniform, Beta(1, 1), on purpose (see :func:`estimate_rates`)."""

    a: float = 1.0
    b: float = 1.0


def entropy(x: float) -> float:
    """Binary entropy in bits; 0 at 0 and 1."""
    if x <= 0.0 or x >= 1.0:
        return 0.0
    return -x * math.log2(x) - (1.0 - x) * math.log2(1.0 - x)


def _check_rates(fp: float, fn: float) -> None:
    if not (0.0 < fp < 0.5 and 0.0 < fn < 0.5):
        raise ValueError(f"error rates must lie in (0, 0.5), got fp={fp}, fn={fn}")


class Posterior:
    """P(culprit = c | observations), piecewise constant between distinct probed positions.

    Segment ``i`` covers culprits ``_start(i).._ends[i]``; every culprit in it has the per-element
    log-weight ``_logw[i]``. Only the log-weight *ratio* of an observation is added, and only to
    the segments at or before ``p`` (normalising cancels the rest). Masses are cached and rebuilt
    lazily after an update, so a search step's many queries share one O(segments) pass.
    """

    def __init__(self, n: int, fp: float, fn: float, prior: Prior | None = None) -> None:
        if n < 2:
            raise ValueError("a bisection needs at least the good and the bad endpoint")
        if prior is not None and prior.n != n:
            raise ValueError(f"a prior over {prior.n} candidates for {n}")
        _check_rates(fp, fn)
        self.n, self.fp, self.fn = n, fp, fn
        # log of (likelihood for c <= p) / (likelihood for c > p), per reported verdict.
        self._delta_bad = math.log((1.0 - fn) / fp)
        self._delta_good = math.log(fn / (1.0 - fp))
        self._ends: list[int] = [n - 1]
        self._lens: list[int] = [n - 1]
        self._logw: list[float] = [0.0]
        if prior is not None:  # one segment per run of equal prior weight
            self._ends = list(prior.ends)
            self._lens = [e - s for e, s in zip(prior.ends, (0, *prior.ends[:-1]), strict=True)]
            self._logw = [math.log(w) for w in prior.per]
        self._history: list[tuple[int, bool]] = []
        self._dirty = True
        self._w: list[float] = []  # per-element weight of each segment, max 1
        self._prefix: list[float] = []  # unnormalised mass of segments 0..i
        self._norm: list[float] = []  # A(ends[i]) = P(c <= ends[i])
        self._z = 1.0
        # Per-posterior constants of the probe choice (the rates never change in place).
        self.h_fp, self.h_fn = entropy(fp), entropy(fn)
        self.split = best_split(fp, fn)

    @classmethod
    def from_observations(cls, n: int, fp: float, fn: float,
                          obs: Iterable[tuple[int, bool]],
                          prior: Prior | None = None) -> Posterior:
        """Replay ``(position, reported bad)`` pairs under (possibly re-estimated) rates."""
        post = cls(n, fp, fn, prior)
        for position, bad in obs:
            post.observe(position, bad)
        return post

    @property
    def observations(self) -> int:
        """Runs observed, endpoints included (they count as runs though they say nothing)."""
        return len(self._history)

    @property
    def history(self) -> tuple[tuple[int, bool], ...]:
        return tuple(self._history)

    def observe(self, position: int, bad: bool) -> None:
        """One run at ``position`` reported ``bad``; a skipped run must not be observed."""
        if not 0 <= position < self.n:
            raise ValueError(f"position {position} outside 0..{self.n - 1}")
        self._history.append((position, bad))
        if position == 0 or position == self.n - 1:
            return  # every culprit agrees on the truth there: the likelihood is flat
        ends, logw, lens = self._ends, self._logw, self._lens
        i = bisect_left(ends, position)
        if ends[i] != position:  # split the segment holding the position
            left = lens[i] - (ends[i] - position)
            ends.insert(i, position)
            logw.insert(i, logw[i])
            lens.insert(i, left)
            lens[i + 1] -= left
        delta = self._delta_bad if bad else self._delta_good
        for j in range(i + 1):
            logw[j] += delta
        self._dirty = True

    def _cache(self) -> None:
        top = max(self._logw)
        # map() over C methods rather than comprehensions: this runs after every observation.
        self._w = list(map(math.exp, map(top.__rsub__, self._logw)))  # exp(logw - top)
        # Summed exactly as mass_at_or_before sums (length * weight, added to the previous
        # total), so A at a segment's end equals the cached value bit for bit.
        self._prefix = prefix = list(accumulate(map(mul, self._lens, self._w)))
        self._z = total = prefix[-1]
        self._norm = list(map(total.__rtruediv__, prefix))  # prefix / total
        self._dirty = False

    def _start(self, i: int) -> int:
        return self._ends[i - 1] + 1 if i else 1

    def mass_at_or_before(self, p: int) -> float:
        """A(p) = P(c <= p): 0 at the good endpoint, 1 at the bad one, monotone in between."""
        if p <= 0:
            return 0.0
        if self._dirty:
            self._cache()
        if p >= self.n - 1:
            return 1.0
        i = bisect_left(self._ends, p)
        before = self._prefix[i - 1] if i else 0.0
        return (before + (p - self._start(i) + 1) * self._w[i]) / self._z

    def prob(self, c: int) -> float:
        """P(culprit = c); 0 for the good endpoint."""
        if not 0 <= c < self.n:
            raise ValueError(f"position {c} outside 0..{self.n - 1}")
        if c == 0:
            return 0.0
        if self._dirty:
            self._cache()
        return self._w[bisect_left(self._ends, c)] / self._z

    def best(self) -> tuple[int, float]:
        """(most likely culprit, its probability); ties go to the older commit."""
        if self._dirty:
            self._cache()
        i = self._w.index(max(self._w))  # the first maximum: the oldest segment
        return self._start(i), self._w[i] / self._z

    def most_likely(self, limit: int, mass: float = 1.0) -> list[tuple[int, float]]:
        """Up to ``limit`` (position, probability), most likely first (older on ties), stopping
        once they hold ``mass``: the suspects list of an answer that is only "most likely"."""
        if self._dirty:
            self._cache()
        out: list[tuple[int, float]] = []
        held = 0.0
        for i in sorted(range(len(self._w)), key=lambda j: (-self._w[j], j)):
            q = self._w[i] / self._z
            for c in range(self._start(i), self._ends[i] + 1):
                if len(out) >= limit or held >= mass:
                    return out
                out.append((c, q))
                held += q
        return out

    def gain(self, a: float) -> float:
        """:func:`information_gain` at these rates, with their entropies computed once."""
        q = a * (1.0 - self.fn) + (1.0 - a) * self.fp
        return entropy(q) - a * self.h_fn - (1.0 - a) * self.h_fp

    def first_at_least(self, t: float) -> int:
        """The oldest position ``p`` with ``A(p) >= t`` (``t <= 1``), exact in floating point:
        it compares the very values :meth:`mass_at_or_before` returns."""
        if t <= 0.0:
            return 0
        if self._dirty:
            self._cache()
        i = min(bisect_left(self._norm, t), len(self._norm) - 1)
        start = self._start(i)
        before = self._prefix[i - 1] if i else 0.0
        w, z = self._w[i], self._z
        lo, hi = 1, self._ends[i] - start + 1  # the segment's end reaches t (or is the last)
        while lo < hi:
            mid = (lo + hi) // 2
            if (before + mid * w) / z >= t:
                hi = mid
            else:
                lo = mid + 1
        return start + lo - 1


def information_gain(a: float, fp: float, fn: float) -> float:
    """Expected bits learnt by one run at a position with ``A(p) = a``."""
    q = a * (1.0 - fn) + (1.0 - a) * fp
    return entropy(q) - a * entropy(fn) - (1.0 - a) * entropy(fp)


def best_split(fp: float, fn: float) -> float:
    """The ``A`` maximising :func:`information_gain` (concave in ``A``), in closed form: setting
    the derivative to zero gives P(report bad) = 1 / (1 + 2**d) with
    ``d = (H(fn) - H(fp)) / (1 - fp - fn)``; 1/2 when the rates are equal."""
    d = (entropy(fn) - entropy(fp)) / (1.0 - fp - fn)
    q = 1.0 / (1.0 + math.pow(2.0, d))
    return min(1.0, max(0.0, (q - fp) / (1.0 - fp - fn)))


def choose(posterior: Posterior, k: int = 1) -> tuple[int, ...]:
    """Where to run next: ``k`` distinct positions, oldest first.

    ``k == 1``: the position of highest expected information gain (older on ties). Gain depends
    on ``p`` only through ``A(p)``, monotone in ``p``, and is concave in ``A``, so the best is one
    of the two positions around :func:`best_split`'s ``A*``; of the lower one the oldest position
    with the same ``A`` is taken (same gain, older), and it wins gains equal within :data:`TIE`.
    Re-probing a position is normal.

    ``k > 1``: greedy gain would put all ``k`` runs at the same place, so the positions split the
    posterior mass into ``k + 1`` equal parts (each the position whose ``A`` is nearest
    ``j / (k + 1)``): the posterior-quantile form of the multisection in :mod:`search`. Ties go
    to older; collisions are pushed apart, and the endpoints (which say nothing about ``c``) are
    used only when there are not ``k`` inner positions.
    """
    n = posterior.n
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..{n}")
    if k == 1:
        hi = posterior.first_at_least(posterior.split)
        if hi == 0:
            return (0,)
        a_lo = posterior.mass_at_or_before(hi - 1)
        a_hi = posterior.mass_at_or_before(hi)
        if posterior.gain(a_lo) >= posterior.gain(a_hi) - TIE:
            return (posterior.first_at_least(a_lo),)
        return (hi,)
    lo_pos, hi_pos = (1, n - 2) if k <= n - 2 else (0, n - 1)
    picks: list[int] = []
    for j in range(1, k + 1):
        t = j / (k + 1)
        p = min(hi_pos, max(lo_pos, posterior.first_at_least(t)))
        if p > lo_pos:  # p - 1 is the newest position below t: the nearer one wins
            below = posterior.mass_at_or_before(p - 1)
            if t - below <= abs(posterior.mass_at_or_before(p) - t):
                p = max(lo_pos, posterior.first_at_least(below))
        picks.append(p)
    for j in range(1, k):  # strictly increasing, then back inside the range from the top
        picks[j] = max(picks[j], picks[j - 1] + 1)
    for j in range(k - 1, -1, -1):
        picks[j] = min(picks[j], hi_pos - (k - 1 - j))
    return tuple(picks)


def default_max_runs(n: int, fp: float, fn: float,
                     confidence: float = DEFAULT_CONFIDENCE) -> int:
    """The run cap: :data:`CAP_FACTOR` times the information the answer needs (log2 of the
    candidates plus log2 of the odds asked for) over what one run carries, 1 - H(max rate)."""
    bits = math.log2(max(n - 1, 2)) + math.log2(1.0 / (1.0 - min(confidence, 1.0 - 1e-12)))
    return math.ceil(CAP_FACTOR * bits / (1.0 - entropy(max(fp, fn))))


def decide(posterior: Posterior, confidence: float = DEFAULT_CONFIDENCE,
           max_runs: int | None = None, runs: int | None = None, width: int = 1) -> NoisyStep:
    """Stop with the culprit once its probability reaches ``confidence``; give up (with the most
    likely one) once ``runs`` (default: the posterior's observations; a caller reusing earlier
    bisections' runs passes only those it paid for) reach ``max_runs``; else probe ``width``
    positions (:func:`choose`). The posterior search with known rates (``make bench`` section
    6); a flaky bisection decides with :mod:`bisector.core.joint` instead."""
    position, probability = posterior.best()
    if probability >= confidence:
        return Culprit(position, probability)
    cap = max_runs if max_runs is not None else default_max_runs(
        posterior.n, posterior.fp, posterior.fn, confidence)
    if (runs if runs is not None else posterior.observations) >= cap:
        return GiveUp(position, probability)
    return Next(choose(posterior, min(width, posterior.n)))


def cautious_rates(good_endpoint_reports: Sequence[bool],
                   bad_endpoint_reports: Sequence[bool], quantile: float = 0.9
                   ) -> tuple[float, float]:
    """(fp, fn) at the upper ``quantile`` of their Beta(1, 1) posteriors, clamped: for the
    run cap only, so that rates read low off a few endpoint runs (no failure in three runs of
    an oracle failing 40 % of the time, one time in five) do not give up too early."""
    # lazy: only flaky oracles need scipy
    from scipy.stats import beta  # type: ignore[import-untyped]

    def rate(lies: int, runs: int) -> float:
        est = float(beta.ppf(quantile, 1 + lies, 1 + runs - lies))
        return min(RATE_MAX, max(RATE_MIN, est))

    return (rate(sum(good_endpoint_reports), len(good_endpoint_reports)),
            rate(sum(not bad for bad in bad_endpoint_reports), len(bad_endpoint_reports)))


def estimate_rates(good_endpoint_reports: Sequence[bool], bad_endpoint_reports: Sequence[bool],
                   prior: BetaPrior = BetaPrior()) -> tuple[float, float]:
    """(fp, fn) from runs at the endpoints (True = reported bad): the posterior mean under a
    Beta prior, ``(lies + a) / (runs + a + b)``, then clamped to ``[RATE_MIN, RATE_MAX]``.

    The uniform prior is deliberately pessimistic: three clean runs give 0.2, not 0. Three
    runs of an oracle wrong one time in five are all right half the time, and an
    underestimated rate makes the posterior overconfident, so the search stops on the wrong
    commit. Simulated with the endpoints' 3 + 3 runs as the only rate evidence (1000 hunts,
    100 and 1000 commits, confidence 0.99): at 20 % wrong answers Beta(1, 1) names the right
    culprit 99.7 % of the time, Jeffreys Beta(0.5, 0.5) 93-95 % and an "oracles are mostly
    right" Beta(1, 9) 88-89 %; what the optimistic priors save is 23 % of the runs of an
    oracle that is never wrong (17 instead of 22 runs for 100 commits). An oracle whose rates
    are known should say so in its metadata instead."""
    def rate(lies: int, runs: int) -> float:
        est = (lies + prior.a) / (runs + prior.a + prior.b)
        return min(RATE_MAX, max(RATE_MIN, est))

    fp = rate(sum(1 for bad in good_endpoint_reports if bad), len(good_endpoint_reports))
    fn = rate(sum(1 for bad in bad_endpoint_reports if not bad), len(bad_endpoint_reports))
    return fp, fn
