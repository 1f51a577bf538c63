"""One posterior over a performance change point (core/perf_posterior.py) and the search it
drives (core/perf_search.py: ``search``, ``placed_step``)."""

from __future__ import annotations

import math
import random

import pytest

from bisector.core import perf, perf_posterior
from bisector.core import perf_search as strategy
from bisector.core.perf_posterior import posterior, probes, settled
from bisector.core.search import Culprit, Next, Window

pytestmark = pytest.mark.unit

MARGIN = math.log1p(0.2)  # a 20 % threshold
STEP = math.log1p(0.5)  # a +50 % step
SD = 0.02


def anywhere(_: int) -> bool:
    return True


def step_pairs(n: int, culprit: int, at: list[int], rng: random.Random,
               k: int = 1) -> dict[int, list[float]]:
    return {p: [(STEP if p >= culprit else 0.0) + rng.gauss(0, SD) for _ in range(k)]
            for p in at}


def test_the_first_run_goes_to_the_middle_and_a_clear_step_is_placed_by_one_pair_each() -> None:
    n, culprit, rng = 41, 23, random.Random(1)
    pairs = step_pairs(n, culprit, [n - 1], rng, k=2)
    post = posterior(n, pairs, SD, 20, MARGIN)
    assert probes(post, anywhere) == (20,)  # the median of a uniform prior
    steps = 0
    while not settled(post, anywhere):
        (p,) = probes(post, anywhere)
        pairs.setdefault(p, []).extend(step_pairs(n, culprit, [p], rng)[p])
        post = posterior(n, pairs, SD, 20, MARGIN)
        steps += 1
    assert steps <= 7  # ceil(log2 40) = 6, one more at most
    i, mass = post.top()
    assert post.cuts[i + 1] == culprit and post.cuts[i] == culprit - 1
    assert mass >= 1 - perf_posterior.EPSILON
    assert strategy.placed_step(post, set()) == Culprit(culprit)


def test_a_commit_near_the_threshold_is_told_by_which_level_it_sits_near() -> None:
    """10 % against a 5 % threshold: one pair at 0 and one at the bad level, 2 % noise. A
    verdict against the threshold would be undecided (each 2.5 sd from it); the two levels
    are 5 sd apart, so the posterior already leans clearly."""
    n, margin, step = 5, math.log1p(0.05), math.log1p(0.10)
    pairs = {1: [0.0], 2: [step], 4: [step, step]}
    post = posterior(n, pairs, SD, 20, margin)
    assert post.upto(1) < 0.05 and post.upto(2) > 0.95


def test_few_degrees_of_freedom_weigh_each_pair_less() -> None:
    n = 5
    pairs = {1: [0.0], 2: [0.6 * STEP], 4: [STEP]}
    sure = posterior(n, pairs, SD * 3, 200, MARGIN)
    unsure = posterior(n, pairs, SD * 3, 1, MARGIN)
    assert unsure.top()[1] < sure.top()[1]


def test_a_skipped_commit_leaves_a_window_never_a_guess() -> None:
    n, rng = 9, random.Random(3)
    pairs = step_pairs(n, 5, [3, 5, 8], rng, k=4)  # 4 was skipped: it cannot be run
    post = posterior(n, pairs, SD, 20, MARGIN)
    able = lambda p: p != 4  # noqa: E731
    assert post.upto(3) < 1e-6 and post.upto(5) > 1 - 1e-6
    assert settled(post, able) and probes(post, able) == ()
    assert strategy.placed_step(post, {4}) == Window(4, 5)


def test_the_prior_moves_the_first_run() -> None:
    n = 101
    pairs = {n - 1: [STEP, STEP]}
    early = posterior(n, pairs, SD, 20, MARGIN, lambda p: min(1.0, max(p, 0) / 20))
    (p,) = probes(early, anywhere)
    assert p == 10  # the median of a prior on the first 20 commits


def test_a_range_of_thousands_of_commits_is_not_walked_commit_by_commit() -> None:
    n, culprit, rng = 20_000, 12_345, random.Random(5)
    pairs = step_pairs(n, culprit, [n - 1], rng, k=2)
    looked = []
    for _ in range(30):
        post = posterior(n, pairs, SD, 20, MARGIN)
        if settled(post, anywhere):
            break
        looked.append(len(perf_posterior._candidates(post)))
        (p,) = probes(post, anywhere)
        pairs.setdefault(p, []).extend(step_pairs(n, culprit, [p], rng)[p])
    assert strategy.placed_step(post, set()) == Culprit(culprit)
    # each step weighs a few dozen commits (measured ones, the splits of each place, every
    # commit of a place of 64 or fewer), never the 20,000 of the range
    assert max(looked) <= 200, looked


def run(level: float, start: float) -> strategy.Run:
    return strategy.Run(tuple(level * (1 + 0.004 * j) for j in range(5)), "ms",
                        perf.Direction.LOWER, True, start)


def test_the_search_runs_the_endpoints_then_lets_the_posterior_choose() -> None:
    """Driven as Performance.decide drives it: the reference and the bad endpoint first (the
    endpoint decided bad by its own test), then the posterior's median, one commit a round."""
    from bisector.core import paired

    n, culprit = 17, 9
    runs: dict[int, list[strategy.Run]] = {}
    t = 0.0
    last = None
    for rounds in range(1, 60):
        got = strategy.search(runs, n, 1, 32, paired.Rule(perf.Direction.LOWER, 0.2), False,
                              lambda _: None)
        if not isinstance(got.step, Next):
            break
        if runs.get(n - 1) and got.after is not None:
            assert len(got.step.positions) == 1  # the posterior's one pick a round
        for p in strategy.layout(list(got.step.positions), last, 1, rounds):
            t += 1
            noise = 1 + 0.01 * math.sin(7 * t)
            runs.setdefault(p, []).append(run(10.0 * (1.5 if p >= culprit else 1.0) * noise, t))
            last = p
    assert got.step == Culprit(culprit)
    assert got.after is not None and got.after(culprit - 1) < 0.01 < 0.99 < got.after(culprit)
    probed = [p for p in runs if 0 < p < n - 1]
    assert len(probed) <= 6  # about log2(16) commits, not every commit
