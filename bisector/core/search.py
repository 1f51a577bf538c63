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

import bisect
import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from bisector.base.kinds import Verdict as Verdict  # the search's three values, re-exported


class Prior(Protocol):
    """What the search asks of a prior (:class:`bisector.core.prior.Prior`; named by its
    shape here because the prior reads tracebacks through modules that import this one)."""

    def mass_upto(self, p: int) -> float: ...

    def first_at_least(self, lo: int, hi: int, t: float) -> int: ...


@dataclass(frozen=True)
class Next:
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


Step = Next | Culprit | Window | Stop


# Above ruff's limits on purpose: the search's rule in one place, proved by the property tests.
def next_step(  # noqa: C901
    n: int,
    verdicts: Mapping[int, Verdict],
    width: int = 1,
    cost: Callable[[int], int] | None = None,
    prior: Prior | None = None,
) -> Step:
    """Decide what to do next.

    ``width`` is how many probes may run at once (free workers). With ``width > 1`` the window is
    cut into ``width + 1`` parts (multisection), so a round shrinks it by that factor.

    ``cost(position)`` ranks how expensive a probe is (0 = already built ... a source build);
    with it, a single probe is the cheapest commit of the *budget window* (see
    :func:`budget_window`), so cost-awareness never adds an oracle run in the worst case.

    ``prior`` (:mod:`bisector.core.prior`): split the window's probability mass instead of its
    commits (its median; K quantiles with ``width`` K), inside the probe budget of
    :func:`prior_picks`. None: exactly the plain search.
    """
    if n < 2:
        raise ValueError("a bisection needs at least the good and the bad endpoint")
    if width < 1:
        raise ValueError("width must be at least 1")

    # Endpoints first: a wrong endpoint makes every later probe wasted GPU time.
    missing = tuple(p for p in (0, n - 1) if p not in verdicts)
    if missing:
        return Next(missing)
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

    if prior is not None:
        weighted = prior_picks(n, verdicts, lo, hi, untested, width, prior, cost)
        if weighted is not None:
            return Next(weighted)
    if cost is not None and width == 1:
        return Next((_cheapest(untested, lo + (hi - lo) / 2, cost),))
    picks: list[int] = []
    for k in range(1, width + 1):
        ideal = lo + (hi - lo) * k / (width + 1)
        choice = _nearest(untested, ideal, exclude=picks)
        if choice is not None:
            picks.append(choice)
    return Next(tuple(sorted(picks)))


def rounds_budget(n: int, width: int = 1) -> int:
    """Rounds between the endpoints' and the answer that a prior may use:
    ``ceil(log_(K+1) n)``; with K = 1, ``ceil(log2 n)``, so a search with a prior never makes
    more than ``ceil(log2 n) + 2`` probes (the endpoints included), whatever the prior says."""
    rounds, reach = 0, 1
    while reach < n:
        reach *= width + 1
        rounds += 1
    return rounds


def prior_picks(n: int, verdicts: Mapping[int, Verdict], lo: int, hi: int, untested: list[int],
                width: int, prior: Prior,
                cost: Callable[[int], int] | None = None) -> tuple[int, ...] | None:
    """The split points of the prior's mass that keep the probe budget; None: use the plain
    search (no budget left to spend, or too few untested commits to choose among).

    The budget. With ``r`` rounds left, ``K`` probes a round and ``u`` untested commits in the
    window, a round whose K picks cut the untested into K + 1 parts of at most
    ``(K+1)**(r-1) - 1`` each leaves every part solvable in the ``r - 1`` rounds after it
    (by induction: a window of ``(K+1)**r - 1`` untested is exactly solvable in ``r``). Each
    pick is the commit at the prior's ``j / (K+1)`` quantile of the window's mass (the nearer
    of the two around it), moved into the interval that keeps that bound for its part and
    leaves room for the parts after it. ``r`` is :func:`rounds_budget` less the rounds spent,
    counted from the verdicts between the endpoints (``ceil(verdicts / K)``), so the search
    stays a function of its verdicts. When the evidence was right the culprit's part is
    smaller than the bound and the rounds saved widen later choices; when it was wrong the
    search has spent only slack. Mixing with the uniform prior alone could not promise this:
    with half the mass uniform, a median split may still leave all but one commit.

    Verdicts reused from other bisections count as spent, and skips shrink nothing: when that
    leaves the window larger than the budget allows, the plain search takes over (its own
    bound).
    """
    u, k = len(untested), width
    if u <= k:
        return None
    spent = sum(1 for p in verdicts if 0 < p < n - 1)
    left = rounds_budget(n, k) - math.ceil(spent / k)
    if left < 1 or u > (k + 1) ** left - 1:
        return None
    cap = (k + 1) ** (left - 1) - 1
    base, top = prior.mass_upto(lo), prior.mass_upto(hi)
    if top - base <= 0:
        return None

    def share(p: int) -> float:
        return (prior.mass_upto(p) - base) / (top - base)

    picks: list[int] = []
    prev = -1
    for j in range(1, k + 1):
        t = j / (k + 1)
        ideal = min(max(prior.first_at_least(lo, hi, t), lo + 1), hi - 1)
        i = bisect.bisect_left(untested, ideal)
        near = [x for x in (i - 1, i) if 0 <= x < u]
        idx = min(near, key=lambda x: (abs(share(untested[x]) - t), x))
        low = max(prev + 1, u - (k - j + 1) * (cap + 1))
        high = min(prev + cap + 1, u - 1 - (k - j))
        if low > high:
            return None
        idx = min(high, max(low, idx))
        if k == 1 and cost is not None:
            idx = _cheapest_share(untested, low, high, idx, share, cost)
        picks.append(idx)
        prev = idx
    return tuple(untested[x] for x in picks)


def _cheapest_share(untested: list[int], low: int, high: int, idx: int,
                    share: Callable[[int], float], cost: Callable[[int], int]) -> int:
    """With a prior and costs: the cheapest admissible commit whose share of the mass is
    within a quarter of the median's (or as far as the chosen one), nearest in mass first;
    the budget interval keeps the bound whatever is picked."""
    reach = max(0.25, abs(share(untested[idx]) - 0.5))
    zone = [x for x in range(low, high + 1) if abs(share(untested[x]) - 0.5) <= reach]
    best: tuple[int, float, int] | None = None
    for x in sorted(zone, key=lambda y: (abs(share(untested[y]) - 0.5), y)):
        key = (cost(untested[x]), abs(share(untested[x]) - 0.5), x)
        if best is None or key < best:
            best = key
        if key[0] <= 0:
            break
    return best[2] if best is not None else idx


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


def budget_window(untested: list[int]) -> list[int]:
    """The split points that keep the worst case at ``ceil(log2(u + 1))`` further probes.

    With ``u`` untested commits a plain bisection needs ``D = ceil(log2(u + 1))`` more oracle
    runs. Probing the commit with ``left`` untested commits below it and ``right`` above leaves
    ``max(ceil(log2(left + 1)), ceil(log2(right + 1)))`` runs, so any split with both sides at
    most ``2**(D-1) - 1`` costs no extra run. That is the window inside which a cheaper commit
    may replace the exact middle: wide when ``u`` is just past a power of two, one commit when
    ``u + 1`` is one. Every step lowers the worst case by one, so the total stays within
    :func:`max_probes` whatever the costs are.
    """
    u = len(untested)
    limit = (1 << (max(u, 1).bit_length() - 1)) - 1 if u else 0
    # bit_length gives D with 2**(D-1) <= u < 2**D, i.e. D = ceil(log2(u + 1)).
    return [p for i, p in enumerate(untested) if i <= limit and u - 1 - i <= limit]


def _cheapest(untested: list[int], ideal: float, cost: Callable[[int], int]) -> int:
    """Lowest cost in the budget window; nearest the ideal among equals; older on a tie.

    Costs are asked in order of distance from the ideal and the scan stops at a zero cost,
    because a cost may be a git query and the window can hold thousands of commits.
    """
    window = budget_window(untested)
    best: tuple[int, float, int] | None = None
    for p in sorted(window, key=lambda q: (abs(q - ideal), q)):
        key = (cost(p), abs(p - ideal), p)
        if best is None or key < best:
            best = key
        if key[0] <= 0:
            break
    assert best is not None
    return best[2]


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
