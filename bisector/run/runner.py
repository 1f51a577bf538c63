"""Driving one stored bisection to its end: claim -> pick the next K commits -> dispatch -> finish.

Each round the pure search is asked for K split points (multisection), given every verdict
known for the candidates: this bisection's own probes and every reusable verdict any
bisection has stored under the same (oracle, environment) key. The K probes run at once, one
per slot (a GPU, or none), each through the same :class:`~bisector.run.pipeline.Pipeline`,
and each result is stored the moment it exists. Ctrl-C (or SIGTERM) kills every probe in
flight; none of them is recorded, so ``resume`` re-runs exactly those and, the search being
deterministic, reaches the same culprit.

With a :class:`~bisector.run.remote.Remote` (workers on a PostgreSQL store) the K probes of a
round are K queue jobs run by K workers instead of K threads here; this process stays the
coordinator: the lease, the search, the rounds and the answer are the same code.
"""

from __future__ import annotations

import math
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

from bisector.artifacts.provider import Obtained, Unobtainable
from bisector.base.errors import Cancelled, EndpointError, LeaseLost
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import State
from bisector.core.search import (
    Culprit,
    Probe,
    Problem,
    Step,
    Stop,
    Verdict,
    Window,
    next_step,
    remaining_estimate,
)
from bisector.core.verdict import Rules
from bisector.executors.base import Executor
from bisector.infra import cancel
from bisector.oracle.script import Oracle
from bisector.run import confirm
from bisector.run.lease import Lease
from bisector.run.pipeline import Pipeline, SampleRecorder, StoreRecorder
from bisector.run.remote import Remote, cancelled_message
from bisector.run.strategies import noisy as noisy_search
from bisector.run.strategies import perf as perf_search
from bisector.store import bisections, durations, verdicts
from bisector.store.db import Store
from bisector.store.records import BisectionRecord, RunRecord


class Source(Protocol):
    """Where a probe's torch comes from (the artifact provider), and what each costs."""

    def obtain(self, pos: int) -> Obtained | Unobtainable: ...
    def cost(self, pos: int) -> int: ...
    def obtain_commit(self, sha: str, near: int) -> Obtained | Unobtainable:
        """A commit outside the candidates (a culprit's revert), obtained like ``near``."""
        ...


@dataclass(frozen=True)
class Finished:
    """How a run ended (the record holds the culprit or window)."""

    record: BisectionRecord
    rounds: int  # search rounds this process ran (resume counts its own)


def stored_verdicts(store: Store, key: verdicts.Key, candidates: Sequence[str],
                    rules: Rules) -> dict[int, tuple[RunRecord, Verdict]]:
    """position -> (stored run, its verdict under ``rules``) for every reusable verdict stored
    under ``key`` for the candidates.

    A run seeds its search with all of them before its first probe, so they cost nothing;
    ``bisect plan`` calls this same function, so what it counts as free is what a run reuses.
    """
    position = {sha: i for i, sha in enumerate(candidates)}
    return {position[sha]: (run, rules.judge(run.outcome))
            for sha, run in verdicts.reusable(store, key, candidates).items()}


class Runner:
    def __init__(
        self,
        store: Store,
        record: BisectionRecord,
        candidates: list[str],
        oracle: Oracle,
        rules: Rules,
        source: Source,
        executor: Executor,
        *,
        slots: list[str | None] | None = None,
        events: Events | None = None,
        subject: Callable[[str], str] = lambda _sha: "",
        lease: Lease | None = None,
        confirm: bool = False,
        remote: Remote | None = None,
    ) -> None:
        self.store, self.record, self.candidates = store, record, candidates
        self.oracle, self.rules, self.source = oracle, rules, source
        self.slots = slots or [None]
        self.events: Events = events or QuietEvents()
        self.subject = subject
        self.lease = lease or Lease(store, record.id)
        self.key = verdicts.Key(record.oracle_sha256, record.env_fingerprint)
        # A flaky oracle's runs are samples: every probe runs and each run is kept.
        recorder = (SampleRecorder if oracle.meta.sampled else StoreRecorder)(
            store, record.id, self.key, self.lease.me)
        self.pipeline = Pipeline(source.obtain, executor, oracle, rules, recorder, self.events)
        self._seq = 0
        self.confirm = confirm
        # Set: each round's probes go to workers through a queue (``run/remote.py``).
        self.remote = remote
        # How a group of confirmation runs is judged (their facts in, a verdict out); None:
        # by the majority of their own verdicts. A performance search sets it.
        self.judge_runs: Callable[[list[dict[str, Any]]], str] | None = None

    @property
    def width(self) -> int:
        return len(self.slots)

    def run(self) -> Finished:
        cancel.reset()
        self.lease.acquire()
        try:
            return self._run()
        except cancel.Stopped:
            # Probes killed in this process because `bisect cancel` asked (seen by the
            # lease's heartbeat): nothing killed was recorded, `resume` runs them again.
            if self.lease.cancelled.is_set():
                raise Cancelled(cancelled_message(self.record.id)) from None
            raise
        finally:
            self.lease.release()  # a no-op once finished: the owner is already cleared

    def _run(self) -> Finished:
        if self.remote is not None:
            self.remote.settle(self)
        rec = bisections.get(self.store, self.record.id)
        in_flight = rec.in_flight or {}
        round_ = max(verdicts.last_round(self.store, rec.id), int(in_flight.get("round", 0)))
        ran = 0
        if self.oracle.meta.performance:
            return perf_search.run(self)
        if self.oracle.meta.noisy:
            return noisy_search.run(self)
        while True:
            self.check_lease()
            known, adopted = self.known()
            # Probes of a round that was stopped (Ctrl-C, kill -9) and never recorded are
            # run first, as that round: exactly what was in flight, nothing else.
            missing = tuple(p for p in in_flight.get("positions", ()) if p not in known)
            this_round = int(in_flight.get("round", 0)) if missing else round_ + 1
            in_flight = {}
            if missing:
                positions = missing
            else:
                step = next_step(len(self.candidates), known, width=self.width,
                                 cost=self.source.cost if self.width == 1 else None)
                if not isinstance(step, Probe):
                    self.adopt(adopted, None)
                    return Finished(self.finish(step), ran)
                positions = step.positions
            round_ = max(round_, this_round)
            self.adopt(adopted, this_round)
            if not bisections.set_in_flight(self.store, rec.id, me=self.lease.me,
                                            round_=this_round, positions=positions):
                raise LeaseLost(f"bisection {rec.id} was taken over by another process")
            ran += 1
            self.events.round_start(this_round, self.width,
                                    remaining_estimate(len(self.candidates), known))
            self.dispatch(positions, this_round, known)

    # -- verdicts --------------------------------------------------------------------------

    def known(self) -> tuple[dict[int, Verdict], list[tuple[verdicts.Adopted, str]]]:
        """This bisection's probes plus every reusable verdict stored for its candidates, and
        the verdicts judged elsewhere that this bisection has not logged yet (a pure read)."""
        own = {pos: Verdict(v) for pos, v in
               verdicts.probed_positions(self.store, self.record.id).items()}
        adopted = []
        for pos, (run, v) in sorted(stored_verdicts(self.store, self.key, self.candidates,
                                                    self.rules).items()):
            if pos not in own:
                adopted.append((verdicts.Adopted(pos, self.candidates[pos], run.id, v.value),
                                run.reason))
                own[pos] = v
        return own, adopted

    def adopt(self, adopted: list[tuple[verdicts.Adopted, str]], round_: int | None) -> None:
        """Log verdicts judged elsewhere as reused probes, labelled with the round they
        informed, so ``bisect log`` shows them."""
        if not verdicts.adopt(self.store, self.record.id, self.lease.me,
                              [a for a, _ in adopted], round_):
            raise LeaseLost(f"bisection {self.record.id} was taken over by another process")
        for a, reason in adopted:
            self.events.probe_done(a.position, a.commit_sha, Verdict(a.verdict), reason, 0.0,
                                   True)

    def time_left(self, left: int) -> float | None:
        """Seconds the search should still take: ``left`` probes, ``width`` at a time (a round
        of K probes cuts the window K+1 ways, worth log2(K+1) single probes), each at the mean
        paid-for probe measured on this repository. None when nothing was measured yet."""
        per = durations.probe_seconds(self.store, self.record.repo_path)
        if per is None or left <= 0:
            return None
        return math.ceil(left / math.log2(self.width + 1)) * per.mean_s

    # -- probes ----------------------------------------------------------------------------

    def dispatch(self, positions: tuple[int, ...], round_: int,
                  known: dict[int, Verdict]) -> None:
        left = remaining_estimate(len(self.candidates), known)
        eta = self.time_left(left)
        for pos in positions:
            self._seq += 1
            sha = self.candidates[pos]
            self.events.probe_start(self._seq, pos, sha, self.subject(sha), left, eta)
        if self.remote is not None:
            self.remote.run(self, positions, round_)
            return
        if self.width == 1:
            for pos in positions:  # the endpoints with one slot: one after the other
                self.pipeline.probe(pos, self.candidates[pos], gpu=self.slots[0],
                                    round_=round_)
            return
        free: queue.Queue[str | None] = queue.Queue()
        for slot in self.slots:
            free.put(slot)

        def work(pos: int) -> None:
            gpu = free.get()
            try:
                self.pipeline.probe(pos, self.candidates[pos], gpu=gpu, round_=round_)
            finally:
                free.put(gpu)

        with ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="probe") as pool:
            futures = [pool.submit(work, pos) for pos in positions]
            try:
                done, _ = wait(futures, return_when=FIRST_EXCEPTION)
                for f in done:
                    f.result()  # a probe that failed (not a verdict: a bug, a lost lease)
            except BaseException:
                cancel.stop_all()  # Ctrl-C or a failure: kill what is still in flight
                wait(futures)
                raise

    # -- the answer ------------------------------------------------------------------------

    def finish(self, step: Step, extra: dict[str, object] | None = None) -> BisectionRecord:
        b, cands = self.record, self.candidates
        culprit = None
        if isinstance(step, Culprit):
            state, culprit = State.DONE, cands[step.position]
            result: dict[str, object] = {"kind": "culprit", "position": step.position}
            message = None
            if self.confirm:
                result["confirmation"] = checked = confirm.confirm(self, step.position,
                                                                   self.judge_runs)
                message = confirm.warning(checked)
        elif isinstance(step, Window):
            state = State.AMBIGUOUS
            result = {"kind": "window", "suspects": cands[step.first:step.last + 1]}
            message = (f"skipped commits hide the first {self.rules.terms[1]} commit: it is "
                       f"one of {step.last - step.first + 1} suspects")
        else:
            assert isinstance(step, Stop)
            state = State.FAILED
            result = {"kind": "stop", "problem": step.problem.value, "position": step.position}
            message = self.stop_message(step)
        result.update(extra or {})
        if not bisections.finish(self.store, b.id, me=self.lease.me, state=state,
                                 result=result, culprit_sha=culprit, message=message):
            raise LeaseLost(f"bisection {b.id} was taken over by another process before it "
                            f"finished here")
        self.lease.stop_beating()
        if isinstance(step, Stop):
            raise EndpointError(message or "")
        return bisections.get(self.store, b.id)

    def check_lease(self) -> None:
        """Stop if the lease was lost, or if `bisect cancel` asked (between rounds)."""
        if self.lease.lost.is_set():
            raise LeaseLost(f"bisection {self.record.id} was taken over by another process; "
                            f"this one stops")
        if self.lease.cancelled.is_set() or bisections.cancel_requested(self.store,
                                                                          self.record.id):
            raise Cancelled(cancelled_message(self.record.id))

    def run_round(self, round_: int, positions: tuple[int, ...], left: int) -> None:
        """Note the round as in flight (the lease must still be ours), then run it: the
        sampling loops (flaky, performance) drive their rounds through this."""
        if not bisections.set_in_flight(self.store, self.record.id, me=self.lease.me,
                                        round_=round_, positions=positions):
            raise LeaseLost(f"bisection {self.record.id} was taken over by another process")
        self.events.round_start(round_, self.width, left)
        self.dispatch(positions, round_, {})

    def revert(self, culprit: str, onto: str) -> str | None:
        """The culprit's revert on the bad endpoint, made in the clone (None: not clean)."""
        return confirm.make_revert(self.record.repo_path, culprit, onto)

    def stop_message(self, step: Stop) -> str:
        b = self.record
        sha = self.candidates[step.position][:12]
        old, new = self.rules.terms
        merge_base = self.candidates[0] != b.good_sha
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
