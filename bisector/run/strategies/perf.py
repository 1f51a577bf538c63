"""Driving a bisection whose oracle measures speed: commits are judged by their samples.

A performance oracle prints samples (``BISECTOR_RESULT {"samples": [...]}``); one run says
little, so a commit's verdict is a statistical decision against the good endpoint's runs
(:func:`bisector.core.perf.compare_runs`: Mann–Whitney U against the baseline shifted by the
oracle's threshold, on pooled samples or on per-run medians as the baseline's own agreement
says). The good endpoint runs :data:`BASELINE_RUNS` times first, in this bisection
(:data:`SPLIT_BASELINE_RUNS` when those runs disagree and each run counts once): runs that
earlier bisections made there were made on another day of the machine and are never the
baseline. Every other commit runs once, then 2, 4, ... times in all (up to the oracle's
``max-runs``, a number of runs per commit) until the test decides; one still undecided at the
cap is a skip (a change near the threshold cannot be placed). Decided commits feed the
ordinary search (:func:`bisector.core.search.next_step`), so a performance bisection has the
same endpoint checks, skips and windows as any other.

A round holds at most one run of each commit: with several slots (GPUs), two runs of one
commit at once would measure two GPUs at the same time and share one progress row. A commit
that needs more runs gets one per round, and is compared only at the schedule's points
(:func:`bisector.core.perf.runs_due`), as if its runs had come in one batch.

Every run is a stored sample (like a flaky oracle's), so resume and later bisections with the
same oracle start from all of them; decisions are recomputed from the samples each round. A
run whose declared unit or direction differs from the baseline's is not pooled: it counts as a
run without samples, and its commit's row says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bisector.base import defaults
from bisector.core import perf, sampling
from bisector.core.search import Next, Problem, Stop, Verdict, next_step
from bisector.run.strategies.base import (
    Adopted,
    Decision,
    Judge,
    Round,
    View,
    answer_for,
    is_confirmation,
    prior_for,
)
from bisector.store import runs as run_store

BASELINE_RUNS = defaults.PERF_BASELINE_RUNS  # own runs of the good endpoint, at least
SPLIT_BASELINE_RUNS = defaults.PERF_SPLIT_BASELINE_RUNS  # when those runs disagree
UNTESTABLE_SKIPS = 2  # runs without samples before a commit counts as a skip


@dataclass(frozen=True)
class Run:
    """One stored run of a commit as the search sees it."""

    samples: tuple[float, ...] | None  # None: the run gave none (a skip)
    unit: str | None
    direction: perf.Direction
    own: bool  # made by this bisection (a probe it paid for), not adopted from another

    @classmethod
    def of(cls, got: dict[str, Any] | None, own: bool) -> Run:
        got = got or {}
        samples = got.get("samples")
        return cls(tuple(samples) if samples else None, got.get("unit"),
                   perf.Direction(got.get("direction", perf.Direction.LOWER.value)), own)

    def fits(self, like: Run) -> bool:
        """Declares what ``like`` declares: samples in another unit or direction would be
        compared as if they were the same quantity."""
        return self.unit == like.unit and self.direction is like.direction


@dataclass(frozen=True)
class Assessed:
    """A commit's standing: decided (with the comparison), skipped, or needing more runs."""

    verdict: Verdict | None
    more: int
    runs: int
    comparison: perf.Comparison | None
    mismatched: int = 0  # runs whose unit or direction differ from the baseline's


def gather(view: View) -> tuple[dict[int, list[Run]], Adopted]:
    """position -> its stored runs, oldest first, and the runs this bisection has not logged
    yet."""
    pos = {sha: i for i, sha in enumerate(view.candidates)}
    logged = run_store.logged_runs(view.store, view.record.id)
    own = run_store.own_runs(view.store, view.record.id)
    by_pos: dict[int, list[Run]] = {}
    adopted: Adopted = []
    found = run_store.samples(view.store, view.key, list(view.candidates))
    for x in sorted((x for xs in found.values() for x in xs), key=lambda x: x.run.id):
        if x.run.commit_sha not in pos or is_confirmation(x.facts):
            continue  # a confirmation run checks an answer; it is no evidence for one
        p = pos[x.run.commit_sha]
        by_pos.setdefault(p, []).append(Run.of(x.facts.get("perf"), x.run.id in own))
        if x.run.id not in logged:
            v = view.rules.judge(x.run.outcome)
            adopted.append((run_store.Adopted(p, x.run.commit_sha, x.run.id, v.value),
                            x.run.reason))
    return by_pos, adopted


def baseline_of(runs: list[Run]) -> tuple[list[Run], list[tuple[float, ...]]]:
    """This bisection's own runs of the good endpoint, and the samples of those that agree
    with the first one's unit and direction (the baseline)."""
    mine = [r for r in runs if r.own]
    first = next((r for r in mine if r.samples), None)
    return mine, [r.samples for r in mine if r.samples and first and r.fits(first)]


def baseline_size(base_runs: list[tuple[float, ...]]) -> int:
    """How many usable runs the baseline needs: :data:`BASELINE_RUNS`, or
    :data:`SPLIT_BASELINE_RUNS` once the first :data:`BASELINE_RUNS` of them disagree
    (decided on those first runs only, so the answer never changes as the baseline grows)."""
    if len(base_runs) < BASELINE_RUNS:
        return BASELINE_RUNS
    split = perf.agreement(base_runs[:BASELINE_RUNS]) < perf.AGREEMENT_ALPHA
    return SPLIT_BASELINE_RUNS if split else BASELINE_RUNS


def sought(like: Run, find_fix: bool) -> perf.Direction:
    """The direction a commit must move in to count as the change: the metric's own (worse is
    the change: a slowdown), or with ``--find-fix`` the opposite (better is the change: the
    commit that made it faster; the nightly watch bisects a speed-up so)."""
    if not find_fix:
        return like.direction
    return (perf.Direction.HIGHER if like.direction is perf.Direction.LOWER
            else perf.Direction.LOWER)


def assess(runs: list[Run], base: perf.Baseline, like: Run, threshold: float,
           cap: int, direction: perf.Direction | None = None) -> Assessed:
    """Where a commit with these runs stands against the baseline (``like``: a baseline run,
    whose unit and direction every pooled run must share; ``direction``: the way that counts
    as the change, :func:`sought`)."""
    valid = [r.samples for r in runs if r.samples and r.fits(like)]
    mismatched = sum(1 for r in runs if r.samples and not r.fits(like))
    n = len(runs)
    if not valid:  # one skip may be a passing failure (an install that broke): try once more
        if n >= UNTESTABLE_SKIPS:
            return Assessed(Verdict.SKIP, 0, n, None, mismatched)
        return Assessed(None, UNTESTABLE_SKIPS - n, n, None, mismatched)
    due = perf.runs_due(n, cap)
    if due:  # between two points of the schedule: finish the batch first
        return Assessed(None, due, n, None, mismatched)
    cmp = perf.compare_runs(base, valid, direction or like.direction, threshold)
    if cmp.verdict is perf.PerfVerdict.BAD:
        return Assessed(Verdict.BAD, 0, n, cmp, mismatched)
    if cmp.verdict is perf.PerfVerdict.GOOD:
        return Assessed(Verdict.GOOD, 0, n, cmp, mismatched)
    target = perf.next_sample_count(n, cap)
    if target is None:
        return Assessed(Verdict.SKIP, 0, n, cmp, mismatched)
    return Assessed(None, target - n, n, cmp, mismatched)


def one_run_each(wanted: list[int]) -> tuple[int, ...]:
    """The round for these wanted runs (a position once per run it still needs): each commit
    once, in order; its other runs go to later rounds."""
    return tuple(dict.fromkeys(wanted))


class Performance:
    def __init__(self, view: View) -> None:
        self.view = view
        self.round: int | None = None

    def decide(self) -> Decision:
        v, meta = self.view, self.view.meta
        assert meta.threshold is not None
        if self.round is None:
            self.round = run_store.last_round(v.store, v.record.id)
        cap = sampling.perf_max_runs(meta.max_runs)
        by_pos, adopted = gather(v)
        informed = self.round or None
        mine, base_runs = baseline_of(by_pos.get(0, []))
        wanted: list[int] = []
        table: list[dict[str, Any]] = []
        need = baseline_size(base_runs)
        if len(base_runs) < need:
            if len(mine) >= 2 * need:  # mostly skips: the baseline is missing
                return Decision(answer_for(v, Stop(Problem.GOOD_UNTESTABLE, 0)), adopted,
                                informed)
            wanted = [0]
        else:
            # The first runs decided how many there are; they decide the rule as well.
            base = perf.Baseline(tuple(base_runs), perf.agreement(base_runs[:BASELINE_RUNS]))
            like = next(r for r in mine if r.samples)
            way = sought(like, v.rules.find_fix)
            known: dict[int, Verdict] = {0: Verdict.GOOD}
            for p, runs in sorted(by_pos.items()):
                if p == 0:
                    continue
                a = assess(runs, base, like, meta.threshold, cap, way)
                if a.verdict is not None:
                    known[p] = a.verdict
                wanted += [p] * a.more
                table.append(_row(v, p, a, like))
            if not wanted:
                ready = known.get(v.n - 1) is Verdict.BAD
                step = next_step(v.n, known, width=v.width, prior=prior_for(v, ready))
                if not isinstance(step, Next):
                    summary: dict[str, object] = {"perf": {
                        "threshold": meta.threshold, "unit": like.unit,
                        "direction": like.direction.value, "baseline_runs": len(base.runs),
                        "sought": "better" if v.rules.find_fix else "worse",
                        "baseline_median": perf.median(base.observations),
                        "baseline_agreement_p": base.agreement_p,
                        "compared": "run medians" if base.per_run else "samples",
                        "commits": table}}
                    return Decision(answer_for(v, step, summary,
                                               judge(base, like, meta.threshold, way)),
                                    adopted, informed)
                wanted = list(step.positions)
        positions = one_run_each(wanted)
        self.round += 1
        return Decision(Round(self.round, positions, len(positions)), adopted, informed)


def _row(view: View, p: int, a: Assessed, like: Run) -> dict[str, Any]:
    c = a.comparison
    note = None
    if a.mismatched:
        note = (f"{a.mismatched} run(s) declared another unit or direction than the "
                f"baseline's ({like.unit or 'no unit'}, {like.direction.value}): not pooled")
    return {"position": p, "sha": view.candidates[p], "runs": a.runs,
            "verdict": a.verdict.value if a.verdict else "undecided",
            "median": c.median_candidate if c else None,
            # positive = worse in the metric's own direction, also when a speed-up is sought
            "change": round(-c.relative_change if view.rules.find_fix else c.relative_change,
                            4) if c else None,
            "p_value": c.p_value if c else None, "unit": like.unit,
            "compared": ("run medians" if c.per_run else "samples") if c else None,
            "mismatched": a.mismatched, "note": note}


def judge(base: perf.Baseline, like: Run, threshold: float,
          direction: perf.Direction | None = None) -> Judge:
    """Confirmation runs are judged like search runs: against the same baseline, by the same
    rule (samples or run medians), runs in another unit or direction left out (undecided is a
    skip)."""

    def judged(facts: list[dict[str, Any]]) -> str:
        runs = [Run.of(f.get("perf"), False) for f in facts]
        valid = [r.samples for r in runs if r.samples and r.fits(like)]
        if not valid:
            return Verdict.SKIP.value
        got = perf.compare_runs(base, valid, direction or like.direction, threshold).verdict
        return {perf.PerfVerdict.BAD: Verdict.BAD, perf.PerfVerdict.GOOD: Verdict.GOOD}.get(
            got, Verdict.SKIP).value

    return judged
