"""What a search strategy is: the runner's one loop asks it for the next round or the answer.

The runner (:mod:`bisector.run.runner`) owns everything a bisection does whatever its oracle:
the lease, logging verdicts judged elsewhere, running a round's probes on K slots (threads or
workers), confirmation and the finished record. What differs between a deterministic, a flaky
and a performance oracle is only *which commits to run next* and *what the answer is*; that is
a :class:`Strategy`. A strategy reads the store through the :class:`View` it is given and never
sees the runner, so the variants cannot reach into the loop (mozregression's handlers are
handed to its one ``_bisect`` loop the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bisector.base.kinds import State
from bisector.core import noisy
from bisector.core.prior import Prior
from bisector.core.search import Culprit, Problem, Step, Stop, Window
from bisector.core.verdict import Rules
from bisector.oracle.script import OracleMeta
from bisector.run.prior import FailurePrior
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import BisectionRecord

# How confirmation judges a group of fresh runs from their facts (a verdict's value out);
# None: by the majority of their own verdicts.
Judge = Callable[[list[dict[str, Any]]], str]
# Verdicts judged elsewhere that this bisection logs as reused probes, with their reasons.
Adopted = list[tuple[run_store.Adopted, str]]


@dataclass(frozen=True)
class View:
    """What a strategy may know of the bisection it serves (read-only)."""

    store: Store
    record: BisectionRecord
    candidates: Sequence[str]
    key: run_store.Key
    rules: Rules
    meta: OracleMeta
    width: int  # probes a round may hold (slots: GPUs, or workers)
    cost: Callable[[int], int] | None = None  # the provider's cost rank, for cheap split points
    prior: FailurePrior | None = None  # the prior from the failure (run/prior.py); None: plain

    @property
    def n(self) -> int:
        return len(self.candidates)


@dataclass(frozen=True)
class Round:
    """Run these positions next, as round ``number``."""

    number: int
    positions: tuple[int, ...]
    left: int  # about how many probes the search still needs (for progress and the ETA)


@dataclass(frozen=True)
class Answer:
    """How the bisection ends. ``culprit`` (a position) is confirmed by the runner when asked;
    ``judge`` and ``posterior`` say how confirmation weighs its fresh runs. ``stop``: the
    endpoints failed, the message says why and the run exits with it."""

    state: State
    result: dict[str, object]
    message: str | None = None
    culprit: int | None = None
    stop: bool = False
    judge: Judge | None = None
    posterior: noisy.Posterior | None = None


@dataclass(frozen=True)
class Decision:
    """A strategy's reply: the verdicts it found judged elsewhere (logged with the round they
    informed), then the next round or the answer."""

    then: Round | Answer
    adopted: Adopted = field(default_factory=list)
    adopted_round: int | None = None


class Strategy(Protocol):
    """Asked once per round; the same evidence gives the same reply, so resume needs nothing
    special."""

    def decide(self) -> Decision: ...


def prior_for(view: View, ready: bool) -> Prior | None:
    """The prior the search splits, once ``ready`` (the bad endpoint has shown the failure:
    the prior is read from its run); None before, and for a plain search."""
    if view.prior is None or not ready:
        return None
    info = view.prior.get(view.store, view.key, view.candidates, view.rules)
    return info.prior if info is not None else None


def answer_for(view: View, step: Step, extra: dict[str, object] | None = None,
               judge: Judge | None = None) -> Answer:
    """The answer of a search that ended in a :mod:`bisector.core.search` step."""
    cands = view.candidates
    if isinstance(step, Culprit):
        result: dict[str, object] = {"kind": "culprit", "position": step.position}
        return Answer(State.DONE, {**result, **(extra or {})}, culprit=step.position,
                      judge=judge)
    if isinstance(step, Window):
        result = {"kind": "window", "suspects": list(cands[step.first:step.last + 1])}
        return Answer(State.AMBIGUOUS, {**result, **(extra or {})},
                      f"skipped commits hide the first {view.rules.terms[1]} commit: it is "
                      f"one of {step.last - step.first + 1} suspects")
    assert isinstance(step, Stop)
    result = {"kind": "stop", "problem": step.problem.value, "position": step.position}
    return Answer(State.FAILED, {**result, **(extra or {})}, stop_message(view, step),
                  stop=True)


def stop_message(view: View, step: Stop) -> str:
    """Why the search cannot start, and what to do about it."""
    b = view.record
    sha = view.candidates[step.position][:12]
    old, new = view.rules.terms
    merge_base = view.candidates[0] != b.good_sha
    good_desc = "the merge-base of your refs" if merge_base else f"{old} {b.good_ref}"
    if step.problem is Problem.GOOD_IS_BAD:
        return (f"{good_desc} ({sha}) is already {new}: the change is older; "
                f"pick an older --good")
    if step.problem is Problem.BAD_IS_GOOD:
        return (f"{new} {b.bad_ref} ({sha}) is {old} with this oracle: check that the "
                f"oracle reproduces there (bisect check), or use --find-fix / --regress")
    if step.problem is Problem.GOOD_UNTESTABLE:
        return (f"the {old} endpoint {sha} could not be tested (see `bisect show "
                f"{b.id}`): fix the cause or pick another --good")
    if step.problem is Problem.BAD_UNTESTABLE:
        return (f"the {new} endpoint {sha} could not be tested (see `bisect show "
                f"{b.id}`): fix the cause or pick another --bad")
    return (f"commit {sha} is {new} but a newer commit is {old}: the oracle is flaky or "
            f"the behaviour comes and goes; make the oracle deterministic (run `bisect "
            f"check` on both commits a few times) or narrow the range")


def is_confirmation(facts: dict[str, Any]) -> bool:
    """Whether a stored run was a confirmation run (left out of every search's evidence: it
    checks an answer, it is no evidence for one)."""
    return bool(facts.get("confirmation"))
