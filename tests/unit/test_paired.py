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


QUIET = paired.Scale(0.015, 20)  # a bisection's scale: pairs move 1.5 %, well known


def test_one_pair_decides_a_clear_change_once_the_scale_is_known() -> None:
    assert paired.compare([math.log(1.5)], SLOWDOWN, QUIET).verdict is perf.PerfVerdict.BAD
    assert paired.compare([0.01], SLOWDOWN, QUIET).verdict is perf.PerfVerdict.GOOD
    # Near the margin it takes more pairs; with no degree of freedom nothing is decided.
    near = [math.log(1.22)]
    assert paired.compare(near, SLOWDOWN, QUIET).verdict is perf.PerfVerdict.UNDECIDED
    assert paired.compare(near * 12, SLOWDOWN, QUIET).verdict is perf.PerfVerdict.BAD
    unknown = paired.Scale(math.inf, 0)
    assert paired.compare([math.log(3.0)], SLOWDOWN, unknown).verdict is \
        perf.PerfVerdict.UNDECIDED


def test_the_scale_is_learnt_between_runs_never_from_the_samples_inside_one() -> None:
    """Runs whose samples agree to 0.1 % but whose levels move 8 % run to run (a run that is
    slow is slow in all its samples): the scale is the runs' 8 %, so one pair of +30 % against
    a 20 % threshold decides nothing, where the samples' own spread would have said BAD."""
    import random

    rng = random.Random(4)
    refs = [Timed.of(2.0 * i, [10.0 * math.exp(rng.gauss(0, 0.08))] * 3) for i in range(12)]
    spread = paired.scale(refs, [], SLOWDOWN)
    assert spread.dof == 5 and 0.04 < spread.sd < 0.2 and spread.floor == 0.0
    run = Timed.of(5.0, [13.0, 13.01, 12.99])
    diffs = paired.differences(refs, [run], SLOWDOWN)
    assert paired.compare(diffs, SLOWDOWN, spread).verdict is perf.PerfVerdict.UNDECIDED
    floor_only = paired.Scale(0.0, 5, floor=run.se)  # what the samples alone would say
    assert paired.compare(diffs, SLOWDOWN, floor_only).verdict is perf.PerfVerdict.BAD


def test_a_slow_mode_is_winsorized_only_among_enough_pairs() -> None:
    """One run in five 8 % slower: a robust scale pulls such a pair in among three or more
    pairs of a commit, and judges one or two pairs by the plain spread (which of two pairs is
    the outlier cannot be told)."""
    spread = paired.Scale(0.04, 30, robust=0.015, clip=0.03)
    rule = Rule(perf.Direction.LOWER, 0.05)
    judged, sd = spread.judging([0.0, 0.0, 0.077])
    assert judged == [0.0, 0.0, 0.03] and sd == 0.015
    assert spread.judging([0.077]) == ([0.077], 0.04)
    assert paired.compare([0.077], rule, spread).verdict is perf.PerfVerdict.UNDECIDED
    assert paired.compare([0.0, 0.077, 0.0, 0.0], rule, spread).verdict is perf.PerfVerdict.GOOD


def test_a_confirmation_judges_its_fresh_pairs_with_the_search_s_scale() -> None:
    parent = [Timed(0, 10.0), Timed(2, 10.02), Timed(4, 9.98)]
    culprit = [Timed(1, 15.0), Timed(3, 15.1)]
    lent = paired.Rule(perf.Direction.LOWER, 0.2, spread=QUIET)
    assert paired.judge_beside(parent, culprit[:1], lent).verdict is perf.PerfVerdict.BAD
    alone = paired.Rule(perf.Direction.LOWER, 0.2)  # no scale lent: the fresh runs' own
    assert paired.judge_beside(parent, culprit[:1], alone).verdict is \
        perf.PerfVerdict.UNDECIDED
