"""The search strategies the runner's loop asks for its next round: plain, noisy, performance."""

from __future__ import annotations

from bisector.core.sampling import Kind, kind_of
from bisector.run.strategies.base import Strategy, View
from bisector.run.strategies.noisy import Noisy
from bisector.run.strategies.perf import Performance
from bisector.run.strategies.plain import Plain


def strategy_for(view: View) -> Strategy:
    """The search the oracle's metadata calls for (:func:`bisector.core.sampling.kind_of`)."""
    kind = kind_of(view.meta)
    if kind is Kind.PERFORMANCE:
        return Performance(view)
    if kind is Kind.FLAKY:
        return Noisy(view)
    return Plain(view)
