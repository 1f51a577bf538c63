"""One posterior over "no regression" and every culprit, the rates integrated out.

Hypotheses: H0, one failure rate at every commit (uniform on [0, 1]), prior ``1 - prior``;
H_c for each culprit ``c`` in ``1..n-1``, prior ``prior / (n - 1)`` each: the runs before
``c`` fail at ``r_good``, those from ``c`` on at ``r_bad`` (weight ``broken`` on "broken for
good", ``r_bad = 1`` and ``r_good`` uniform on ``[0, 1 - contrast]``: a regression that breaks a
flaky test makes it fail every run from its culprit on; the rest uniform over
``r_bad - r_good >= contrast``, for one that only fails more often, as a new race does).
Culprits between two probed positions share one likelihood (a segment). The next probe is the
position whose run tells most about (H0 or c): the mutual information between the hypothesis
and the run's outcome, with each hypothesis's predictive failure rate; it runs an endpoint
where telling H0 from a regression is worth most, and the culprit or its parent where both
questions are.

On one grid the bad rate's tail is a reversed cumulative sum of its density, and ``x +
contrast`` falls on the grid, shifted: the incomplete beta function is a hundred times slower,
and this runs every round. Pure but for numpy and scipy (imported on first use).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from bisector.base import defaults

STEPS = 800


def _h(q: Any) -> Any:
    import numpy as np

    q = np.clip(q, 1e-300, 1 - 1e-16)
    return -(q * np.log2(q) + (1 - q) * np.log2(1 - q))


def log_split(k1: Any, n1: Any, k2: Any, n2: Any, contrast: float, broken: float) -> Any:
    """log P(runs | culprit) for arrays of (failures, runs) before and from the culprit on."""
    import numpy as np
    from scipy.special import betainc, betaln, xlog1py, xlogy  # type: ignore[import-untyped]

    k1, n1, k2, n2 = (np.asarray(a, float)[:, None] for a in (k1, n1, k2, n2))
    shift = round(contrast * STEPS)
    x = np.linspace(0.0, 1.0, STEPS + 1)[None, :]

    def density(k: Any, runs: Any) -> Any:
        return np.exp(xlogy(k, x) + xlog1py(runs - k, -x) - betaln(1 + k, 1 + runs - k))

    good, bad = density(k1, n1), density(k2, n2)
    halves = (bad[:, 1:] + bad[:, :-1]) / (2 * STEPS)
    tail = np.concatenate([np.cumsum(halves[:, ::-1], axis=1)[:, ::-1],
                           np.zeros((len(k1), 1))], axis=1)
    beyond = np.concatenate([tail[:, shift:], np.zeros((len(k1), shift))], axis=1)
    inner = np.trapezoid(good * beyond, x, axis=1)
    area = (1.0 - contrast) ** 2 / 2.0
    with np.errstate(divide="ignore"):
        slab = (betaln(1 + k1, 1 + n1 - k1) + betaln(1 + k2, 1 + n2 - k2))[:, 0] + \
            np.log(np.maximum(inner, 0.0)) - np.log(area)
        a1, b1 = (1 + k1)[:, 0], (1 + n1 - k1)[:, 0]
        spike = np.where((k2 == n2)[:, 0],
                         betaln(a1, b1) + np.log(betainc(a1, b1, 1.0 - contrast))
                         - np.log(1.0 - contrast), -np.inf)
        if broken <= 0:
            return slab
        return np.logaddexp(np.log1p(-broken) + slab, np.log(broken) + spike)


class Joint:
    """P(H0), P(c) for every culprit, and the next probe, from (position, failed) runs."""

    def __init__(self, n: int, reports: Sequence[tuple[int, bool]],
                 contrast: float = defaults.NOISY_MIN_CONTRAST, prior: float = 0.5,
                 broken: float | None = None) -> None:
        import numpy as np
        from scipy.special import betaln

        broken = defaults.NOISY_BROKEN_FOR_GOOD if broken is None else broken
        self.n = n
        at: dict[int, list[int]] = {}
        for p, bad in reports:
            cell = at.setdefault(p, [0, 0])
            cell[0] += 1
            cell[1] += int(bad)
        self.at = at
        total_runs = sum(c[0] for c in at.values())
        total_bad = sum(c[1] for c in at.values())
        bounds = [0, *sorted(p for p in at if 0 < p < n - 1), n - 1]
        self.bounds = bounds
        k_lo, n_lo, width = [], [], []
        runs_before = bad_before = 0
        for lo, hi in pairwise(bounds):
            r, b = at.get(lo, [0, 0])
            runs_before += r
            bad_before += b
            k_lo.append(bad_before)
            n_lo.append(runs_before)
            width.append(hi - lo)
        k1, n1 = np.array(k_lo, float), np.array(n_lo, float)
        k2, n2 = total_bad - k1, total_runs - n1
        base = log_split(k1, n1, k2, n2, contrast, broken)
        # Predictive failure rates of a new run before / from the culprit on, per segment. A
        # segment whose likelihood underflowed (hundreds of runs against it) has no mass; its
        # rates are then 1/2, never NaN (exp(-inf - -inf)).
        with np.errstate(invalid="ignore"):
            q_good = np.exp(log_split(k1 + 1, n1 + 1, k2, n2, contrast, broken) - base)
            q_bad = np.exp(log_split(k1, n1, k2 + 1, n2 + 1, contrast, broken) - base)
        self.q_good = np.where(np.isfinite(q_good), q_good, 0.5)
        self.q_bad = np.where(np.isfinite(q_bad), q_bad, 0.5)
        log_h0 = float(betaln(1 + total_bad, 1 + total_runs - total_bad))
        self.q0 = (total_bad + 1) / (total_runs + 2)
        width_a = np.array(width, float)
        log_c = base + math.log(prior) - math.log(n - 1)  # each culprit of a segment
        log_0 = math.log1p(-prior) + log_h0
        top = max(float(np.max(log_c + np.log(width_a))), log_0)
        w_c = np.exp(log_c - top)
        w_0 = math.exp(log_0 - top)
        z = float(np.sum(w_c * width_a)) + w_0
        self.per = w_c / z  # P(c) of each culprit in segment j
        self.width = width_a
        self.mass = self.per * width_a  # P(c in segment j)
        self.p0 = w_0 / z
        self.regression = 1.0 - self.p0
        self._h: tuple[float, Any, Any] | None = None

    def best(self) -> tuple[int, float]:
        """(most likely culprit, its joint probability: a regression, and there)."""
        import numpy as np

        j = int(np.argmax(self.per))
        return self.bounds[j] + 1, float(self.per[j])

    def prob(self, c: int) -> float:
        """P(a regression, and its culprit is ``c``); 0 outside ``1..n-1``."""
        for j, (lo, hi) in enumerate(pairwise(self.bounds)):
            if lo < c <= hi:
                return float(self.per[j])
        return 0.0

    def segments(self) -> list[tuple[int, int, float]]:
        """(first culprit, last culprit, P(a regression, and there) of each) per segment."""
        return [(lo + 1, hi, float(q)) for (lo, hi), q in zip(pairwise(self.bounds), self.per,
                                                              strict=True)]

    def gain(self, p: int) -> float:
        """Bits one run at ``p`` is expected to tell about (H0 or the culprit)."""
        import numpy as np

        bad_side = np.array([hi <= p for hi in self.bounds[1:]], float)
        j = next((i for i, hi in enumerate(self.bounds[1:]) if self.bounds[i] < p < hi), None)
        share = bad_side * self.mass
        if j is not None:
            share[j] = (p - self.bounds[j]) * self.per[j]
        good_share = self.mass - share
        q = self.p0 * self.q0 + float(np.sum(share * self.q_bad + good_share * self.q_good))
        h0, hb, hg = self._entropies()
        noise = self.p0 * h0 + float(np.sum(share * hb + good_share * hg))
        return float(_h(q)) - noise

    def _entropies(self) -> tuple[float, Any, Any]:
        """The outcome entropies under "no regression" and each segment's two sides, once per
        posterior (:meth:`gain` is asked for every candidate position)."""
        if self._h is None:
            self._h = (float(_h(self.q0)), _h(self.q_bad), _h(self.q_good))
        return self._h

    def choose(self) -> int:
        """The position of most information (older on ties): the endpoints, each probed
        position, and the best inner point of each segment (the information is concave in
        how many of a segment's culprits lie at or before the probe, so the best point is
        where the predictive failure rate balances; its two integer neighbours are tried)."""
        import numpy as np

        n = self.n
        cands = {0, n - 1, *self.bounds}
        _, hb, hg = self._entropies()
        for j, (lo, hi) in enumerate(pairwise(self.bounds)):
            if hi - lo < 2:
                continue
            before = np.arange(len(self.mass)) < j
            a = self.p0 * self.q0 + float(np.sum(np.where(before, self.mass * self.q_bad,
                                                          self.mass * self.q_good)))
            # Q(m) = a + b m; noise(m) = c + d m, m culprits of segment j at or before p.
            b = float(self.per[j] * (self.q_bad[j] - self.q_good[j]))
            d = float(self.per[j] * (hb[j] - hg[j]))
            if abs(b) < 1e-300 or not math.isfinite(d / b):
                continue
            q_star = 1.0 / (1.0 + 2.0 ** (d / b))
            m = (q_star - a) / b
            for mm in (math.floor(m), math.ceil(m)):
                if 1 <= mm < hi - lo:
                    cands.add(lo + mm)
        return max(sorted(cands), key=self.gain)
