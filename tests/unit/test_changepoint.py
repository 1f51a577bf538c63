"""Change points of a performance series (bisector/core/changepoint.py) on fixed series."""

from __future__ import annotations

import random

import pytest

from bisector.core.changepoint import Step, build_medians, detect, relative_change
from bisector.core.perf import Direction

pytestmark = pytest.mark.unit


def noisy(level: float, n: int, noise: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, noise)) for _ in range(n)]


def test_a_step_is_found_between_the_right_builds_with_its_size() -> None:
    series = noisy(10.0, 20, 0.03, 1) + noisy(12.0, 6, 0.03, 2)
    (step,) = detect(series, threshold=0.05)
    assert step.index == 20
    assert step.worse and step.change == pytest.approx(0.2, abs=0.04)
    assert step.p_value < 0.01 and step.builds_before == 20 and step.builds_after == 6
    assert step.undoes is None


@pytest.mark.parametrize("seed", range(5))
def test_noise_alone_raises_no_alarm(seed: int) -> None:
    assert detect(noisy(10.0, 80, 0.10, seed), threshold=0.05) == []


def test_one_outlier_build_is_ignored() -> None:
    series = noisy(10.0, 30, 0.03, 3)
    series[12] = 40.0  # one build four times slower (a busy machine that night)
    series[25] = 2.0
    assert detect(series, threshold=0.05) == []


def test_a_step_smaller_than_the_threshold_is_no_change_point() -> None:
    series = noisy(10.0, 30, 0.005, 4) + noisy(10.3, 30, 0.005, 5)  # +3 %, very clear
    assert detect(series, threshold=0.05) == []
    (step,) = detect(series, threshold=0.02)
    assert step.index == 30


def test_a_step_is_seen_only_once_enough_builds_follow_it() -> None:
    series = noisy(10.0, 20, 0.03, 6) + noisy(13.0, 5, 0.03, 7)
    assert detect(series[:22], threshold=0.05) == []  # two builds after: could be a hiccup
    assert [s.index for s in detect(series[:23], threshold=0.05)] == [20]


def test_the_fix_is_reported_as_a_step_back_of_the_slowdown() -> None:
    series = noisy(10.0, 15, 0.03, 8) + noisy(13.0, 10, 0.03, 9) + noisy(10.0, 8, 0.03, 10)
    slow, fix = detect(series, threshold=0.05)
    assert (slow.index, fix.index) == (15, 25)
    assert slow.worse and not fix.worse
    assert fix.undoes == 15 and slow.undoes is None


def test_a_second_speedup_is_not_a_step_back() -> None:
    series = noisy(10.0, 12, 0.02, 11) + noisy(8.0, 12, 0.02, 12) + noisy(6.0, 12, 0.02, 13)
    steps = detect(series, threshold=0.05)
    assert [s.index for s in steps] == [12, 24]
    assert all(not s.worse and s.undoes is None for s in steps)


def test_higher_is_better_metrics_call_a_drop_worse() -> None:
    series = noisy(100.0, 20, 0.02, 14) + noisy(80.0, 8, 0.02, 15)
    (step,) = detect(series, threshold=0.05, direction=Direction.HIGHER)
    assert step.worse and step.change == pytest.approx(0.2, abs=0.03)
    assert relative_change(100.0, 80.0, Direction.HIGHER) == pytest.approx(0.2)
    assert relative_change(100.0, 80.0, Direction.LOWER) == pytest.approx(-0.2)


def test_too_short_or_unusable_series_say_nothing() -> None:
    assert detect([10.0, 10.0, 20.0, 20.0, 20.0], threshold=0.05) == []
    assert detect([10.0] * 10, threshold=0.05) == []  # flat: no test to run
    assert detect([10.0] * 5 + [0.0] * 5, threshold=0.05) == []


def test_a_build_counts_once_as_its_median() -> None:
    assert build_medians([[1.0, 2.0, 9.0], [4.0]]) == [2.0, 4.0]
    assert Step(3, 1.0, 2.0, 1.0, 0.001, 3, 3).worse
