"""Is there a regression at all (core/joint.py), a flaky endpoint's vote (core/contrast.py),
and the culprit's probability with the rates integrated out (core/integrated.py)."""

from __future__ import annotations

import random

import pytest

from bisector.core import contrast
from bisector.core.integrated import Integrated
from bisector.core.joint import Joint

pytestmark = pytest.mark.unit


def test_a_clear_rise_is_a_regression_and_equal_rates_are_not() -> None:
    ends = [(0, False)] * 10 + [(99, True)] * 10
    assert Joint(100, ends).regression > 0.99
    rng = random.Random(1)
    same = [(p, rng.random() < 0.4) for p in (0, 99) for _ in range(60)]
    assert Joint(100, same).regression < 0.01
    # Three runs each say little either way.
    few = [(0, False), (0, True), (0, False)] + [(99, True)] * 3
    assert 0.05 < Joint(100, few).regression < 0.95


def test_the_search_s_own_runs_count_as_evidence() -> None:
    """The same three runs at each endpoint, and the search's runs around a clean split: the
    passes before it and the failures after it make the regression sure; the same number of
    runs at 40 % failures everywhere lean the other way, and the endpoints' runs settle it."""
    ends = [(0, False), (0, True), (0, False)] + [(99, True)] * 3
    split = [(p, p >= 60) for p in (50, 55, 58, 59, 60, 61, 65, 70) for _ in range(2)]
    assert Joint(100, ends).regression < 0.95
    assert Joint(100, ends + split).regression > 0.99
    rng = random.Random(2)
    flaky = [(p, rng.random() < 0.4) for p in range(0, 100, 2) for _ in range(3)]
    assert Joint(100, flaky).regression < 0.5
    more = [(p, rng.random() < 0.4) for p in (0, 99) for _ in range(30)]
    assert Joint(100, flaky + more).regression < 0.01


def test_a_rise_below_the_contrast_is_no_regression() -> None:
    # 10 % -> 20 %: a rise, but under the 25 points a regression must show.
    rng = random.Random(3)
    small = [(p, rng.random() < (0.2 if p >= 50 else 0.1)) for p in range(0, 100) for _ in
             range(4)]
    assert Joint(100, small).regression < 0.05


def test_a_failing_majority_of_a_flaky_good_endpoint_is_not_enough() -> None:
    assert not contrast.mostly_fails([True, True, False], 0.99)
    assert contrast.mostly_fails([True] * 12, 0.99)
    assert contrast.rate([True, False, False, False]) == 0.25 and contrast.rate([]) == 0.0


def test_the_integrated_posterior_names_a_clean_split_and_doubts_few_runs() -> None:
    runs = [(4, False)] * 12 + [(5, True)] * 12
    best, p = Integrated(10, runs).best()
    assert best == 5 and p > 0.999
    few = [(4, False)] * 2 + [(5, True)] * 2
    assert Integrated(10, few).best()[1] < 0.9  # the rates are unknown: two runs prove little


def test_the_rates_are_read_off_every_run_at_the_most_likely_split() -> None:
    runs = [(p, p >= 50 or i == 0) for p in range(0, 100, 5) for i in range(5)]
    fp, fn = Integrated(100, runs).rates()
    assert 0.15 < fp < 0.3 and fn < 0.05  # one failure in five before 50, none missed after


def test_a_test_broken_for_good_is_believed_once_no_run_after_the_culprit_passes() -> None:
    """The false-pass prior holds "broken for good": where no run from a commit on passed, a
    culprit there is surer than under a uniform rate alone, and a pass after a commit takes
    that half of the prior away from it."""
    runs = [(0, False), (0, True), (3, False), (5, True), (5, True), (7, True), (9, True)]
    with_spike, uniform = Integrated(10, runs), Integrated(10, runs, broken=0.0)
    assert with_spike.best()[0] == uniform.best()[0] == 4
    assert with_spike.best()[1] > uniform.best()[1]
    assert with_spike.rates()[1] < uniform.rates()[1] / 2  # no pass after: fn near 0
    passed = [*runs, (7, False)]  # a pass after 5: not broken for good there
    assert Integrated(10, passed).rates()[1] == Integrated(10, passed, broken=0.0).rates()[1]
    assert Integrated(10, passed, broken=0.999).best()[0] != 4  # nearly only "broken": ruled out
    with pytest.raises(ValueError, match="broken"):
        Integrated(10, passed, broken=1.0)
