"""Is there a regression at all (core/contrast.py), and the culprit's probability with the
rates integrated out (core/integrated.py)."""

from __future__ import annotations

import random

import pytest

from bisector.core import contrast
from bisector.core.integrated import Integrated

pytestmark = pytest.mark.unit


def test_a_clear_rise_is_a_regression_and_equal_rates_are_not() -> None:
    assert contrast.regression_probability([False] * 10, [True] * 10, 0.25) > 0.999
    rng = random.Random(1)
    same = ([rng.random() < 0.4 for _ in range(60)], [rng.random() < 0.4 for _ in range(60)])
    assert contrast.regression_probability(*same, 0.25) < 0.01
    # Three runs each say little either way.
    assert 0.2 < contrast.regression_probability([False, True, False], [True] * 3, 0.25) < 0.9


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
    assert abs(sum(Integrated(10, runs).prob(c) for c in range(1, 10)) - 1.0) < 1e-9
