"""Driving a bisection whose oracle measures speed: commits are judged by paired samples.

The search itself is pure and lives apart (:mod:`bisector.core.perf_search`: the reference
beside the candidates, the bad endpoint's t-test, then one posterior over the change point);
this strategy feeds it the bisection's stored runs (:func:`gather`), turns its step into the
next round (:func:`~bisector.core.perf_search.layout`) or into the answer, with each judged
commit's row and the reference's own drift over the bisection.

Only this bisection's own runs are paired: runs another bisection made (another day of the
machine) are listed, never compared. Every run is a stored sample, so resume pairs the same runs
again. A run whose declared unit or direction differs from the reference's is not paired: it
counts as a run without samples, and its commit's row says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from bisector.core import paired, perf, perf_posterior, sampling
from bisector.core.perf_search import Assessed, Run, layout, search
from bisector.core.search import Next, Verdict
from bisector.run.strategies.base import (
    Adopted,
    Decision,
    Round,
    View,
    answer_for,
    in_round_later,
    is_confirmation,
    prior_for,
)
from bisector.store import runs as run_store


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
        at = x.run.started_at.timestamp() if x.run.started_at else float(x.run.id)
        by_pos.setdefault(p, []).append(Run.of(x.facts.get("perf"), x.run.id in own, at,
                                               x.facts.get("lane")))
        if x.run.id not in logged:
            v = view.rules.judge(x.run.outcome)
            adopted.append((run_store.Adopted(p, x.run.commit_sha, x.run.id, v.value),
                            x.run.reason))
    return by_pos, adopted


class Performance:
    def __init__(self, view: View) -> None:
        self.view = view
        self.round: int | None = None

    def ahead(self, r: Round) -> list[tuple[int, float]]:
        """Only the round's own later runs: its next commits hang on samples, not on one
        verdict, and a commit probed again needs nothing made."""
        return in_round_later(self.view, r)

    def decide(self) -> Decision:
        v, meta = self.view, self.view.meta
        assert meta.threshold is not None
        if self.round is None:
            self.round = run_store.last_round(v.store, v.record.id)
        by_pos, adopted = gather(v)
        informed = self.round or None
        own = [(r.start, p) for p, runs in by_pos.items() for r in runs if r.own]
        last = max(own)[1] if own else None
        got = search(by_pos, v.n, v.width, sampling.perf_max_runs(meta.max_runs),
                     paired.Rule(perf.Direction.LOWER, meta.threshold), v.rules.find_fix,
                     lambda ready: prior_for(v, ready), shown=bad_shown(v))
        if not isinstance(got.step, Next):
            summary: dict[str, object] | None = None
            if got.like is not None and got.spread is not None:
                like, spread = got.like, got.spread
                timed = [r.timed for r in got.refs]
                table = [_row(v, p, a, like, got.after) for p, a in sorted(got.assessed.items())]
                numbers: dict[str, object] = {
                    "threshold": meta.threshold, "unit": like.unit,
                    "direction": like.direction.value, "baseline_runs": len(got.refs),
                    "sought": "better" if v.rules.find_fix else "worse",
                    "baseline_median": perf.median([t.median for t in timed]),
                    "compared": "paired", "reference": paired.drift(timed),
                    "scale": {"sd": round(spread.used, 5), "dof": spread.dof},
                    "commits": table}
                if bad_shown(v):  # the bad endpoint not run: what showed it bad instead
                    numbers["bad_shown"] = v.record.settings["request"]["bad_shown"]
                summary = {"perf": numbers}
            return Decision(answer_for(v, got.step, summary, got.rule), adopted, informed)
        wanted = list(got.step.positions)
        self.round += 1
        positions = layout(wanted, last, v.width, self.round)
        return Decision(Round(self.round, positions, runs_left(v.n, known_window(by_pos, v))),
                        adopted, informed)


def bad_shown(view: View) -> bool:
    """Whether something before this search showed its bad endpoint bad (the watch's series:
    ``Request.bad_shown``, stored with the bisection)."""
    request = view.record.settings.get("request") or {}
    return bool(request.get("bad_shown")) and view.offset == 0


def known_window(by_pos: dict[int, list[Run]], view: View) -> int:
    """About how many commits the change may still be among, for the estimate of runs left:
    those no run has measured yet."""
    return max(1, view.n - len(by_pos))


def runs_left(n: int, unplaced: int) -> int:
    """About how many runs the search still needs: a commit per halving of what is left, each
    :data:`~bisector.core.paired.TYPICAL_PAIRS` pairs of two runs (its own and the
    reference's)."""
    halvings = max(1, math.ceil(math.log2(max(2, min(n, unplaced)))))
    return 2 * paired.TYPICAL_PAIRS * halvings


def _row(view: View, p: int, a: Assessed, like: Run,
         after: Callable[[int], float] | None = None) -> dict[str, Any]:
    """A judged commit as the answer shows it. Once the posterior placed the change, a
    commit's verdict is where the posterior puts it (its own t-test against the threshold is
    still shown, as ``p_value``), with ``p_after``: P(it runs at the bad level)."""
    c = a.comparison
    verdict = a.verdict.value if a.verdict else "undecided"
    extra: dict[str, Any] = {}
    if after is not None and a.verdict is not Verdict.SKIP:
        q, eps = after(p), perf_posterior.EPSILON
        verdict = "bad" if q >= 1 - eps else "good" if q <= eps else "undecided"
        extra["p_after"] = round(q, 6)
    note = None
    if a.mismatched:
        note = (f"{a.mismatched} run(s) declared another unit or direction than the "
                f"reference's ({like.unit or 'no unit'}, {like.direction.value}): not paired")
    change = None
    if c is not None and c.change is not None:
        # positive = worse in the metric's own direction, also when a speed-up is sought
        change = round(-c.change / (1 + c.change) if view.rules.find_fix else c.change, 4)
    return {"position": p, "sha": view.candidates[p], "runs": a.runs,
            "verdict": verdict, "median": a.median, "change": change,
            "p_value": c.p_value if c else None, "pairs": c.pairs if c else 0,
            "unit": like.unit, "compared": "paired",
            "mismatched": a.mismatched, "note": note, **extra}
