"""Is there a regression at all? "No regression" as an answer of a flaky oracle's search.

A flaky test fails now and then at every commit. Hand its range to a posterior search and it
still ends somewhere: measured, an oracle failing 40 % of the time everywhere, nothing changed,
named the bad endpoint itself as the culprit in 2 of 5 hunts. At Google about 40 % of the
failure ranges handed to culprit finding were flakes with no culprit at all. So the search
keeps the hypothesis "no regression" beside the culprits (:func:`regression_probability`).

A regression means the runs from some commit on fail more often than those before it by at
least :data:`~bisector.base.defaults.NOISY_MIN_CONTRAST` (25 points: 20 % -> 45 %, or 0 % ->
100 %); "no regression", one failure rate at every commit. The search names a culprit only
when a regression is at least as likely as the oracle's confidence, answers "no regression"
when it is at most one minus that, and otherwise runs the endpoints more.

This was first asked of the endpoints' runs alone (no search chose them, so nothing could be
selected). Every run counts now: the question is Bayesian, where the choice of the next probe
from earlier runs biases nothing, and the failures the search sees after its culprit say
"regression" long before the endpoints' runs could. Simulated (``make bench`` section 14),
a real regression at 40 % spurious failures over 1000 commits took 72 runs instead of 95
(confirmation included) and 300-hunt rows stayed at 99 % or more right. Pure but for numpy
and scipy (imported on first use).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from bisector.base import defaults


def mostly_fails(runs: Sequence[bool], confidence: float) -> bool:
    """Whether these runs (True: failed) fail more often than not, at ``confidence``: a flaky
    good endpoint failing 40 % of the time shows a failing majority now and then, and that is
    flakiness, not an endpoint that is already bad."""
    # lazy: only flaky oracles need scipy
    from scipy.stats import beta  # type: ignore[import-untyped]

    failed = sum(runs)
    return float(beta.sf(0.5, 1 + failed, 1 + len(runs) - failed)) >= confidence


def rate(runs: Sequence[bool]) -> float:
    """The share of runs that failed (0 with no runs), for the words of an answer."""
    return sum(runs) / len(runs) if runs else 0.0


def regression_probability(n: int, reports: Sequence[tuple[int, bool]], contrast: float,
                           prior: float = 0.5, broken: float | None = None) -> float:
    """P(a regression | every run), ``reports`` (position, failed) over positions ``0..n-1``.

    "No regression": one failure rate at every commit, uniform on [0, 1]. "Regression at
    ``c``" (each of the ``n - 1`` culprits a priori ``prior / (n - 1)``): the runs before
    ``c`` fail at ``r_good``, those from ``c`` on at ``r_bad``, uniform over
    ``r_bad - r_good >= contrast``. The likelihood of each culprit is a double integral over
    the two rates, on one grid; culprits between two probed positions share it.

    As in :mod:`bisector.core.integrated`, ``broken`` of the regression's prior (default
    :data:`~bisector.base.defaults.NOISY_BROKEN_FOR_GOOD`) is "broken for good": ``r_bad``
    is 1 and ``r_good`` uniform on ``[0, 1 - contrast]``. A regression that breaks a flaky
    test makes it fail every run from its culprit on, and with the uniform rate alone the runs
    the search makes after its culprit said "regression" a few times more slowly than they
    should: the endpoints then ran beside the search for a third of its runs (simulated)."""
    import numpy as np
    from scipy.special import betainc, betaln, xlog1py, xlogy  # type: ignore[import-untyped]

    broken = defaults.NOISY_BROKEN_FOR_GOOD if broken is None else broken

    at: dict[int, list[int]] = {}  # position -> [runs, failed]
    for p, bad in reports:
        cell = at.setdefault(p, [0, 0])
        cell[0] += 1
        cell[1] += int(bad)
    total_runs = sum(c[0] for c in at.values())
    total_bad = sum(c[1] for c in at.values())
    bounds = [0, *sorted(p for p in at if 0 < p < n - 1), n - 1]
    width, k_lo, n_lo = [], [], []  # culprits in each segment; failures and runs before it
    runs_before = bad_before = 0
    for lo, hi in pairwise(bounds):
        runs_lo, bad_lo = at.get(lo, [0, 0])
        runs_before += runs_lo
        bad_before += bad_lo
        width.append(hi - lo)
        k_lo.append(bad_before)
        n_lo.append(runs_before)
    k1, n1 = np.array(k_lo, float)[:, None], np.array(n_lo, float)[:, None]
    k2, n2 = total_bad - k1, total_runs - n1
    # On one grid the bad rate's tail is a reversed cumulative sum of its density, and
    # ``x + contrast`` falls on the grid, shifted: the incomplete beta function is a
    # hundred times slower, and this runs every round.
    steps = 800
    shift = round(contrast * steps)
    x = np.linspace(0.0, 1.0, steps + 1)[None, :]

    def density(k: Any, runs: Any) -> Any:  # Beta(1 + k, 1 + runs - k) on the grid
        return np.exp(xlogy(k, x) + xlog1py(runs - k, -x) - betaln(1 + k, 1 + runs - k))

    good, bad = density(k1, n1), density(k2, n2)
    halves = (bad[:, 1:] + bad[:, :-1]) / (2 * steps)
    tail = np.concatenate([np.cumsum(halves[:, ::-1], axis=1)[:, ::-1],
                           np.zeros((len(width), 1))], axis=1)  # P(r_bad >= x)
    beyond = np.concatenate([tail[:, shift:], np.zeros((len(width), shift))], axis=1)
    inner = np.trapezoid(good * beyond, x, axis=1)
    area = (1.0 - contrast) ** 2 / 2.0
    log_width = np.log(np.array(width, float))
    with np.errstate(divide="ignore"):
        log_seg = (betaln(1 + k1, 1 + n1 - k1) + betaln(1 + k2, 1 + n2 - k2))[:, 0] + \
            np.log(np.maximum(inner, 0.0)) - np.log(area) + log_width
        # Broken for good: only where every run from the segment on failed.
        a1, b1 = (1 + k1)[:, 0], (1 + n1 - k1)[:, 0]
        log_spike = np.where(
            (k2 == n2)[:, 0],
            betaln(a1, b1) + np.log(betainc(a1, b1, 1.0 - contrast)) - np.log(1.0 - contrast)
            + log_width, -np.inf)
        runs_end, bad_end = at.get(n - 1, [0, 0])
        if broken > 0 and bad_end == runs_end:
            log_seg = np.logaddexp(np.log1p(-broken) + log_seg, np.log(broken) + log_spike)
    top = float(np.max(log_seg))
    if not np.isfinite(top):
        return 0.0
    log_h1 = top + float(np.log(np.sum(np.exp(log_seg - top)))) - np.log(n - 1)
    log_h0 = float(betaln(1 + total_bad, 1 + total_runs - total_bad))
    odds = float(np.log(prior) - np.log1p(-prior) + log_h1 - log_h0)
    return float(1.0 / (1.0 + np.exp(-odds))) if odds > -700 else 0.0
