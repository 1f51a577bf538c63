"""How many runs an oracle that is not right every time gets: one place for the run and the plan.

A deterministic oracle runs once per probe. A flaky one (``flaky = true`` or error rates) runs
its endpoints several times, then until a posterior is sure, under a cap of runs; a performance
one (``threshold``) runs a baseline, then each commit 1-2-4-8 times up to ``max-runs``. The
search strategies (:mod:`bisector.run.strategies`) run exactly these numbers and ``bisect plan``
prices exactly these numbers, so both read them here and nowhere else.

Pure: the oracle's metadata comes in through :class:`Traits`, the fields this needs of it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from bisector.base import defaults
from bisector.core import noisy, paired

# The error rate a flaky oracle is priced at when its metadata gives none (the search estimates
# it from the endpoints' runs, which the plan cannot see before they happen).
ASSUMED_RATE = 0.1


class Traits(Protocol):
    """What sampling needs of an oracle's metadata (:class:`bisector.oracle.script.OracleMeta`)."""

    @property
    def performance(self) -> bool: ...
    @property
    def noisy(self) -> bool: ...
    @property
    def repeats(self) -> int: ...
    @property
    def max_runs(self) -> int | None: ...
    @property
    def confidence(self) -> float: ...
    @property
    def false_positive(self) -> float | None: ...
    @property
    def false_negative(self) -> float | None: ...


class Kind(enum.Enum):
    """Which search an oracle gets."""

    PLAIN = "plain"
    FLAKY = "flaky"
    PERFORMANCE = "performance"


def kind_of(meta: Traits) -> Kind:
    if meta.performance:
        return Kind.PERFORMANCE
    return Kind.FLAKY if meta.noisy else Kind.PLAIN


def endpoint_runs(meta: Traits) -> int:
    """A flaky oracle's runs of each endpoint: its ``repeats``, else the default."""
    return meta.repeats if meta.repeats > 1 else defaults.NOISY_ENDPOINT_RUNS


def confirm_runs(meta: Traits) -> int:
    """Fresh runs of each commit confirmation re-runs: once for a deterministic oracle; a flaky
    one gets as many as each endpoint (evidence for the posterior), a performance one enough
    samples for the rank test."""
    if meta.performance:
        return defaults.CONFIRM_PERF_RUNS
    return endpoint_runs(meta) if meta.noisy else 1


def perf_max_runs(max_runs: int | None) -> int:
    """A performance oracle's cap of paired runs per commit (its ``max-runs``, else the
    default), never under two (a commit's second pair is its first measure of its own spread)."""
    return max(max_runs or paired.DEFAULT_MAX_PAIRS, 2)


def flaky_max_runs(max_runs: int | None, n: int, fp: float, fn: float,
                   confidence: float) -> int:
    """A flaky oracle's cap of runs for the whole search over ``n`` candidates at these rates
    (its ``max-runs``, else what the rates and confidence call for)."""
    return max_runs or noisy.default_max_runs(n, fp, fn, confidence)


@dataclass(frozen=True)
class Sampling:
    """What an oracle that is not right every time costs beyond one run per probe: the kind of
    search, its rates, caps and endpoint runs, and the runs confirmation pays per re-run commit
    (0: ``--no-confirm``)."""

    kind: Kind = Kind.PLAIN
    fp: float = ASSUMED_RATE
    fn: float = ASSUMED_RATE
    confidence: float = noisy.DEFAULT_CONFIDENCE
    max_runs: int | None = None  # flaky: all runs of the search; performance: runs per commit
    endpoint_runs: int = 1  # flaky: runs of each endpoint; performance: the baseline's runs
    confirm_runs: int = 0


PLAIN = Sampling()


def sampling_for(meta: Traits, confirm: bool) -> Sampling:
    """The :class:`Sampling` a run of this oracle would do (rates not given are priced at
    :data:`ASSUMED_RATE`)."""
    runs = confirm_runs(meta) if confirm else 0
    kind = kind_of(meta)
    if kind is Kind.PERFORMANCE:
        return Sampling(kind, max_runs=meta.max_runs, endpoint_runs=defaults.PERF_BASELINE_RUNS,
                        confirm_runs=runs)
    if kind is Kind.FLAKY:
        fp = meta.false_positive if meta.false_positive is not None else ASSUMED_RATE
        fn = meta.false_negative if meta.false_negative is not None else ASSUMED_RATE
        return Sampling(kind, fp=max(fp, noisy.RATE_MIN), fn=max(fn, noisy.RATE_MIN),
                        confidence=meta.confidence, max_runs=meta.max_runs,
                        endpoint_runs=endpoint_runs(meta), confirm_runs=runs)
    return Sampling(confirm_runs=runs)
