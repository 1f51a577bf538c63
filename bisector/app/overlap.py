"""What the prefetch (run/prefetch.py) takes off a plan's projected wall time.

``bisect plan`` projects a run probe after probe, each paying its obtaining and its oracle runs
(:func:`bisector.app.plan.simulate`). With the prefetch, a probe's obtaining starts when the
round before it starts, so it runs under that round's own obtaining and oracle: what is left
to wait is what does not fit under them. A download, an overlay or a stored wheel is always
made ahead; a source build only on a spare build slot (``--build-jobs`` beyond ``--jobs``) and
when it pays (:func:`bisector.run.prefetch.pays`, the same rule a run uses: with one GPU each
of the two candidates has a chance of one half). The walk is the plan's own
(:func:`bisector.app.plan.walk`), over the same culprits, with the same prices.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from statistics import mean

from bisector.base.kinds import Way
from bisector.run.prefetch import pays

Walk = Callable[[int], list[tuple[int, Way]]]  # culprit -> [(position, way)] in probe order


def hidden_seconds(walk: Walk, culprits: list[int], costs: Mapping[str, float],
                   oracle_runs: int, spare_builds: int, width: int = 1) -> float:
    """Mean seconds of obtaining made under the probe before (one probe at a time; with K at
    once the chance of each candidate is 1/(K+1) of a round, and rounds overlap the same)."""
    if not culprits:
        return 0.0
    chance = 1.0 / (width + 1)
    saved = []
    for culprit in culprits:
        total, cover = 0.0, 0.0
        for i, (_, kind) in enumerate(walk(culprit)):
            cost = costs.get(kind, 0.0)
            ahead = i > 0 and pays(1.0 if i == 1 else chance, kind, spare_builds)
            hidden = min(cost, cover) if ahead else 0.0
            total += hidden
            # What the next probe's obtaining can hide under: this one's wait and its runs.
            cover = (cost - hidden) + (oracle_runs * costs["oracle"] if kind is not Way.BROKEN
                                       else 0.0)
        saved.append(total)
    return mean(saved)


def with_prefetch(seconds_mean: float, walk: Walk, culprits: list[int],
                  costs: Mapping[str, float], oracle_runs: int, spare_builds: int,
                  width: int = 1) -> float:
    """The projected mean wall time with the prefetch on."""
    return max(0.0, seconds_mean - hidden_seconds(walk, culprits, costs, oracle_runs,
                                                  spare_builds, width))
