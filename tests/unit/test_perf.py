"""Performance-oracle statistics: result parsing, thresholds, the shifted Mann–Whitney rule, and
the run plan. Synthetic samples are seeded, so every verdict here is reproducible."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import mannwhitneyu  # type: ignore[import-untyped]

from bisector.core.perf import (
    DEFAULT_MAX_RUNS,
    Baseline,
    Direction,
    PerfResult,
    PerfVerdict,
    agreement,
    compare,
    compare_runs,
    next_sample_count,
    parse_result,
    parse_threshold,
    runs_due,
)

LOWER, HIGHER = Direction.LOWER, Direction.HIGHER
GOOD, BAD, UNDECIDED = PerfVerdict.GOOD, PerfVerdict.BAD, PerfVerdict.UNDECIDED


def noisy(seed: int, n: int, centre: float, sd: float = 0.01) -> list[float]:
    """``n`` samples around ``centre`` with a relative Gaussian noise of ``sd``."""
    rng = random.Random(seed)
    return [centre * (1 + rng.gauss(0, sd)) for _ in range(n)]


def line(payload: object) -> str:
    return "BISECTOR_RESULT " + json.dumps(payload)


# --- parse_result -------------------------------------------------------------------------------


def test_no_result_line_is_none() -> None:
    assert parse_result("") is None
    assert parse_result("warming up\nBISECTOR_RESULTS are below\ndone\n") is None


def test_full_result_is_parsed() -> None:
    out = "noise\n" + line({"samples": [12.1, 12], "unit": "ms", "direction": "higher-is-better"})
    assert parse_result(out) == PerfResult(samples=(12.1, 12.0), unit="ms", direction=HIGHER)


def test_defaults_lower_is_better_and_no_unit() -> None:
    result = parse_result(line({"samples": [3]}))
    assert result == PerfResult(samples=(3.0,), unit=None, direction=LOWER)


def test_last_line_wins_even_over_a_malformed_earlier_one() -> None:
    out = "\n".join(
        ["BISECTOR_RESULT {not json", line({"samples": [1.0]}), "x", line({"samples": [2.0]})]
    )
    result = parse_result(out + "\n")
    assert result is not None and result.samples == (2.0,)


def test_crlf_and_indentation_are_tolerated() -> None:
    result = parse_result("  " + line({"samples": [5.0]}) + "\r\n")
    assert result is not None and result.samples == (5.0,)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("BISECTOR_RESULT {not json", "JSON"),
        ("BISECTOR_RESULT", "no JSON"),
        (line([1, 2]), "object"),
        (line({"samples": []}), "samples"),
        (line({"samples": 3}), "samples"),
        (line({}), "samples"),
        ('BISECTOR_RESULT {"samples": [1.0, NaN]}', "NaN"),
        ('BISECTOR_RESULT {"samples": [Infinity]}', "Infinity"),
        (line({"samples": [1.0, "2"]}), '"2"'),
        (line({"samples": [True]}), "true"),
        (line({"samples": [0]}), "positive"),
        (line({"samples": [-1.5]}), "positive"),
        (line({"samples": [1.0], "unit": 5}), "unit"),
        (line({"samples": [1.0], "direction": "faster"}), "faster"),
        (line({"samples": [1.0], "directon": "higher-is-better"}), "directon"),
    ],
)
def test_malformed_result_names_the_problem(text: str, named: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_result("before\n" + text + "\n")
    message = str(info.value)
    assert named in message
    assert "\n" not in message


def test_error_message_stays_short_for_a_huge_value() -> None:
    with pytest.raises(ValueError) as info:
        parse_result(line({"samples": [1.0], "direction": "x" * 10_000}))
    assert len(str(info.value)) < 200


# --- parse_threshold ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("5%", 0.05), (" 5 % ", 0.05), ("0.5%", 0.005), ("0.05", 0.05), ("99.9%", 0.999), (0.1, 0.1)],
)
def test_threshold_accepted(text: str | float, expected: float) -> None:
    assert parse_threshold(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("0%", "above zero"),
        ("0", "above zero"),
        ("-5%", "above zero"),
        ("nan", "above zero"),
        ("100%", "below 100"),
        ("150%", "below 100"),
        ("5", 'did you mean "5%"'),
        ("0.5ms", "absolute"),
        ("five percent", "5%"),
        ("%", "5%"),
        (True, "number"),
    ],
)
def test_threshold_refused_with_the_fix(text: str | float, named: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_threshold(text)
    assert named in str(info.value)
    assert "\n" not in str(info.value)


# --- compare ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_twenty_percent_slowdown_is_bad(seed: int) -> None:
    result = compare(noisy(seed, 10, 10.0), noisy(seed + 100, 10, 12.0), LOWER, 0.05)
    assert result.verdict is BAD
    assert result.p_value < 0.01
    assert result.relative_change == pytest.approx(0.2, abs=0.02)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_percent_noise_is_good_with_enough_samples(seed: int) -> None:
    result = compare(noisy(seed, 40, 10.0), noisy(seed + 100, 40, 10.1), LOWER, 0.05)
    assert result.verdict is GOOD
    assert result.p_value < 0.01


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_change_near_the_threshold_with_few_samples_is_undecided(seed: int) -> None:
    result = compare(noisy(seed, 5, 10.0), noisy(seed + 100, 5, 10.55), LOWER, 0.05)
    assert result.verdict is UNDECIDED
    assert result.p_value >= 0.01


def test_near_threshold_is_never_called_good_and_more_samples_settle_it() -> None:
    small = [
        compare(noisy(s, 5, 10.0), noisy(s + 100, 5, 10.55), LOWER, 0.05).verdict for s in range(50)
    ]
    assert GOOD not in small
    assert small.count(UNDECIDED) >= 45
    many = compare(noisy(7, 200, 10.0), noisy(107, 200, 10.55), LOWER, 0.05)
    assert many.verdict is BAD


def test_no_evidence_is_undecided_not_good() -> None:
    assert compare([10.0], [10.0], LOWER, 0.05).verdict is UNDECIDED
    assert compare([10.0, 10.1], [10.0, 10.1], LOWER, 0.05).verdict is UNDECIDED
    # Noise-free and identical: plainly not 5 % worse, and enough samples to say so.
    assert compare([10.0] * 5, [10.0] * 5, LOWER, 0.05).verdict is GOOD


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_higher_is_better_mirrors(seed: int) -> None:
    base = noisy(seed, 10, 100.0)
    drop = compare(base, noisy(seed + 100, 10, 80.0), HIGHER, 0.05)
    assert drop.verdict is BAD and drop.relative_change == pytest.approx(0.2, abs=0.02)
    # A 20 % throughput *gain* is not a regression; the same numbers under lower-is-better are.
    gain = compare(base, noisy(seed + 100, 10, 120.0), HIGHER, 0.05)
    assert gain.verdict is GOOD and gain.relative_change == pytest.approx(-0.2, abs=0.02)
    assert compare(base, noisy(seed + 100, 10, 120.0), LOWER, 0.05).verdict is BAD
    steady = compare(noisy(seed, 40, 100.0), noisy(seed + 100, 40, 99.0), HIGHER, 0.05)
    assert steady.verdict is GOOD
    near = compare(noisy(seed, 5, 100.0), noisy(seed + 100, 5, 94.5), HIGHER, 0.05)
    assert near.verdict is UNDECIDED


def test_medians_and_relative_change_are_exact() -> None:
    baseline, candidate = [10.0, 30.0, 20.0], [25.0, 21.0, 27.0, 23.0]
    slower = compare(baseline, candidate, LOWER, 0.05)
    assert (slower.median_baseline, slower.median_candidate) == (20.0, 24.0)
    assert slower.relative_change == 0.2
    assert compare(baseline, candidate, HIGHER, 0.05).relative_change == -0.2
    assert compare(candidate, baseline, LOWER, 0.05).relative_change == (20.0 - 24.0) / 24.0


def test_p_value_is_the_shifted_rank_test() -> None:
    baseline, candidate = [10.0, 10.2, 9.9, 10.1, 9.8], [12.0, 12.3, 11.8, 12.1, 12.2]
    result = compare(baseline, candidate, LOWER, 0.05)
    expected = mannwhitneyu(candidate, [b * 1.05 for b in baseline], alternative="greater")
    assert (result.verdict, result.median_baseline, result.median_candidate) == (BAD, 10.0, 12.1)
    assert result.relative_change == pytest.approx(0.21)
    assert result.p_value == pytest.approx(float(expected.pvalue))
    # Five against five, fully separated: the exact one-sided p-value is 1 / C(10, 5).
    assert result.p_value == pytest.approx(1 / 252)


def test_the_threshold_moves_the_verdict() -> None:
    baseline, candidate = noisy(1, 30, 10.0), noisy(2, 30, 10.8)
    assert compare(baseline, candidate, LOWER, 0.02).verdict is BAD
    assert compare(baseline, candidate, LOWER, 0.20).verdict is GOOD


def test_alpha_is_respected() -> None:
    baseline, candidate = [10.0, 10.1, 9.9], [12.0, 12.1, 11.9]
    # Three against three: the smallest exact p-value is 1/20 = 0.05.
    assert compare(baseline, candidate, LOWER, 0.05).verdict is UNDECIDED
    assert compare(baseline, candidate, LOWER, 0.05, alpha=0.1).verdict is BAD


@pytest.mark.parametrize(
    ("baseline", "candidate", "threshold", "alpha"),
    [
        ([], [1.0], 0.05, 0.01),
        ([1.0], [], 0.05, 0.01),
        ([1.0], [1.0], 0.0, 0.01),
        ([1.0], [1.0], 1.0, 0.01),
        ([1.0], [1.0], 0.05, 0.0),
        ([1.0], [1.0], 0.05, 0.5),
        ([0.0], [1.0], 0.05, 0.01),
        ([1.0], [float("nan")], 0.05, 0.01),
    ],
)
def test_compare_refuses_bad_input(
    baseline: list[float], candidate: list[float], threshold: float, alpha: float
) -> None:
    with pytest.raises(ValueError):
        compare(baseline, candidate, LOWER, threshold, alpha)


samples = st.lists(st.floats(min_value=0.5, max_value=100.0), min_size=1, max_size=20)


@settings(max_examples=100, deadline=None)
@given(samples, samples, st.sampled_from(list(Direction)), st.integers(-10, 10))
def test_verdict_does_not_depend_on_the_unit(
    baseline: list[float], candidate: list[float], direction: Direction, power: int
) -> None:
    """Rescaling every sample (ms → µs) changes no verdict: a power of two keeps it exact."""
    scale = 2.0**power
    plain = compare(baseline, candidate, direction, 0.05)
    scaled = compare([b * scale for b in baseline], [c * scale for c in candidate], direction, 0.05)
    assert scaled.verdict is plain.verdict
    assert scaled.relative_change == pytest.approx(plain.relative_change)


# --- next_sample_count --------------------------------------------------------------------------


def test_run_plan_doubles_up_to_the_cap() -> None:
    plan, current = [], 0
    while (step := next_sample_count(current, DEFAULT_MAX_RUNS)) is not None:
        plan.append(step)
        current = step
    assert plan == [1, 2, 4, 8]


def test_run_plan_clips_to_an_uneven_cap() -> None:
    assert [next_sample_count(n, 6) for n in (0, 1, 2, 4, 6, 7)] == [1, 2, 4, 6, None, None]
    assert next_sample_count(0, 1) == 1
    assert next_sample_count(1, 1) is None
    assert next_sample_count(3) == 6


@pytest.mark.parametrize(("current", "cap"), [(-1, 8), (0, 0)])
def test_run_plan_refuses_nonsense(current: int, cap: int) -> None:
    with pytest.raises(ValueError):
        next_sample_count(current, cap)


# --- which observations: pooled samples or per-run medians --------------------------------------


def test_runs_that_agree_pool_their_samples() -> None:
    base = Baseline.of([noisy(s, 20, 10.0) for s in (1, 2, 3)])
    assert base.agreement_p >= 0.05 and not base.per_run
    assert len(base.observations) == 60
    got = compare_runs(base, [noisy(4, 20, 13.0)], LOWER, 0.05)
    assert got.verdict is BAD and not got.per_run  # one run of 20 samples is enough


def test_runs_that_disagree_count_once_each_and_need_more_runs() -> None:
    # Three runs of the same commit, each tight but at its own level (a GPU's clocks per
    # process): pooled, their 60 samples would be taken for 60 independent measurements.
    levels = (9.7, 10.0, 10.3)
    base = Baseline.of([noisy(s, 20, c, sd=0.001) for s, c in enumerate(levels)])
    assert base.agreement_p < 0.05 and base.per_run
    assert len(base.observations) == 3
    one = compare_runs(base, [noisy(9, 20, 13.0, sd=0.001)], LOWER, 0.05)
    assert one.verdict is UNDECIDED and one.p_value >= 0.25 and one.per_run  # 1 of C(4,1)
    four = compare_runs(base, [noisy(10 + i, 20, 13.0) for i in range(4)], LOWER, 0.05)
    assert four.verdict is UNDECIDED  # 1/C(7,3) = 0.029: still above 0.01
    eight = compare_runs(base, [noisy(20 + i, 20, 13.0) for i in range(8)], LOWER, 0.05)
    assert eight.verdict is BAD and eight.p_value < 0.01  # 1/C(11,3) = 0.006
    same = compare_runs(base, [noisy(30 + i, 20, 10.0) for i in range(8)], LOWER, 0.05)
    assert same.verdict is GOOD
    # Against 8 baseline medians, 4 runs are enough (1/C(12,4) = 0.002).
    wide = Baseline.of([noisy(40 + i, 20, 9.6 + 0.1 * i, sd=0.001) for i in range(8)])
    assert wide.per_run
    got = compare_runs(wide, [noisy(50 + i, 20, 13.0) for i in range(4)], LOWER, 0.05)
    assert got.verdict is BAD and got.p_value < 0.01


def test_agreement_cannot_be_asked_of_one_run_or_of_ties() -> None:
    assert agreement([[10.0, 11.0]]) == 1.0
    assert agreement([[10.0, 10.0], [10.0]]) == 1.0
    assert agreement([[], [10.0, 11.0]]) == 1.0
    with pytest.raises(ValueError, match="at least one run"):
        Baseline.of([[]])


@pytest.mark.parametrize(("current", "cap", "due"), [
    (0, 8, 1), (1, 8, 0), (2, 8, 0), (3, 8, 1), (4, 8, 0), (5, 8, 3), (7, 8, 1), (8, 8, 0),
    (11, 8, 0), (4, 5, 0), (5, 5, 0), (2, 3, 0), (5, 6, 1), (6, 6, 0),
])
def test_runs_one_at_a_time_are_compared_only_at_the_schedules_points(
        current: int, cap: int, due: int) -> None:
    assert runs_due(current, cap) == due
