"""Which commits the next round may probe, before this round's verdicts are in.

A deterministic search is a function of its verdicts (:func:`bisector.core.search.next_step`),
so the round after one of K probes is one of K + 1 rounds: the first bad commit lies between
two neighbouring probes of this round (or before the first, or past the last), and each case
gives the verdicts the round would end with. Asking the search what it would do in each case
names every commit the next round can probe, each with the probability it is needed: the chance
of its case (the culprit's mass in that gap, by the prior when there is one, else by counting
commits). That is what the prefetch (``run/prefetch.py``) prepares while the oracles run: with
one GPU the two midpoints of the two halves, with K GPUs K (K + 1) commits, most likely first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from bisector.core.prior import Prior
from bisector.core.search import Next, Verdict, next_step


def next_rounds(n: int, verdicts: Mapping[int, Verdict], positions: Sequence[int],
                width: int = 1, cost: Callable[[int], int] | None = None,
                prior: Prior | None = None) -> list[tuple[int, float]]:
    """(position, probability it is probed next) for every commit a round after the round of
    ``positions`` may probe, most likely first; commits already judged and those of the round
    itself are left out. Empty when every outcome ends the search."""
    mine = sorted(p for p in set(positions) if 0 <= p < n and p not in verdicts)
    if not mine:
        return []
    goods = [p for p, v in verdicts.items() if v is Verdict.GOOD]
    bads = [p for p, v in verdicts.items() if v is Verdict.BAD]
    lo, hi = max(goods, default=-1), min(bads, default=n)
    bounds = [lo, *[p for p in mine if lo < p < hi], hi]
    mass = prior.mass_upto if prior is not None else float
    chances: dict[int, float] = {}
    total = 0.0
    for i in range(len(bounds) - 1):
        # The first bad commit in (bounds[i], bounds[i + 1]]: this round's probes up to
        # bounds[i] came out good, the rest bad.
        weight = max(0.0, mass(min(bounds[i + 1], n - 1)) - mass(max(bounds[i], 0)))
        if weight <= 0 and prior is None:
            weight = 1e-9  # an endpoint's outcome: possible, never likely
        total += weight
        then = {**verdicts, **{p: Verdict.GOOD if p <= bounds[i] else Verdict.BAD
                               for p in mine}}
        step = next_step(n, then, width=width, cost=cost, prior=prior)
        if isinstance(step, Next):
            for p in step.positions:
                if p not in then:
                    chances[p] = chances.get(p, 0.0) + weight
    return sorted(((p, w / total) for p, w in chances.items()), key=lambda x: (-x[1], x[0]))
