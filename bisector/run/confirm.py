"""Double-checking a culprit before a person pastes it into an issue.

The search names a commit from one verdict per commit (or, for a flaky oracle, from a
posterior). Before the answer is written, the culprit and its parent run again: a culprit that
is not bad on a fresh run, or a parent that is not good, means the verdicts were luck or the
machine changed underneath. Then, where ``git revert`` of the culprit applies cleanly onto the
bad endpoint, that revert runs too: it should be good. A revert that stays bad says the
culprit is not the whole story (a second regression, or one that needs the culprit and a later
commit). Confirmation runs are kept as samples under the bisection's key (never as reusable
verdicts and never as probes, so they cannot change what the search saw) and are listed in
the result.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bisector import defaults, history
from bisector.core.search import Verdict
from bisector.run.pipeline import NullRecorder, Pipeline
from bisector.store import verdicts
from bisector.store.records import NewRun

if TYPE_CHECKING:
    from bisector.run.runner import Runner


CONFIRM_PERF_RUNS = 3  # a performance oracle's fresh runs of each confirmed commit


class Confirmation(enum.StrEnum):
    CONFIRMED = "confirmed"
    NOT_REPRODUCIBLE = "not reproducible"
    INCONCLUSIVE = "inconclusive"  # a fresh run could not decide (skipped, or undecided)
    REVERT_DID_NOT_FIX = "the revert did not fix it"


class _Keep(NullRecorder):
    """Stores each confirmation run as a sample and remembers its verdict; appends no probe
    and reuses nothing (a confirmation is a fresh run)."""

    def __init__(self, runner: Runner) -> None:
        self.store, self.key = runner.store, runner.key
        self.seen: list[tuple[int, str, str]] = []  # (run id, verdict, reason)
        self.facts: list[dict[str, Any]] = []

    def record(self, position: int, sha: str, run: NewRun, verdict: Verdict,
               round_: int | None) -> None:
        run_id = verdicts.save_run(self.store, self.key, replace(run, reusable=False))
        self.seen.append((run_id, verdict.value, run.reason))
        self.facts.append(run.facts)


def runs_each(runner: Runner) -> int:
    """Once for a deterministic oracle; a flaky one gets a vote (its endpoint runs), a
    performance one enough samples for the rank test."""
    meta = runner.oracle.meta
    if meta.performance:
        return CONFIRM_PERF_RUNS
    if not meta.noisy:
        return 1
    return meta.repeats if meta.repeats > 1 else defaults.NOISY_ENDPOINT_RUNS


Judge = Callable[[list[dict[str, Any]]], str]


def _runs(runner: Runner, obtain: Any, position: int, sha: str, times: int,
          judge: Judge | None) -> tuple[list[tuple[int, str, str]], str]:
    """``times`` fresh runs of ``sha``: each (run id, verdict, reason), and the group's
    verdict (``judge`` over their facts, else the majority of their verdicts)."""
    keep = _Keep(runner)
    pipe = Pipeline(obtain, runner.pipeline.executor, runner.oracle, runner.rules, keep,
                    runner.events)
    for _ in range(times):
        pipe.probe(position, sha, gpu=runner.slots[0])
    return keep.seen, (judge(keep.facts) if judge else _majority(keep.seen))


def _majority(seen: list[tuple[int, str, str]]) -> str:
    """The verdict most runs gave (skips left out); "skip" when none decided."""
    votes = [v for _, v, _ in seen if v != Verdict.SKIP.value]
    if not votes:
        return Verdict.SKIP.value
    bad = votes.count(Verdict.BAD.value)
    if 2 * bad == len(votes):
        return Verdict.SKIP.value
    return Verdict.BAD.value if 2 * bad > len(votes) else Verdict.GOOD.value


def confirm(runner: Runner, position: int, judge: Judge | None = None) -> dict[str, Any]:
    """Re-run the culprit at ``position`` and its parent, then the revert; the summary.

    ``judge`` decides a group of runs from their facts (a performance oracle's samples
    against the baseline); without it the group's majority verdict counts."""
    cands, times = runner.candidates, runs_each(runner)
    runner.events.note(f"confirming {cands[position][:12]}: the culprit and its parent again"
                       f"{f', {times} runs each' if times > 1 else ''}, then its revert")
    culprit, said_culprit = _runs(runner, runner.source.obtain, position, cands[position],
                                  times, judge)
    parent, said_parent = _runs(runner, runner.source.obtain, position - 1,
                                cands[position - 1], times, judge)
    out: dict[str, Any] = {
        "culprit": [{"run": r, "verdict": v, "reason": why} for r, v, why in culprit],
        "parent": [{"run": r, "verdict": v, "reason": why} for r, v, why in parent],
        "culprit_verdict": said_culprit, "parent_verdict": said_parent,
        "judged_by": "samples" if judge else "verdicts",
    }
    status = Confirmation.CONFIRMED
    if said_culprit == Verdict.GOOD.value or said_parent == Verdict.BAD.value:
        status = Confirmation.NOT_REPRODUCIBLE  # a fresh run said the opposite
    elif Verdict.SKIP.value in (said_culprit, said_parent):
        status = Confirmation.INCONCLUSIVE
    revert = runner.revert(cands[position], cands[-1])
    if revert is None:
        out["revert"] = {"applied": False,
                         "reason": "git revert of the culprit does not apply cleanly onto the "
                                   "bad endpoint (or the repository is not here)"}
    else:
        n = len(cands)
        seen, verdict = _runs(runner, lambda _pos: runner.source.obtain_commit(revert, n - 1),
                              n - 1, revert, times, judge)
        out["revert"] = {"applied": True, "sha": revert, "verdict": verdict,
                         "runs": [{"run": r, "verdict": v, "reason": why}
                                  for r, v, why in seen]}
        if status is Confirmation.CONFIRMED and verdict == Verdict.BAD.value:
            status = Confirmation.REVERT_DID_NOT_FIX
    out["status"] = status.value
    return out


def warning(checked: dict[str, Any]) -> str | None:
    """The line a report shows when the culprit did not hold up (None when it did)."""
    status = Confirmation(checked["status"])
    if status is Confirmation.NOT_REPRODUCIBLE:
        return ("the culprit did not reproduce on a second run (culprit or parent changed "
                "verdict): the oracle is flaky or the machine changed; mark the oracle "
                "flaky = true and bisect again, or run `bisect check` on both commits")
    if status is Confirmation.INCONCLUSIVE:
        return ("the culprit or its parent could not be judged again (a skip, or samples that "
                "did not decide): the answer stands on the search's runs alone")
    if status is Confirmation.REVERT_DID_NOT_FIX:
        return ("reverting the culprit on the bad endpoint does not fix it: another commit "
                "in the range is needed for the regression too")
    return None


def make_revert(repo_path: str, culprit: str, onto: str) -> str | None:
    """The revert commit in the bisection's clone, or None (conflicts, clone gone)."""
    try:
        repo = history.open_repo(repo_path)
    except Exception:
        return None
    return history.revert_commit(repo, culprit, onto)
