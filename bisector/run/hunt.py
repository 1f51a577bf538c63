"""The failure hunted: a probe that fails unlike the bad endpoint is no evidence of this bug.

git's rule is that every failure is bad. Measured (issue 31): commits 18-23 of a 40-commit
history break an import (a SyntaxError, fixed at 24) and the regression hunted (an
AssertionError) lands at 31; under git's rule the search names a commit inside the SyntaxError
window. So by default a failing probe is judged against the failure the bad endpoint showed:
the same failure line (:func:`bisector.core.signature.same_failure`: numbers, addresses and
the folders of each run normalised) is bad, another one is a skip whose reason says
``fails differently: <its failure line>``. ``--any-failure`` gives git's rule back.

Why the judgement belongs to the bisection and not to the run or the oracle's identity:

- Runs stay raw facts, stored as before under (commit, oracle, environment), with their
  failure line recorded beside their output (``facts["failure"]``, read from the whole
  output). Every bisection reuses them whatever rule it judges with, and judges them itself:
  what ``probe.verdict`` keeps is this bisection's verdict of the run, so a verdict judged
  under one rule is never reused under another (a bisection with ``--any-failure`` reads the
  same runs and calls the SyntaxError commits bad).
- A signature derived from the bad endpoint and bound into the oracle's identity, as
  ``--match`` is, would change the key the runs are stored under once the bad endpoint has
  run, under the bisection's feet, and make its own endpoint a run of another key.
- The failure hunted is read from the stored run at the endpoint that shows the bug (the bad
  endpoint; the good one, still broken, under ``--find-fix``): this bisection's own probe
  there, else the key's reusable run. The same store gives the same failure, so ``resume``
  and workers judge exactly as the first run did, and the answer is the same.

The endpoints themselves are judged by their exit code: the one showing the bug defines the
failure, and the other one failing at all stops the search whatever it printed (its message
names what it said). Verdicts of stored runs at other positions are read only once the
failure hunted is known (:meth:`Hunt.known`), so none is adopted under the wrong rule.

The rule is off (``hunt_for`` gives None) where another one already says what the bug is:
``--match`` or the oracle's ``match`` (an explicit signature wins), ``--any-failure``,
``--manual`` (a person judges), performance oracles (judged by samples), flaky oracles (their
search weighs every run by exit code), and ``--regress success`` (the bug is a run that
passes: there is no failure to compare). A bad endpoint whose output has no failure line (a
bare ``exit 1``) leaves the plain exit-code rule too.
"""

from __future__ import annotations

from collections.abc import Sequence

from bisector.core.search import Verdict
from bisector.core.signature import LONGEST, failure_of, last_line, same_failure
from bisector.core.verdict import Outcome, Polarity, Rules
from bisector.oracle.script import Oracle
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import RunRecord

DIFFERENTLY = "fails differently: "  # the reason's start: reports find these skips by it


class Hunt:
    """One bisection's judge of failing runs against the failure its bad endpoint showed."""

    def __init__(self, store: Store, key: run_store.Key, candidates: Sequence[str],
                 rules: Rules, bisection_id: int | None = None) -> None:
        self.store, self.key, self.candidates = store, key, candidates
        self.rules, self.bisection_id = rules, bisection_id
        # Read once found: (the failure line hunted, or None for "none: exit codes judge").
        self._found: tuple[str | None] | None = None

    @property
    def anchor(self) -> int:
        """The endpoint whose failure is the one hunted: where the bug shows."""
        return 0 if self.rules.find_fix else len(self.candidates) - 1

    def _anchor_run(self) -> RunRecord | None:
        """The run that decided the anchor: this bisection's first there that was not a skip
        (an install that failed is retried, and says nothing of the failure), else the key's
        reusable run; None while there is none."""
        runs = ([p.run for p in run_store.probes(self.store, self.bisection_id)
                 if p.position == self.anchor] if self.bisection_id is not None else [])
        sha = self.candidates[self.anchor]
        stored = run_store.reusable(self.store, self.key, [sha]).get(sha)
        return next((r for r in [*runs, stored] if r is not None
                     and r.outcome is not Outcome.SKIP), None)

    def failure(self) -> str | None:
        """The failure line hunted; None while the anchor has no run, or when its run showed
        no failure line (then exit codes judge, as git does)."""
        if self._found is None:
            run = self._anchor_run()
            if run is None:
                return None
            line = (failure_of(run.failure, run.output_tail)
                    if run.outcome is Outcome.FAIL else None)
            self._found = (line,)
        return self._found[0]

    def known(self) -> bool:
        """Whether the endpoint showing the bug has a run: the rule is settled from then on."""
        self.failure()
        return self._found is not None

    def judge(self, position: int, outcome: Outcome, failure: str | None,
              output_tail: str = "") -> tuple[Verdict, str | None]:
        """The verdict of a run at ``position`` and, when it fails unlike the failure hunted,
        the reason of the skip it is instead."""
        verdict = self.rules.judge(outcome)
        if outcome is not Outcome.FAIL or position in (0, len(self.candidates) - 1):
            return verdict, None
        hunted = self.failure()
        if hunted is None or same_failure(hunted, failure):
            return verdict, None
        return Verdict.SKIP, DIFFERENTLY + (failure or last_line(output_tail))[:LONGEST]

    def judge_run(self, position: int, run: RunRecord) -> tuple[Verdict, str | None]:
        """:meth:`judge` of a stored run."""
        return self.judge(position, run.outcome, failure_of(run.failure, run.output_tail),
                          run.output_tail)


def hunt_for(store: Store, key: run_store.Key, candidates: Sequence[str], rules: Rules,
             oracle: Oracle, *, any_failure: bool, manual: bool = False,
             bisection_id: int | None = None) -> Hunt | None:
    """The judge of failing runs a bisection uses, or None where exit codes judge alone
    (see the module's docstring for each case)."""
    if (any_failure or manual or oracle.match is not None or oracle.meta.match is not None
            or oracle.meta.sampled or rules.polarity is not Polarity.FAILURE):
        return None
    return Hunt(store, key, candidates, rules, bisection_id)


def judged(hunt: Hunt | None, rules: Rules, position: int,
           run: RunRecord) -> tuple[Verdict, str | None]:
    """A stored run's verdict for one bisection: its hunt's, else its rules' alone."""
    if hunt is None:
        return rules.judge(run.outcome), None
    return hunt.judge_run(position, run)
