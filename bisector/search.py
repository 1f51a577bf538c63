"""The pure search core: (number of candidates, verdicts so far) -> next step.

No git, no I/O, no clock. Candidates are positions ``0..n-1`` oldest to newest, where position 0
is the good endpoint and ``n-1`` the bad endpoint. The caller runs the probes this module asks
for, records verdicts, and calls again; the same inputs always give the same step, which is what
makes ``bisect resume`` reach the same answer as an uninterrupted run.

Skips are handled the way ``git bisect`` handles them: never probe a skipped commit again, step
to the nearest untested commit around the ideal split point, and when only skipped commits stand
between the last good and the first bad, answer with the window of suspects instead of guessing.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass


class Verdict(enum.Enum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


@dataclass(frozen=True)
class Probe:
    """Run the oracle at these positions next (several when more workers are free)."""

    positions: tuple[int, ...]


@dataclass(frozen=True)
class Culprit:
    """``position`` is the first bad commit: its parent in the candidate list is good."""

    position: int


@dataclass(frozen=True)
class Window:
    """The first bad commit is one of ``first..last`` (inclusive); skips hide which one."""

    first: int
    last: int


class Problem(enum.Enum):
    GOOD_IS_BAD = "good_is_bad"
    BAD_IS_GOOD = "bad_is_good"
    GOOD_UNTESTABLE = "good_untestable"
    BAD_UNTESTABLE = "bad_untestable"
    NOT_MONOTONIC = "not_monotonic"


@dataclass(frozen=True)
class Stop:
    """The search cannot go on; ``position`` names the commit that shows why."""

    problem: Problem
    position: int


Step = Probe | Culprit | Window | Stop


def next_step(n: int, verdicts: Mapping[int, Verdict], width: int = 1) -> Step:
    """Decide what to do next.

    ``width`` is how many probes may run at once (free workers). With ``width > 1`` the window is
    cut into ``width + 1`` parts (multisection), so a round shrinks it by that factor.
    """
    if n < 2:
        raise ValueError("a bisection needs at least the good and the bad endpoint")
    if width < 1:
        raise ValueError("width must be at least 1")

    # Endpoints first: a wrong endpoint makes every later probe wasted GPU time.
    missing = tuple(p for p in (0, n - 1) if p not in verdicts)
    if missing:
        return Probe(missing)
    first, last = verdicts[0], verdicts[n - 1]
    if first is Verdict.BAD:
        return Stop(Problem.GOOD_IS_BAD, 0)
    if last is Verdict.GOOD:
        return Stop(Problem.BAD_IS_GOOD, n - 1)
    if first is Verdict.SKIP:
        return Stop(Problem.GOOD_UNTESTABLE, 0)
    if last is Verdict.SKIP:
        return Stop(Problem.BAD_UNTESTABLE, n - 1)

    lo = max(p for p, v in verdicts.items() if v is Verdict.GOOD)
    hi = min(p for p, v in verdicts.items() if v is Verdict.BAD)
    if hi < lo:
        # A bad commit older than a good one: the oracle is flaky or the bug comes and goes.
        return Stop(Problem.NOT_MONOTONIC, hi)

    untested = [p for p in range(lo + 1, hi) if p not in verdicts]
    if not untested:
        if hi == lo + 1:
            return Culprit(hi)
        return Window(lo + 1, hi)

    picks: list[int] = []
    for k in range(1, width + 1):
        ideal = lo + (hi - lo) * k / (width + 1)
        choice = _nearest(untested, ideal, exclude=picks)
        if choice is not None:
            picks.append(choice)
    return Probe(tuple(sorted(picks)))


def _nearest(untested: list[int], ideal: float, exclude: list[int]) -> int | None:
    """The untested position closest to ``ideal``; ties go to the older commit (as git)."""
    best: int | None = None
    best_d = math.inf
    for p in untested:
        if p in exclude:
            continue
        d = abs(p - ideal)
        if d < best_d:
            best, best_d = p, d
    return best


def max_probes(n: int) -> int:
    """Upper bound on oracle runs without skips: both endpoints plus a binary search."""
    return 2 + math.ceil(math.log2(max(n - 1, 1)))


def remaining_estimate(n: int, verdicts: Mapping[int, Verdict]) -> int:
    """How many more probes a skip-free search needs at most, for progress display."""
    goods = [p for p, v in verdicts.items() if v is Verdict.GOOD]
    bads = [p for p, v in verdicts.items() if v is Verdict.BAD]
    lo = max(goods) if goods else 0
    hi = min(bads) if bads else n - 1
    base = sum(1 for p in (0, n - 1) if p not in verdicts)
    untested = sum(1 for p in range(lo + 1, hi) if p not in verdicts)
    return base + (math.ceil(math.log2(untested + 1)) if untested else 0)
