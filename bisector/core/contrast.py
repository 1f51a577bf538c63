"""Is there a regression at all? A flaky oracle's endpoints compared, before any culprit.

A flaky test fails now and then at every commit. Hand its range to a posterior search and it
still ends somewhere: measured, an oracle failing 40 % of the time everywhere, nothing changed,
named the bad endpoint itself as the culprit in 2 of 5 hunts. At Google about 40 % of the
failure ranges handed to culprit finding were flakes with no culprit at all. So the search
keeps the hypothesis "no regression" beside the culprits, and it is decided where it is
measured without selection: at the endpoints, whose runs no search chose.

A regression means the bad endpoint fails more often than the good one by at least
:data:`~bisector.base.defaults.NOISY_MIN_CONTRAST` (25 points: 20 % -> 45 %, or 0 % -> 100 %).
With uniform Beta priors on the two failure rates, :func:`regression_probability` is the
posterior probability of that. The search names a culprit only when it is at least the
oracle's confidence, answers "no regression" when it is at most one minus that, and otherwise
runs the endpoints more. Pure but for scipy (imported on first use).
"""

from __future__ import annotations

from collections.abc import Sequence

GRID = 2001  # points of the numerical integral: a rate to 0.0005, far under what runs resolve


def regression_probability(good: Sequence[bool], bad: Sequence[bool],
                           contrast: float) -> float:
    """P(r_bad - r_good >= contrast | runs), ``good``/``bad`` the endpoints' runs (True: the
    run failed), each rate under a uniform prior: an integral over the good endpoint's rate of
    its density times the bad endpoint's chance to exceed it by ``contrast``."""
    # lazy: only flaky oracles need numpy and scipy
    import numpy as np
    from scipy.stats import beta  # type: ignore[import-untyped]

    g_bad, b_bad = sum(good), sum(bad)
    x = np.linspace(0.0, 1.0, GRID)
    density = beta.pdf(x, 1 + g_bad, 1 + len(good) - g_bad)
    reach = x + contrast
    beyond = np.where(reach <= 1.0,
                      beta.sf(np.minimum(reach, 1.0), 1 + b_bad, 1 + len(bad) - b_bad), 0.0)
    p = float(np.trapezoid(density * beyond, x))
    return min(1.0, max(0.0, p))


def mostly_fails(runs: Sequence[bool], confidence: float) -> bool:
    """Whether these runs (True: failed) fail more often than not, at ``confidence``: a flaky
    good endpoint failing 40 % of the time shows a failing majority now and then, and that is
    flakiness, not an endpoint that is already bad."""
    # lazy: only flaky oracles need scipy
    from scipy.stats import beta

    failed = sum(runs)
    return float(beta.sf(0.5, 1 + failed, 1 + len(runs) - failed)) >= confidence


def rate(runs: Sequence[bool]) -> float:
    """The share of runs that failed (0 with no runs), for the words of an answer."""
    return sum(runs) / len(runs) if runs else 0.0
