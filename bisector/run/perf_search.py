"""Driving a bisection whose oracle measures speed: commits are judged by their samples.

A performance oracle prints samples (``BISECTOR_RESULT {"samples": [...]}``); one run says
little, so a commit's verdict is a statistical decision against the good endpoint's samples
(:func:`bisector.core.perf.compare`: Mann–Whitney U against the baseline shifted by the
oracle's threshold). The good endpoint runs :data:`BASELINE_RUNS` times first; every other
commit runs once, then 2, 4, ... times in all (up to the oracle's ``max-runs``) until the test
decides; one still undecided at the cap is a skip (a change near the threshold cannot be placed).
Decided commits feed the ordinary search (:func:`bisector.core.search.next_step`), so a
performance bisection has the same endpoint checks, skips and windows as any other.

Every run is a stored sample (like a flaky oracle's), so resume and later bisections with the
same oracle start from all of them; decisions are recomputed from the samples each round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bisector.core import perf
from bisector.core.search import Probe, Problem, Stop, Verdict, next_step
from bisector.run import confirm
from bisector.store import verdicts

if TYPE_CHECKING:
    from bisector.run.runner import Finished, Runner

BASELINE_RUNS = 3  # runs of the good endpoint before anything is compared with it
UNTESTABLE_SKIPS = 2  # runs without samples before a commit counts as a skip


@dataclass(frozen=True)
class Assessed:
    """A commit's standing: decided (with the comparison), skipped, or needing more runs."""

    verdict: Verdict | None
    more: int
    runs: int
    comparison: perf.Comparison | None


def gather(runner: Runner) -> tuple[dict[int, list[list[float] | None]], str | None,
                                    list[tuple[verdicts.Adopted, str]]]:
    """position -> each run's samples (None for a run that gave none), the unit, and the runs
    this bisection has not logged yet."""
    pos = {sha: i for i, sha in enumerate(runner.candidates)}
    logged = verdicts.logged_runs(runner.store, runner.record.id)
    by_pos: dict[int, list[list[float] | None]] = {}
    unit = None
    adopted = []
    found = verdicts.samples(runner.store, runner.key, runner.candidates)
    for x in sorted((x for xs in found.values() for x in xs), key=lambda x: x.run.id):
        p = pos[x.run.commit_sha]
        got = x.facts.get("perf")
        by_pos.setdefault(p, []).append(list(got["samples"]) if got else None)
        unit = unit or (got or {}).get("unit")
        if x.run.id not in logged:
            v = runner.rules.judge(x.run.outcome)
            adopted.append((verdicts.Adopted(p, x.run.commit_sha, x.run.id, v.value),
                            x.run.reason))
    return by_pos, unit, adopted


def assess(runs: list[list[float] | None], baseline: list[float], runner: Runner,
           direction: perf.Direction) -> Assessed:
    meta = runner.oracle.meta
    assert meta.threshold is not None
    cap = meta.max_runs or perf.DEFAULT_MAX_RUNS
    valid = [r for r in runs if r]
    if not valid:  # one skip may be a passing failure (an install that broke): try once more
        if len(runs) >= UNTESTABLE_SKIPS:
            return Assessed(Verdict.SKIP, 0, len(runs), None)
        return Assessed(None, UNTESTABLE_SKIPS - len(runs), len(runs), None)
    cmp = perf.compare(baseline, [v for r in valid for v in r], direction, meta.threshold)
    if cmp.verdict is perf.PerfVerdict.BAD:
        return Assessed(Verdict.BAD, 0, len(runs), cmp)
    if cmp.verdict is perf.PerfVerdict.GOOD:
        return Assessed(Verdict.GOOD, 0, len(runs), cmp)
    target = perf.next_sample_count(len(runs), cap)
    if target is None:
        return Assessed(Verdict.SKIP, 0, len(runs), cmp)
    return Assessed(None, target - len(runs), len(runs), cmp)


def run(runner: Runner) -> Finished:
    """The performance search loop; the lease is held by the caller."""
    from bisector.run.runner import Finished

    n = len(runner.candidates)
    round_ = verdicts.last_round(runner.store, runner.record.id)
    ran = 0
    while True:
        runner.check_lease()
        by_pos, unit, adopted = gather(runner)
        runner.adopt(adopted, round_ or None)
        base_runs = by_pos.get(0, [])
        base_valid = [r for r in base_runs if r]
        positions: tuple[int, ...]
        table: list[dict[str, Any]] = []
        if len(base_valid) < BASELINE_RUNS:
            if len(base_runs) >= 2 * BASELINE_RUNS:  # mostly skips: the baseline is missing
                return Finished(runner.finish(Stop(Problem.GOOD_UNTESTABLE, 0)), ran)
            positions = (0,) * (BASELINE_RUNS - len(base_valid))
        else:
            baseline = [v for r in base_valid for v in r]
            direction = _direction(runner, by_pos)
            known: dict[int, Verdict] = {0: Verdict.GOOD}
            more: list[int] = []
            for p, runs in sorted(by_pos.items()):
                if p == 0:
                    continue
                a = assess(runs, baseline, runner, direction)
                if a.verdict is not None:
                    known[p] = a.verdict
                more += [p] * a.more
                table.append(_row(runner, p, a, unit))
            if more:
                positions = tuple(more)
            else:
                step = next_step(n, known, width=runner.width)
                if not isinstance(step, Probe):
                    runner.judge_runs = _judge(runner, baseline, direction)
                    return Finished(runner.finish(step, extra={"perf": {
                        "threshold": runner.oracle.meta.threshold, "unit": unit,
                        "direction": direction.value, "baseline_runs": len(base_valid),
                        "baseline_median": perf.median(baseline), "commits": table}}), ran)
                positions = step.positions
        round_ += 1
        ran += 1
        runner.run_round(round_, positions, len(positions))


def _direction(runner: Runner, by_pos: dict[int, list[list[float] | None]]) -> perf.Direction:
    """The direction the good endpoint's runs declared (every run of one oracle says the
    same; the stored facts keep it)."""
    found = verdicts.samples(runner.store, runner.key, [runner.candidates[0]])
    for x in found.get(runner.candidates[0], []):
        got = x.facts.get("perf")
        if got:
            return perf.Direction(got.get("direction", perf.Direction.LOWER.value))
    return perf.Direction.LOWER


def _row(runner: Runner, p: int, a: Assessed, unit: str | None) -> dict[str, Any]:
    c = a.comparison
    return {"position": p, "sha": runner.candidates[p], "runs": a.runs,
            "verdict": a.verdict.value if a.verdict else "undecided",
            "median": c.median_candidate if c else None,
            "change": round(c.relative_change, 4) if c else None,
            "p_value": c.p_value if c else None, "unit": unit}


def _judge(runner: Runner, baseline: list[float], direction: perf.Direction
           ) -> confirm.Judge:
    """Confirmation runs are judged like search runs: their pooled samples against the
    baseline (undecided is a skip)."""
    threshold = runner.oracle.meta.threshold
    assert threshold is not None

    def judge(facts: list[dict[str, Any]]) -> str:
        pooled = [v for f in facts for v in (f.get("perf") or {}).get("samples", [])]
        if not pooled:
            return Verdict.SKIP.value
        got = perf.compare(baseline, pooled, direction, threshold).verdict
        return {perf.PerfVerdict.BAD: Verdict.BAD, perf.PerfVerdict.GOOD: Verdict.GOOD}.get(
            got, Verdict.SKIP).value

    return judge
