"""Paired performance decisions (core/paired.py): pairing by time, the straddle rule, the
schedule of looks."""

from __future__ import annotations

import math

import pytest

from bisector.core import paired, perf
from bisector.core.paired import Rule, Timed

pytestmark = pytest.mark.unit

SLOWDOWN = Rule(perf.Direction.LOWER, 0.2)


def test_a_linear_drift_cancels_between_the_references_around_a_run() -> None:
    # Each run 3 % slower than the one before; the candidate is 10 % slower than the reference.
    refs = [Timed(t, 10.0 * 1.03 ** t) for t in (0, 2, 4, 6)]
    runs = [Timed(t, 11.0 * 1.03 ** t) for t in (1, 3, 5)]
    diffs = paired.differences(refs, runs, SLOWDOWN)
    assert [round(math.expm1(d), 4) for d in diffs] == [0.1, 0.1, 0.1]


def test_a_run_whose_references_straddle_a_change_of_the_machine_is_left_out() -> None:
    """As on the H100: another job's load came between the two references (0.29 ms, then
    0.67 ms); the run met one of those levels, not their mean, so the pair says nothing."""
    refs = [Timed(0, 0.29), Timed(2, 0.67), Timed(4, 0.67)]
    runs = [Timed(1, 0.292), Timed(3, 0.668)]
    diffs = paired.differences(refs, runs, SLOWDOWN)
    assert len(diffs) == 1 and abs(diffs[0]) < 0.01
    # A change of the machine under twice the margin is kept (a drift, a slow mode).
    small = [Timed(0, 10.0), Timed(2, 10.0 * (1.2 ** 1.9))]
    assert len(paired.differences(small, [Timed(1, 10.0)], SLOWDOWN)) == 1


def test_compare_decides_only_past_the_margin_and_from_seven_pairs() -> None:
    bad = [math.log(1.5)] * 6
    assert paired.compare(bad, SLOWDOWN).verdict is perf.PerfVerdict.UNDECIDED
    assert paired.compare([*bad, math.log(1.45)], SLOWDOWN).verdict is perf.PerfVerdict.BAD
    good = [0.001 * i for i in range(7)]
    assert paired.compare(good, SLOWDOWN).verdict is perf.PerfVerdict.GOOD


def test_the_schedule_of_looks_doubles_up_to_the_cap() -> None:
    looks, made = [paired.MIN_PAIRS], paired.MIN_PAIRS
    while made < 32:
        made = paired.next_look(made, 32)
        looks.append(made)
    assert looks == [7, 14, 28, 32]
    assert paired.due(3, 32) == 4 and paired.due(7, 32) == 0 and paired.due(32, 32) == 0
