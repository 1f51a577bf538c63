"""A flaky oracle's endpoints in words and votes: failure rates, and a failing majority.

A flaky test fails now and then at every commit: measured, an oracle failing 40 % of the time
everywhere, nothing changed, named the bad endpoint itself as the culprit in 2 of 5 hunts of a
posterior search. Whether there is a regression at all is weighed by
:mod:`bisector.core.joint` (a regression: the runs from some commit on failing at least
:data:`~bisector.base.defaults.NOISY_MIN_CONTRAST` more often; "no regression": one rate
everywhere). What stays here is what the answer's words and the good endpoint's vote need.
Pure but for scipy (imported on first use).
"""

from __future__ import annotations

from collections.abc import Sequence


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
