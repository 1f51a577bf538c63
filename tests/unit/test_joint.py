"""The joint posterior over "no regression" and every culprit (core/joint.py): a distribution,
an information gain that is the mutual information it claims, and safe at the edges."""

from __future__ import annotations

import math
import random

import pytest

from bisector.core.joint import Joint

pytestmark = pytest.mark.unit


def _cases() -> list[tuple[int, list[tuple[int, bool]]]]:
    rng = random.Random(3)
    out: list[tuple[int, list[tuple[int, bool]]]] = [(2, []), (3, [(0, False)]), (7, [])]
    for n in (3, 7, 30):
        for _ in range(4):
            culprit = rng.randrange(1, n)
            out.append((n, [(p, (p >= culprit) != (rng.random() < 0.2))
                            for p in (rng.randrange(n) for _ in range(rng.randrange(1, 25)))]))
    return out


@pytest.mark.parametrize("case", _cases())
def test_the_hypotheses_make_one_distribution(case: tuple[int, list[tuple[int, bool]]]) -> None:
    n, runs = case
    j = Joint(n, runs)
    total = j.p0 + sum(j.prob(c) for c in range(1, n))
    assert math.isclose(total, 1.0, rel_tol=1e-9)
    assert j.prob(0) == 0.0 and j.prob(n) == 0.0  # no culprit outside 1..n-1
    assert sum(q * (last - first + 1) for first, last, q in j.segments()) == pytest.approx(
        j.regression)


def _entropy(ps: list[float]) -> float:
    return -sum(p * math.log2(p) for p in ps if p > 0)


@pytest.mark.parametrize("case", _cases())
def test_gain_is_the_mutual_information_of_one_run(
        case: tuple[int, list[tuple[int, bool]]]) -> None:
    """Brute force: the expected fall in the hypothesis' entropy over both outcomes."""
    n, runs = case
    j = Joint(n, runs)
    prior = [j.p0, *(j.prob(c) for c in range(1, n))]
    for p in range(n):
        fail = Joint(n, [*runs, (p, True)])
        passed = Joint(n, [*runs, (p, False)])
        q = j.p0 * j.q0 + sum(
            j.prob(c) * (j.q_bad if c <= p else j.q_good)[_segment(j, c)] for c in range(1, n))
        after = q * _entropy([fail.p0, *(fail.prob(c) for c in range(1, n))]) + (1 - q) * \
            _entropy([passed.p0, *(passed.prob(c) for c in range(1, n))])
        assert j.gain(p) == pytest.approx(_entropy(prior) - after, abs=1e-6)


def _segment(j: Joint, c: int) -> int:
    return next(i for i, (first, last, _) in enumerate(j.segments()) if first <= c <= last)


def test_the_chosen_run_is_the_most_informative_position() -> None:
    j = Joint(50, [(0, False), (49, True), (25, True), (12, False)])
    best = j.choose()
    assert j.gain(best) == pytest.approx(max(j.gain(p) for p in range(50)), rel=1e-9)
    assert 12 < best <= 25  # between the last pass and the first failure


def test_strong_reversed_evidence_gives_no_nan() -> None:
    """Four hundred failures at good and passes at bad: every culprit's likelihood underflows.
    The search must still choose a position and say a regression is unlikely."""
    j = Joint(10, [(0, True)] * 400 + [(9, False)] * 400)
    assert 0 <= j.choose() < 10 and not math.isnan(j.gain(5))
    assert j.regression < 0.01


def test_a_flake_only_range_is_no_regression_and_a_clean_split_a_culprit() -> None:
    rng = random.Random(1)
    flakes = [(p, rng.random() < 0.3) for p in (0, 99) * 60]
    assert Joint(100, flakes).p0 > 0.99
    # Eight passes beside eight failures: sure of the culprit. Four each are not enough: a
    # rate near one half everywhere explains them too (no regression: 0.14).
    clean = [(0, False), (99, True), *[(40, False)] * 8, *[(41, True)] * 8]
    best, probability = Joint(100, clean).best()
    assert best == 41 and probability > 0.99
    few = Joint(100, [(0, False), (99, True), *[(40, False)] * 4, *[(41, True)] * 4])
    assert few.best()[0] == 41 and 0.05 < few.p0 < 0.5
