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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from bisector.base import escape, redact
from bisector.base.kinds import State
from bisector.core import noisy, paired
from bisector.core.prior import Prior
from bisector.core.search import Culprit, Problem, Step, Stop, Verdict, Window
from bisector.core.verdict import Rules
from bisector.oracle.script import OracleMeta
from bisector.run.hunt import Hunt
from bisector.run.prior import FailurePrior
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import BisectionRecord

_V = TypeVar("_V")
# How confirmation judges a group of fresh runs from their facts (a verdict's value out), or
# the paired rule of a performance oracle (the culprit run beside its parent); None: by the
# majority of their own verdicts.
Judge = Callable[[list[dict[str, Any]]], str] | paired.Rule
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
    hunt: Hunt | None = None  # the judge of failing runs (run/hunt.py); None: exit codes
    # Where ``candidates[0]`` sits among the bisection's stored positions: 0 for the
    # first-parent walk, past its end for the search inside a merge (run/into_merge.py), whose
    # probes are stored at ``offset + i``. A strategy speaks of ``candidates``' own indexes.
    offset: int = 0
    # Verdicts known without a run (a commit with the merge's own tree), by own index.
    implied: Mapping[int, Verdict] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.candidates)

    def mine(self, stored: Mapping[int, _V]) -> dict[int, _V]:
        """Stored positions -> this view's own indexes, those of other searches left out."""
        return {p - self.offset: x for p, x in stored.items()
                if self.offset <= p < self.offset + self.n}


@dataclass(frozen=True)
class Round:
    """Run these positions next, as round ``number``."""

    number: int
    positions: tuple[int, ...]
    left: int  # about how many probes the search still needs (for progress and the ETA)


@dataclass(frozen=True)
class Conclusion:
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

    then: Round | Conclusion
    adopted: Adopted = field(default_factory=list)
    adopted_round: int | None = None


class Strategy(Protocol):
    """Asked once per round; the same evidence gives the same reply, so resume needs nothing
    special."""

    def decide(self) -> Decision: ...

    def ahead(self, r: Round) -> list[tuple[int, float]]:
        """The positions worth preparing while round ``r`` runs (``run/prefetch.py``), each
        with the probability it is probed soon, most likely first; never a decision."""
        ...


def in_round_later(view: View, r: Round) -> list[tuple[int, float]]:
    """The positions of round ``r`` that wait for a free slot (the two endpoints with one
    GPU): certain to be probed, after the first ``width``."""
    return [(p, 1.0) for p in r.positions[view.width:]]


def prior_for(view: View, ready: bool) -> Prior | None:
    """The prior the search splits, once ``ready`` (the bad endpoint has shown the failure:
    the prior is read from its run); None before, and for a plain search."""
    if view.prior is None or not ready:
        return None
    info = view.prior.get(view.store, view.key, view.candidates, view.rules)
    return info.prior if info is not None else None


def answer_for(view: View, step: Step, extra: dict[str, object] | None = None,
               judge: Judge | None = None) -> Conclusion:
    """The answer of a search that ended in a :mod:`bisector.core.search` step."""
    cands = view.candidates
    if isinstance(step, Culprit):
        result: dict[str, object] = {"kind": "culprit", "position": step.position}
        return Conclusion(State.DONE, {**result, **(extra or {})}, culprit=step.position,
                      judge=judge)
    if isinstance(step, Window):
        result = {"kind": "window", "suspects": list(cands[step.first:step.last + 1])}
        return Conclusion(State.AMBIGUOUS, {**result, **(extra or {})},
                      f"skipped commits hide the first {view.rules.terms[1]} commit: it is "
                      f"one of {step.last - step.first + 1} suspects")
    assert isinstance(step, Stop)
    result = {"kind": "stop", "problem": step.problem.value, "position": step.position}
    return Conclusion(State.FAILED, {**result, **(extra or {})}, stop_message(view, step),
                  stop=True)


# What a run prints when the oracle could not start what it tests: a program or module that is
# not there (the shell's 127, Python's import error, exec's missing file).
_MISSING = ("exit 127", "exit 126", "command not found", "No module named",
            "No such file or directory", "cannot execute")


def _missing(said: str) -> bool:
    return any(words in said for words in _MISSING)


def stop_message(view: View, step: Stop) -> str:
    """Why the search cannot start, and what to do about it."""
    b = view.record
    sha = view.candidates[step.position][:12]
    old, new = view.rules.terms
    merge_base = view.candidates[0] != b.good_sha
    good_desc = "the merge-base of your refs" if merge_base else f"{old} {b.good_ref}"
    if step.problem is Problem.GOOD_IS_BAD:
        # What it said, so a failure of the oracle itself (an import missing at both ends)
        # is not taken for an older change.
        said = _last_line(view, step.position)
        if _missing(said):
            return (f"{good_desc} ({sha}) fails before it tests anything ({said}): a program "
                    f"or module the oracle needs is missing here, not an older change; install "
                    f"it (a command oracle takes --dependency) and check with bisect check "
                    f"--commit {sha}")
        return (f"{good_desc} ({sha}) is already {new}{f' ({said})' if said else ''}: if "
                f"that is the failure you hunt, the change is older: pick an older --good; "
                f"if not, fix the oracle (bisect check --commit {sha})")
    if step.problem is Problem.BAD_IS_GOOD:
        return (f"{new} {b.bad_ref} ({sha}) is {old} with this oracle: check that the "
                f"oracle reproduces there (bisect check), or use --find-fix / --regress")
    if step.problem in (Problem.GOOD_UNTESTABLE, Problem.BAD_UNTESTABLE):
        side, flag = (old, "--good") if step.problem is Problem.GOOD_UNTESTABLE else \
            (new, "--bad")
        why = _reason(view, step.position)
        # No "see bisect show ID": this message is stored and shown by that very command;
        # the CLI that started the run points there (cli/running.py).
        return (f"the {side} endpoint {sha} could not be tested{f': {why}' if why else ''}: "
                f"fix the cause or pick another {flag}")
    return (f"commit {sha} is {new} but a newer commit is {old}: the oracle is flaky or "
            f"the behaviour comes and goes; make the oracle deterministic (run `bisect "
            f"check` on both commits a few times) or narrow the range")


SAID_CHARS = 200  # of a run's reason or last output line, in a one-line message


def _reason(view: View, position: int) -> str:
    """Why the newest probe at ``position`` was skipped, on one line."""
    at = [p for p in run_store.probes(view.store, view.record.id) if p.position == position]
    return _short(at[-1].run.reason) if at else ""


def _last_line(view: View, position: int) -> str:
    """The newest run's exit and last line of output at ``position``, on one line."""
    runs = run_store.outputs(view.store, view.key, view.candidates[position])
    if not runs:
        return ""
    lines = [x.strip() for x in runs[0].output_tail.splitlines() if x.strip()]
    code = _reason(view, position)
    last = lines[-1] if lines else ""
    # A manual answer's output is its reason ("judged by hand: ..."): said once, not twice.
    return _short("; ".join(dict.fromkeys(x for x in (code, last) if x)))


def _short(text: str) -> str:
    # Redacted whole, before the cut: a token cut in two would match no pattern.
    one = escape.line(" ".join(redact.text(text).split()))
    return one if len(one) <= SAID_CHARS else one[:SAID_CHARS - 3] + "..."


def is_confirmation(facts: dict[str, Any]) -> bool:
    """Whether a stored run was a confirmation run (left out of every search's evidence: it
    checks an answer, it is no evidence for one)."""
    return bool(facts.get("confirmation"))
