"""Statistics for performance oracles: parse what they print, decide good/bad/undecided.

A performance oracle does not exit 0/1; it measures, and prints one line per run::

    BISECTOR_RESULT {"samples": [12.1, 12.3], "unit": "ms", "direction": "lower-is-better"}

Timings are noisy, so one run never decides a commit. :func:`compare` asks a one-sided
Mann–Whitney U test whether the candidate is worse than the baseline *by more than the
threshold*, or significantly not; when neither is significant the verdict is UNDECIDED and the
caller runs the oracle again, following :func:`next_sample_count`, until the run cap, after
which an undecided commit is skipped rather than guessed.

What counts as one observation is decided by the baseline (:class:`Baseline`, used through
:func:`compare_runs`). The rank test assumes independent samples, but samples of one run share
that run's conditions (a GPU's clocks, a process's memory layout). So the baseline's runs are
first tested against each other (Kruskal–Wallis): when they agree (p >= :data:`AGREEMENT_ALPHA`,
0.05) the within-run noise dominates and every sample counts; when they disagree, run-to-run
variation dominates, pooling would be anti-conservative, and each run counts once, as its
median. Per-run medians need runs, not samples, to reach significance: with m baseline and k
candidate runs the smallest one-sided p-value is 1/C(m+k, k), so against 3 baseline medians
one run gives 0.25 at best and only 8 runs get below 0.01 (1/165); against 8 baseline
medians 4 runs do (1/495). Which is why the caller grows a disagreeing baseline to 8 runs
(:mod:`bisector.run.strategies.perf`); below the needed runs a commit stays UNDECIDED, the
schedule goes on, and at the cap it is skipped.

Pure: no I/O, no clock, no randomness; every failure is a ``ValueError`` with a one-line
message that names the fix, which the caller turns into a SKIP reason or a metadata error.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bisector.base import escape

RESULT_PREFIX = "BISECTOR_RESULT"
"""The first token of the one stdout line a performance oracle prints per run."""

DEFAULT_ALPHA = 0.01
"""Significance level of each one-sided test. Strict, because a false BAD misleads the whole
bisection, while a false UNDECIDED only costs more runs."""

FIRST_RUNS = 1
"""Oracle runs made on a commit before the first comparison."""

DEFAULT_MAX_RUNS = 8
"""Cap on oracle runs per commit; run counts double from :data:`FIRST_RUNS` up to it."""

AGREEMENT_ALPHA = 0.05
"""Level of the Kruskal–Wallis test across the baseline's runs; below it the runs disagree and
each run counts as one observation (its median). Looser than :data:`DEFAULT_ALPHA` on purpose:
a false alarm only costs runs, a missed one lets the pooled test call noise a regression."""

# Keys a result line may carry for people (the bundled template prints them); anything else is
# most likely a typo of a key that matters ("directon") and is refused.
_INFO_KEYS = frozenset({"metric", "median", "mean", "device", "warmup", "torch", "note"})
_ALLOWED_KEYS = frozenset({"samples", "unit", "direction"}) | _INFO_KEYS
_SHOWN = 60  # characters of a bad value quoted in an error: messages stay one short line


class Direction(enum.StrEnum):
    """Which way the metric improves; the spelling is what oracles print."""

    LOWER = "lower-is-better"
    HIGHER = "higher-is-better"


class PerfVerdict(enum.StrEnum):
    """What one comparison concludes; UNDECIDED means "sample more", never "good"."""

    GOOD = "good"
    BAD = "bad"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class PerfResult:
    """One oracle run's measurement, validated."""

    samples: tuple[float, ...]
    unit: str | None
    direction: Direction
    metric: str | None = None  # what was measured, for people and the watch's series names


@dataclass(frozen=True)
class Comparison:
    """The verdict on a candidate against the baseline, with the numbers a report shows.

    ``relative_change`` is signed so that **positive means worse**, whatever the direction:
    ``(median_candidate - median_baseline) / median_baseline`` for lower-is-better and its
    negation for higher-is-better. A 20 % slowdown and a 20 % throughput drop both read +0.20,
    so a report can compare it with the threshold without knowing the direction.

    ``p_value`` is that of the one-sided test behind the verdict: the "worse" test for BAD, the
    "not worse" test for GOOD, and for UNDECIDED the smaller of the two (how near a decision).
    """

    verdict: PerfVerdict
    median_baseline: float
    median_candidate: float
    relative_change: float
    p_value: float
    per_run: bool = False  # compared run medians (one per run), not pooled samples


def _show(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _sample(value: object) -> float | None:
    """A finite, positive float, or None. Booleans are refused although JSON ints include
    them; positivity because a relative threshold scales the baseline, which needs a scale."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number > 0 else None


def parse_result(stdout: str) -> PerfResult | None:
    """The measurement in an oracle's stdout: the LAST ``BISECTOR_RESULT`` line, or None.

    The last line wins so that an oracle may print warm-up results before the real one. A
    malformed line raises ``ValueError`` instead of being passed over: an oracle that tried to
    report and failed must become a SKIP with the reason, not a silent "no result". Unknown
    keys are refused too, so a typo such as ``"directon"`` cannot silently mean the default.
    """
    payload: str | None = None
    for line in stdout.splitlines():
        head, _, rest = line.strip().partition(" ")
        if head == RESULT_PREFIX:
            payload = rest.strip()
    if payload is None:
        return None
    where = f"{RESULT_PREFIX} line"
    if not payload:
        raise ValueError(
            f'{where} has no JSON after it: print {RESULT_PREFIX} {{"samples": [...]}}'
        )
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{where} is not valid JSON ({exc.msg} at column {exc.colno}): print it with json.dumps"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"{where} must hold a JSON object, got {_show(data)}")
    unknown = sorted(set(data) - _ALLOWED_KEYS)
    if unknown:
        raise ValueError(
            f"{where} has unknown key(s) {', '.join(map(_show, unknown))}: "
            f"allowed are {', '.join(sorted(_ALLOWED_KEYS))}"
        )
    raw = data.get("samples")
    if not isinstance(raw, list) or not raw:
        raise ValueError(
            f'{where}: "samples" must be a non-empty list of numbers, got {_show(raw)}'
        )
    samples: list[float] = []
    for item in raw:
        number = _sample(item)
        if number is None:
            raise ValueError(
                f'{where}: "samples" must be finite positive numbers, got {_show(item)}'
            )
        samples.append(number)
    unit = data.get("unit")
    if unit is not None and not isinstance(unit, str):
        raise ValueError(f'{where}: "unit" must be a string such as "ms", got {_show(unit)}')
    direction_text = data.get("direction", Direction.LOWER.value)
    try:
        direction = Direction(direction_text)
    except ValueError:
        raise ValueError(
            f'{where}: "direction" must be "{Direction.LOWER}" or '
            f'"{Direction.HIGHER}", got {_show(direction_text)}'
        ) from None
    metric = data.get("metric")
    # The oracle's words, shown wherever its runs are (a probe's line, tick, watch, show): one
    # line each, every control character visible, so "ms\nFAKE LINE" writes no line of its own.
    words = escape.line(metric.strip()[:100]) if isinstance(metric, str) else ""
    return PerfResult(samples=tuple(samples), direction=direction, metric=words or None,
                      unit=escape.line(unit) if unit is not None else None)


def parse_threshold(text: str | float) -> float:
    """The ``threshold`` of an oracle's metadata as a fraction: ``"5%"`` and ``"0.05"`` → 0.05.

    Only relative thresholds: an absolute one ("0.5ms") would tie the metadata to the unit and
    the machine. A bare number is a fraction, so ``"5"`` (500 %) is refused with a hint to write
    ``"5%"``. Zero would call every noise wobble a regression; 100 % or more cannot be applied
    to a higher-is-better metric. A TOML number (``threshold = 0.05``) is accepted as well.
    """
    hint = 'write a percentage such as "5%" or a fraction such as 0.05'
    if isinstance(text, bool):
        raise ValueError(f"threshold must be a number, got {_show(text)}: {hint}")
    stripped = str(text).strip()
    percent = stripped.endswith("%")
    number_text = stripped.removesuffix("%").strip() if percent else stripped
    try:
        value = float(number_text)
    except ValueError:
        raise ValueError(
            f"threshold {_show(str(text))} is not a relative threshold "
            f"(absolute values with a unit are not supported): {hint}"
        ) from None
    fraction = value / 100 if percent else value
    if not math.isfinite(fraction) or fraction <= 0:
        raise ValueError(f"threshold {_show(str(text))} must be above zero: {hint}")
    if fraction >= 1:
        fix = f'did you mean "{number_text}%"?' if not percent else hint
        raise ValueError(f"threshold {_show(str(text))} must be below 100 %: {fix}")
    return fraction


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def _p(x: Sequence[float], y: Sequence[float], alternative: str) -> float:
    """One-sided Mann–Whitney p-value; a degenerate test (all ranks tied) counts as 1.0.

    scipy is imported here, not at module level: only performance oracles need it."""
    from scipy.stats import mannwhitneyu  # type: ignore[import-untyped]

    p = float(mannwhitneyu(x, y, alternative=alternative).pvalue)
    return p if math.isfinite(p) else 1.0


def compare(
    baseline: Sequence[float],
    candidate: Sequence[float],
    direction: Direction,
    threshold: float,
    alpha: float = DEFAULT_ALPHA,
) -> Comparison:
    """Judge ``candidate`` against ``baseline`` (samples pooled over all runs so far).

    The rule, with ``t`` the threshold: shift the baseline to the edge of acceptable, i.e.
    ``baseline × (1 + t)`` for lower-is-better and ``baseline × (1 − t)`` for higher-is-better.
    Then, with one-sided Mann–Whitney U tests of candidate against the shifted baseline:

    * BAD when the candidate is significantly *worse* than the shifted baseline (level alpha):
      it regressed by more than the threshold.
    * GOOD when it is significantly *better* than the shifted baseline: it is significantly
      not worse by the threshold (an equivalence-style test, so "no evidence" is never GOOD).
    * UNDECIDED otherwise: a change near the threshold, or too few samples; sample more.

    It is a rank test on scaled samples, i.e. a location-shift model on log(samples): ranks do
    not change under the log, and scaling by ``1 ± t`` is a shift by ``log(1 ± t)``. It assumes
    the change moves the distribution rather than reshaping it, and no normality. The two
    tests cannot both be significant for alpha < 0.5, so the verdict is well defined.
    """
    if not baseline or not candidate:
        raise ValueError("compare needs at least one baseline and one candidate sample")
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be a fraction in (0, 1), got {threshold!r}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha!r}")
    for value in (*baseline, *candidate):
        if _sample(value) is None:
            raise ValueError(f"samples must be finite positive numbers, got {value!r}")
    if direction is Direction.LOWER:
        shifted = [b * (1 + threshold) for b in baseline]
        worse, better = "greater", "less"
    else:
        shifted = [b * (1 - threshold) for b in baseline]
        worse, better = "less", "greater"
    p_worse = _p(candidate, shifted, worse)
    p_better = _p(candidate, shifted, better)
    if p_worse < alpha:
        verdict, p_value = PerfVerdict.BAD, p_worse
    elif p_better < alpha:
        verdict, p_value = PerfVerdict.GOOD, p_better
    else:
        verdict, p_value = PerfVerdict.UNDECIDED, min(p_worse, p_better)
    median_baseline, median_candidate = median(baseline), median(candidate)
    change = (median_candidate - median_baseline) / median_baseline
    return Comparison(
        verdict=verdict,
        median_baseline=median_baseline,
        median_candidate=median_candidate,
        relative_change=change if direction is Direction.LOWER else -change,
        p_value=p_value,
    )


def agreement(runs: Sequence[Sequence[float]]) -> float:
    """Kruskal–Wallis p-value for "these runs measured one distribution"; 1.0 when it cannot
    be asked (fewer than two runs, or every value equal, where scipy divides by zero)."""
    values = [v for r in runs for v in r]
    if sum(1 for r in runs if r) < 2 or min(values) == max(values):
        return 1.0
    from scipy.stats import kruskal

    p = float(kruskal(*[list(r) for r in runs if r]).pvalue)
    return p if math.isfinite(p) else 1.0


def observations(runs: Sequence[Sequence[float]], per_run: bool) -> list[float]:
    """What the rank test sees of some runs: each run's median, or all their samples."""
    if per_run:
        return [median(r) for r in runs if r]
    return [v for r in runs for v in r]


@dataclass(frozen=True)
class Baseline:
    """The good endpoint's runs and whether they agree, which decides for every comparison
    against them whether a sample or a whole run is one observation."""

    runs: tuple[tuple[float, ...], ...]
    agreement_p: float

    @classmethod
    def of(cls, runs: Sequence[Sequence[float]]) -> Baseline:
        kept = tuple(tuple(r) for r in runs if r)
        if not kept:
            raise ValueError("a baseline needs at least one run with samples")
        return cls(kept, agreement(kept))

    @property
    def per_run(self) -> bool:
        return self.agreement_p < AGREEMENT_ALPHA

    @property
    def observations(self) -> list[float]:
        return observations(self.runs, self.per_run)


def compare_runs(
    base: Baseline,
    candidate: Sequence[Sequence[float]],
    direction: Direction,
    threshold: float,
    alpha: float = DEFAULT_ALPHA,
) -> Comparison:
    """:func:`compare` on the observations the baseline's agreement calls for: pooled samples
    when its runs agree, one median per run (candidate runs too) when they do not. The medians
    reported are then medians of run medians."""
    got = compare(base.observations, observations(candidate, base.per_run), direction,
                  threshold, alpha)
    return replace(got, per_run=base.per_run)


def next_sample_count(current: int, cap: int = DEFAULT_MAX_RUNS) -> int | None:
    """How many oracle runs a commit should have in total before the next comparison.

    ``current`` is the number of runs made so far: 0 → :data:`FIRST_RUNS`, then doubling
    (1, 2, 4, 8, ...) and clipped to ``cap``; None once ``cap`` runs are done, when the caller
    stops and skips a still-undecided commit. Doubling keeps the number of comparisons (and so
    of chances for a false verdict) logarithmic in the cap, while a clear regression is still
    decided after the first run or two.
    """
    if cap < 1:
        raise ValueError(f"the run cap must be at least 1, got {cap}")
    if current < 0:
        raise ValueError(f"the run count cannot be negative, got {current}")
    if current >= cap:
        return None
    return min(cap, FIRST_RUNS if current == 0 else current * 2)


def runs_due(current: int, cap: int = DEFAULT_MAX_RUNS) -> int:
    """Runs still to make before a commit with ``current`` runs is compared again: 0 when
    ``current`` is a point of the schedule (1, 2, 4, ..., or the cap and beyond), else how
    far the next point is.

    A caller that makes one run of a commit per round (so that runs of one commit never run
    at once) still compares only at these points, as a caller making each batch at once
    would: the number of comparisons, and so the chances of a false verdict, stay those of
    the doubling schedule.
    """
    if current >= cap:
        return 0
    point = next_sample_count(0, cap)
    while point is not None and point < current:
        point = next_sample_count(point, cap)
    return (cap if point is None else point) - current
