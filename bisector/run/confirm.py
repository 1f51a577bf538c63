"""Double-checking a culprit before a person pastes it into an issue.

The search names a commit from one verdict per commit (or, for a flaky oracle, from a
posterior). Before the answer is written, the culprit and its parent run again: a culprit that
is not bad on a fresh run, or a parent that is not good, means the verdicts were luck or the
machine changed underneath. Then, where ``git revert`` of the culprit applies cleanly onto the
bad endpoint, that revert runs too: it should be good. A revert that stays bad says the
culprit is not the whole story (a second regression, or one that needs the culprit and a later
commit).

A flaky oracle's runs are weighed, not voted on (:mod:`bisector.core.confirmation`), and the
search's own runs of the culprit and its parent count toward the first group: its answer is
mostly confirmed without a fresh run, and the record says how many of the search's runs stood
in (``from_search``). A performance oracle's search lends its pairs of the culprit and its
parent, which count beside at least one fresh pair of the two while the fresh pairs agree with
them (:mod:`bisector.core.perf_confirm`; the record's ``search_pairs``).

Confirmation runs are kept as samples under the bisection's key, tagged
``facts["confirmation"]`` (never reusable verdicts, never probes), and the sampling searches
leave tagged runs out, so they cannot change what any search sees, even on ``resume`` of a
bisection interrupted while it confirmed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bisector.artifacts.obtained import Obtained, Unobtainable
from bisector.base import defaults
from bisector.base.events import Events
from bisector.base.kinds import State
from bisector.core import noisy, paired, perf, perf_confirm, sampling
from bisector.core.confirmation import Confirmation, Seen, confirm_rounds, owed, searched, weigh
from bisector.core.search import Verdict
from bisector.core.signature import FAILURE_FACT
from bisector.core.verdict import Outcome, Rules
from bisector.executors.base import Executor
from bisector.oracle.script import Oracle
from bisector.project.revert import git_parents as git_parents
from bisector.project.revert import make_revert as make_revert
from bisector.run.hunt import DIFFERENTLY, Hunt
from bisector.run.pipeline import NullRecorder, Pipeline, Source
from bisector.run.strategies.base import Judge
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import NewRun

# The revert's entry when there is none to run.
NO_REVERT = {"applied": False, "reason": "git revert of the culprit does not apply cleanly onto "
                                         "the bad endpoint (or the repository is not here)"}


@dataclass(frozen=True)
class CulpritCheck:
    """What confirmation needs of the bisection it checks (the runner hands it over)."""

    store: Store
    key: run_store.Key
    bisection_id: int
    candidates: Sequence[str]
    source: Source
    executor: Executor
    oracle: Oracle
    rules: Rules
    events: Events
    gpu: str | None
    revert: Callable[[str, str], str | None]  # (culprit, onto) -> the revert commit, or None
    reconfirm: bool = False  # fresh runs even where this culprit was confirmed before
    hunt: Hunt | None = None  # the bisection's judge of failing runs (run/hunt.py)
    parents: Callable[[str], Sequence[str]] = lambda _sha: ()  # a commit's git parents


def parent_at(ctx: CulpritCheck, position: int) -> int:
    """Where the culprit's git parent is among the candidates: its first parent on a
    first-parent walk (the walk's previous commit), under ``--ancestry-path`` the first of
    its parents on the path (the previous commit there may be another branch's). The
    previous candidate only where git cannot say."""
    before = {sha: i for i, sha in enumerate(ctx.candidates[:position])}
    return next((before[p] for p in ctx.parents(ctx.candidates[position]) if p in before),
                position - 1)


class _Keep(NullRecorder):
    """Stores each confirmation run as a sample tagged with its bisection and role (so no
    search counts it as evidence) and remembers its verdict; appends no probe and reuses
    nothing (a confirmation is a fresh run)."""

    def __init__(self, ctx: CulpritCheck, role: str) -> None:
        self.store, self.key = ctx.store, ctx.key
        self.tag = {"bisection": ctx.bisection_id, "role": role}
        self.seen: list[tuple[int, str, str]] = []  # (run id, verdict, reason)
        self.facts: list[dict[str, Any]] = []

    def record(self, position: int, sha: str, run: NewRun, verdict: Verdict,
               round_: int | None) -> None:
        tagged = replace(run, reusable=False, facts={**run.facts, "confirmation": self.tag})
        run_id = run_store.save_run(self.store, self.key, tagged)
        reason = run.reason
        if verdict is Verdict.SKIP and run.outcome is Outcome.FAIL:  # the hunt's (run/hunt.py)
            reason = DIFFERENTLY + str(run.facts.get(FAILURE_FACT) or run.reason)
        self.seen.append((run_id, verdict.value, reason))
        self.facts.append(run.facts)




def _runs(ctx: CulpritCheck, obtain: Callable[[], Obtained | Unobtainable], position: int,
          sha: str, times: int, judge: Judge | None, role: str) -> tuple[Seen, str]:
    """``times`` fresh runs of ``sha``: each (run id, verdict, reason), and the group's
    verdict (``judge`` over their facts, else the majority of their verdicts).

    The commit is obtained once for the group: a build that fails (or cannot run now) would
    fail the same way a second later, so it is recorded as one skip and the group stops
    instead of building it ``times`` times."""
    assert not isinstance(judge, paired.Rule)
    keep, pipe, got = _group(ctx, obtain, role)
    for _ in range(1 if isinstance(got, Unobtainable) else times):
        pipe.probe(position, sha, gpu=ctx.gpu)
    return keep.seen, (judge(keep.facts) if judge else _majority(keep.seen))


def _group(ctx: CulpritCheck, obtain: Callable[[], Obtained | Unobtainable],
           role: str) -> tuple[_Keep, Pipeline, Obtained | Unobtainable]:
    """A recorder and a pipeline for fresh runs of one commit, obtained once."""
    keep = _Keep(ctx, role)
    got = obtain()
    handed: list[Obtained | Unobtainable] = [got]

    def again(_position: int) -> Obtained | Unobtainable:
        # Only the first run paid for the artifact; the others found it made.
        return handed.pop() if handed else replace(got, fresh=False)

    return keep, Pipeline(again, ctx.executor, ctx.oracle, ctx.rules, keep, ctx.events,
                          ctx.hunt), got


Side = tuple[int, str, Callable[[], Obtained | Unobtainable], str]  # position, sha, obtain, role


class _Reference:
    """The parent's fresh runs, shared by both checks of a confirmation (the culprit beside
    it, then the revert): ``parent, culprit, parent, revert, parent``, the middle parent run
    standing beside both. ``clock`` orders every run of the confirmation."""

    def __init__(self, ctx: CulpritCheck, side: Side) -> None:
        self.ctx, self.side = ctx, side
        self.keep, self.pipe, self.got = _group(ctx, side[2], side[3])
        self.timed: list[paired.Timed] = []
        self.clock = 0

    def tick(self, keep: _Keep, into: list[paired.Timed]) -> None:
        """Time the run ``keep`` recorded last (a run without samples pairs with nothing)."""
        self.clock += 1
        samples = (keep.facts[-1].get("perf") or {}).get("samples") if keep.facts else None
        if samples:
            into.append(paired.Timed.of(float(self.clock), samples))

    def run(self) -> None:
        self.pipe.probe(self.side[0], self.side[1], gpu=self.ctx.gpu)
        self.tick(self.keep, self.timed)


Look = Callable[[Sequence[paired.Timed], Sequence[paired.Timed]], paired.Paired]


def _beside(ctx: CulpritCheck, ref: _Reference, test: Side, look: Look,
            cap: int) -> tuple[Seen, paired.Paired | None]:
    """A performance oracle's paired check of ``test`` beside the parent: one run of it
    between two of the parent's, again after each undecided ``look`` at the parent's and its
    runs (sequential, as the search, with the search's scale, so a clear change is decided by
    one fresh pair), up to ``cap`` pairs. None when either cannot be obtained."""
    keep_t, pipe_t, got_t = _group(ctx, test[2], test[3])
    if isinstance(ref.got, Unobtainable) or isinstance(got_t, Unobtainable):
        return keep_t.seen, None
    if not ref.keep.facts:
        ref.run()
    tests: list[paired.Timed] = []
    while True:
        pipe_t.probe(test[0], test[1], gpu=ctx.gpu)
        ref.tick(keep_t, tests)
        ref.run()
        got = look(ref.timed, tests)
        if got.verdict is not perf.PerfVerdict.UNDECIDED or len(keep_t.facts) >= cap:
            return keep_t.seen, got


def _confirm_paired(ctx: CulpritCheck, position: int, rule: paired.Rule) -> dict[str, Any]:
    """Confirmation of a performance culprit, paired: the culprit run beside its parent
    must be worse by more than the threshold (else "not reproducible"; undecided at the
    cap: "inconclusive"), and its revert on the bad endpoint beside the parent must not.
    The search lends its scale (``rule.spread``) and its pairs of the culprit and the parent
    (``rule.searched``), which count in the culprit's check only beside at least one fresh
    pair, while the fresh pairs agree with them and show the change on their own too
    (:mod:`bisector.core.perf_confirm`): the search chose the culprit from those pairs, so a
    slowdown that came and went there must not confirm itself."""
    cands = ctx.candidates
    # Twice a search's pairs: the confirmation is the claim, and a change at twice the
    # threshold on a box with a slow mode can take more than 32 fresh pairs to show.
    cap = 2 * sampling.perf_max_runs(ctx.oracle.meta.max_runs)
    ctx.events.note(f"confirming {cands[position][:12]}: the culprit beside its parent, one "
                    f"fresh pair at a time while undecided (up to {cap}), then its revert")
    pp = parent_at(ctx, position)
    parent = _Reference(ctx, (pp, cands[pp], lambda: ctx.source.obtain(pp), "parent"))
    culprit: Side = (position, cands[position], lambda: ctx.source.obtain(position), "culprit")
    claim = perf_confirm.Claim(rule, perf_confirm.lent(rule, position, pp))
    seen, got = _beside(ctx, parent, culprit, claim, cap)
    verdict = {perf.PerfVerdict.BAD: Verdict.BAD, perf.PerfVerdict.GOOD: Verdict.GOOD}.get(
        got.verdict if got else perf.PerfVerdict.UNDECIDED, Verdict.SKIP)
    status = {Verdict.BAD: Confirmation.CONFIRMED,
              Verdict.GOOD: Confirmation.NOT_REPRODUCIBLE}.get(verdict,
                                                               Confirmation.INCONCLUSIVE)
    out: dict[str, Any] = {
        "culprit": [{"run": r, "verdict": v, "reason": why} for r, v, why in seen],
        "parent": [{"run": r, "verdict": v, "reason": why} for r, v, why in parent.keep.seen],
        "culprit_verdict": verdict.value, "parent_verdict": Verdict.GOOD.value,
        "parent_sha": cands[pp], "judged_by": "paired", "pairs": got.pairs if got else 0,
        "change": None if got is None or got.change is None else round(got.change, 4),
        "p_value": got.p_value if got else None,
    }
    lent = claim.record()
    if lent is not None:  # the search's pairs of both: how many, and whether they counted
        out["search_pairs"] = lent
    revert = ctx.revert(cands[position], cands[-1])
    if revert is None:
        out["revert"] = dict(NO_REVERT)
    else:
        n = len(cands)
        reverted: Side = (n - 1, revert, lambda: ctx.source.obtain_commit(revert, n - 1),
                          "revert")
        seen, got = _beside(ctx, parent, reverted, lambda refs, tests: paired.judge_beside(
            refs, tests, rule, alpha_good=paired.REVERT_ALPHA), cap)
        said = {perf.PerfVerdict.BAD: Verdict.BAD, perf.PerfVerdict.GOOD: Verdict.GOOD}.get(
            got.verdict if got else perf.PerfVerdict.UNDECIDED, Verdict.SKIP)
        out["revert"] = {"applied": True, "sha": revert, "verdict": said.value,
                         "runs": [{"run": r, "verdict": v, "reason": why}
                                  for r, v, why in seen]}
        if status is Confirmation.CONFIRMED and said is Verdict.BAD:
            status = Confirmation.REVERT_DID_NOT_FIX
    # every parent run, the revert's check's too (the list above was made before it)
    out["parent"] = [{"run": r, "verdict": v, "reason": why} for r, v, why in parent.keep.seen]
    out["status"] = status.value
    return out


def _majority(seen: Seen) -> str:
    """The verdict most runs gave (skips left out); "skip" when none decided."""
    votes = [v for _, v, _ in seen if v != Verdict.SKIP.value]
    if not votes:
        return Verdict.SKIP.value
    bad = votes.count(Verdict.BAD.value)
    if 2 * bad == len(votes):
        return Verdict.SKIP.value
    return Verdict.BAD.value if 2 * bad > len(votes) else Verdict.GOOD.value


def confirm(ctx: CulpritCheck, position: int, judge: Judge | None = None,
            posterior: noisy.Posterior | None = None) -> dict[str, Any]:
    """Re-run the culprit at ``position`` and its parent, then the revert; the summary.

    ``judge`` decides a group of runs from their facts (a performance oracle's samples
    against the baseline); ``posterior`` (a flaky oracle's search) weighs the culprit's and
    parent's runs as evidence (:func:`weigh`); without either the group's majority verdict
    counts."""
    cands, times = ctx.candidates, sampling.confirm_runs(ctx.oracle.meta)
    judged_by = ("posterior" if posterior is not None else "paired"
                 if isinstance(judge, paired.Rule) else "samples" if judge else "verdicts")
    earlier = None if ctx.reconfirm else bisections.confirmed_before(
        ctx.store, oracle_sha256=ctx.key.oracle_sha256, env_fingerprint=ctx.key.env_fingerprint,
        culprit_sha=cands[position], judged_by=judged_by, exclude=ctx.bisection_id)
    if earlier is not None:
        # Same commit, same oracle bytes, same environment: the runs would be the same facts.
        ctx.events.note(f"{cands[position][:12]} was confirmed by bisection {earlier[0]} with "
                        f"this oracle and environment: reused, 0 new runs (--reconfirm runs "
                        f"it again)")
        return {**earlier[1], "reused_from": earlier[0]}
    if isinstance(judge, paired.Rule):
        return _confirm_paired(ctx, position, judge)
    pp = parent_at(ctx, position)
    first = (times, times) if posterior is None else owed(posterior.history, position, pp,
                                                          times)
    if first == (times, times):
        ctx.events.note(f"confirming {cands[position][:12]}: the culprit and its parent again"
                        f"{f', {times} runs each' if times > 1 else ''}, then its revert")
    else:
        ctx.events.note(f"confirming {cands[position][:12]}: the search's own runs of the "
                        f"culprit and its parent stand for {times} of each; {first[0]} and "
                        f"{first[1]} fresh, then its revert")
    # None: no fresh run was asked for (the search's own runs stood in).
    culprit, said_culprit = _runs(ctx, lambda: ctx.source.obtain(position), position,
                                  cands[position], first[0], judge, "culprit") \
        if first[0] else ([], None)
    parent, said_parent = _runs(ctx, lambda: ctx.source.obtain(pp), pp, cands[pp], first[1],
                                judge, "parent") if first[1] else ([], None)
    out: dict[str, Any] = {
        "culprit": [{"run": r, "verdict": v, "reason": why} for r, v, why in culprit],
        "parent": [{"run": r, "verdict": v, "reason": why} for r, v, why in parent],
        "culprit_verdict": said_culprit, "parent_verdict": said_parent,
        "parent_sha": cands[pp], "judged_by": judged_by,
    }
    if posterior is not None:
        # The search's own runs of each, which stood in for the first group's fresh ones:
        # (failed, runs), so a report can say what they were.
        out["from_search"] = {role: list(searched(posterior.history, p))
                              for role, p in (("culprit", position), ("parent", pp))}
        confidence = ctx.oracle.meta.confidence
        status, before, after = weigh(posterior, position, culprit, parent, confidence, pp)
        for _ in range(confirm_rounds(times) - 1):  # undecided: more runs, as a search would
            if status is not Confirmation.INCONCLUSIVE:
                break
            more_c, _ = _runs(ctx, lambda: ctx.source.obtain(position), position,
                              cands[position], times, None, "culprit")
            more_p, _ = _runs(ctx, lambda: ctx.source.obtain(pp), pp, cands[pp], times, None,
                              "parent")
            culprit, parent = culprit + more_c, parent + more_p
            status, _, after = weigh(posterior, position, culprit, parent, confidence, pp)
        out["culprit"] = [{"run": r, "verdict": v, "reason": why} for r, v, why in culprit]
        out["parent"] = [{"run": r, "verdict": v, "reason": why} for r, v, why in parent]
        out.update(probability_before=round(before, 6), probability_after=round(after, 6),
                   confidence=confidence)
    else:
        status = Confirmation.CONFIRMED
        if said_culprit == Verdict.GOOD.value or said_parent == Verdict.BAD.value:
            status = Confirmation.NOT_REPRODUCIBLE  # a fresh run said the opposite
        elif Verdict.SKIP.value in (said_culprit, said_parent):
            status = Confirmation.INCONCLUSIVE
    revert = ctx.revert(cands[position], cands[-1])
    if revert is None:
        out["revert"] = dict(NO_REVERT)
    else:
        n = len(cands)
        # A flaky oracle's revert is a vote of a few runs (one run is wrong a fifth of the time
        # at 20 % false failures, and a right culprit would read "the revert did not fix it").
        votes = defaults.NOISY_VOTE if posterior is not None else times
        seen, verdict = _runs(ctx, lambda: ctx.source.obtain_commit(revert, n - 1),
                              n - 1, revert, votes, judge, "revert")
        out["revert"] = {"applied": True, "sha": revert, "verdict": verdict,
                         "runs": [{"run": r, "verdict": v, "reason": why}
                                  for r, v, why in seen]}
        if status is Confirmation.CONFIRMED and verdict == Verdict.BAD.value:
            status = Confirmation.REVERT_DID_NOT_FIX
    out["status"] = status.value
    return out


def state_after(state: State, checked: dict[str, Any]) -> State:
    """The bisection's state once its culprit was checked: a culprit whose fresh runs said
    otherwise is ``not reproducible``, never ``done``; one that a flaky or performance oracle's
    fresh runs could not decide is ``inconclusive``. A deterministic oracle's skip on a re-run
    (a passing failure) leaves the answer as it was, with its warning."""
    status = Confirmation(checked["status"])
    if state is not State.DONE:
        return state
    if status is Confirmation.NOT_REPRODUCIBLE:
        return State.NOT_REPRODUCIBLE
    if status is Confirmation.INCONCLUSIVE and checked.get("judged_by") in ("paired",
                                                                            "posterior"):
        return State.INCONCLUSIVE
    return state


def warning(checked: dict[str, Any]) -> str | None:
    """The line a report shows when the culprit did not hold up (None when it did); its
    advice fits how the oracle was judged: a deterministic one that changed its mind should be
    marked flaky, a flaky one needs more evidence, a performance one a clearer margin."""
    status = Confirmation(checked["status"])
    how = checked.get("judged_by", "verdicts")
    if how == "posterior" and status is not Confirmation.CONFIRMED:
        moved = (f"fresh runs of the culprit and its parent moved its probability from "
                 f"{checked['probability_before']:.3f} to {checked['probability_after']:.3f}")
        if status is Confirmation.NOT_REPRODUCIBLE:
            return (f"{moved}: another commit is now as likely; the oracle is wrong more "
                    f"often than the rates used say, or the machine changed. Give the oracle "
                    f"its false-positive and false-negative rates, or raise its confidence "
                    f"(or max-runs, or repeats for a better rate estimate), and bisect again")
        if status is Confirmation.INCONCLUSIVE:
            return (f"{moved}, below the {checked['confidence']} asked for (or the culprit or "
                    f"its parent gave no answer): the answer stands on the search's runs; "
                    f"raise the oracle's confidence (or max-runs) and bisect again to be sure")
    if status is Confirmation.NOT_REPRODUCIBLE and how == "paired":
        return ("fresh runs of the culprit beside its parent were not worse by the threshold: "
                "the search's verdicts did not hold up (a change near the threshold, or a "
                "machine whose noise changed); raise the oracle's threshold or max-runs, or "
                "run `bisect check` on both commits")
    if status is Confirmation.INCONCLUSIVE and how == "paired":
        return ("the culprit beside its parent did not decide within the pairs allowed: the "
                "answer stands on the search's runs alone; raise the oracle's max-runs")
    if status is Confirmation.NOT_REPRODUCIBLE:
        if how == "samples":
            return ("the culprit or its parent was judged the other way on fresh samples: the "
                    "change is close to the threshold, or the machine's noise changed; raise "
                    "the oracle's threshold or the samples each run prints (or max-runs), or "
                    "run `bisect check` on both commits")
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
