"""Driving one stored bisection to its end: one loop over a search strategy.

Each round the loop checks the lease, asks the :class:`~bisector.run.strategies.base.Strategy`
(plain, noisy or performance: the oracle's metadata picks) for the next positions or the
answer, logs the verdicts it found judged elsewhere, and runs the round: K probes at once, one
per slot (a GPU, or none), each through the same :class:`~bisector.run.pipeline.Pipeline`, each
result stored the moment it exists. Ctrl-C (or SIGTERM) kills every probe in flight; none of
them is recorded, so ``resume`` re-runs exactly those and, the search being deterministic given
its evidence, reaches the same answer. The answer is then confirmed (when asked) and written
(:mod:`bisector.run.ending`).

The loop's side jobs live with what they serve: the search inside a merge the walk answered
(:class:`~bisector.run.into_merge.IntoMerge`), ``back`` at a manual prompt
(:func:`~bisector.run.manual.take_back`), verdicts judged elsewhere logged as reused probes
(:func:`~bisector.run.adopting.adopt`), a round's threads on this box
(:func:`~bisector.run.slots.run_here`), what follows the answer
(:class:`~bisector.run.ending.Ending`) and the clone's git (a
:class:`~bisector.project.revert.Clone`, handed in with the :class:`Judging`).

With a :class:`~bisector.run.remote.Workers` (workers on a PostgreSQL store) the K probes of a
round are K queue jobs run by K workers instead of K threads here; this process stays the
coordinator: the lease, the search, the rounds and the answer are the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bisector.base.errors import Cancelled, LeaseLost
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import State
from bisector.infra import cancel
from bisector.oracle.manual import TakeBack
from bisector.project.revert import Clone, GitClone
from bisector.run import ending, slots
from bisector.run.adopting import adopt
from bisector.run.into_merge import IntoMerge
from bisector.run.lease import Lease
from bisector.run.manual import take_back
from bisector.run.opened import Opened
from bisector.run.prefetch import Prefetcher
from bisector.run.remote import Workers, cancelled_message
from bisector.run.strategies.base import Conclusion, Round, View
from bisector.run.wiring import Judging, Means
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.db import Store, connection_lost
from bisector.store.records import BisectionRecord


@dataclass(frozen=True)
class Finished:
    """How a run ended (the record holds the culprit or window)."""

    record: BisectionRecord
    rounds: int  # search rounds this process ran (resume counts its own)


class Runner:
    """One bisection's coordinator: the lease, the loop, the rounds and the answer."""

    def __init__(self, store: Store, record: BisectionRecord, candidates: list[str],
                 judging: Judging, means: Means, *, events: Events | None = None,
                 subject: Callable[[str], str] = lambda _sha: "",
                 lease: Lease | None = None) -> None:
        # The walk's candidates, then (once stored) those of the search inside a merge.
        self.store, self.record, self.candidates = store, record, candidates
        self.judging, self.means = judging, means
        oracle, rules, source = judging.oracle, judging.rules, means.source
        self.oracle, self.rules, self.source = oracle, rules, source
        self.slots = list(means.slots) or [None]
        self.events: Events = events or QuietEvents()
        self.subject = subject
        self.clone: Clone = judging.clone or GitClone(record.repo_path)  # confirmation's git
        self.lease = lease or Lease(store, record.id)
        self.key = run_store.Key(record.oracle_sha256, record.env_fingerprint)
        self.prefetcher: Prefetcher | None
        self.prefetcher, self.pipeline = slots.probing(store, record.id, self.key,
                                                       self.lease.me, judging, means,
                                                       self.events)
        self._seq = run_store.last_seq(store, record.id)  # a resumed run counts on
        # Set: each round's probes go to workers through a queue (``run/remote.py``).
        self.workers = means.workers
        walk = candidates[:record.n_candidates]  # judging.hunt: one judge of failing runs
        self.view = self.walk_view = View(store, record, walk, self.key, rules, oracle.meta,
                                          self.width, source.cost if self.width == 1 else None,
                                          judging.prior, judging.hunt)
        self.strategy = judging.strategy(self.view)
        # A first-parent answer that is a merge: searched inside (run/into_merge.py).
        n = record.n_candidates
        self.merge = IntoMerge(self.walk_view, judging.into_merge, candidates, record.repo_path,
                               lambda shas: bisections.extend(store, record.id, me=self.me,
                                                              start=n, shas=shas),
                               self.events.note)

    @classmethod
    def of(cls, opened: Opened, remote: Workers | None = None, width: int | None = None
           ) -> Runner:
        """The coordinator of an opened bisection (run/opened.py); with ``remote``, its rounds
        of ``width`` probes go to workers instead of this process."""
        return cls(opened.store, opened.record, opened.candidates, opened.judging(),
                   opened.means(remote, width), events=opened.events, subject=opened.subject)

    @property
    def width(self) -> int:
        return len(self.slots)

    def run(self) -> Finished:
        cancel.reset()
        self.lease.acquire()
        ended = State.INTERRUPTED
        try:
            while True:
                try:
                    return self._run()
                except Exception as e:
                    if not connection_lost(e):
                        raise
                    self.lease.regain(e, self.events.note)
        except (cancel.Stopped, Cancelled):
            # Probes killed in this process because `bisect cancel` asked (seen by the
            # lease's cancel watcher): nothing killed was recorded, `resume` runs them again.
            if not self.lease.cancel_asked():
                raise
            ended = State.CANCELLED
            raise Cancelled(cancelled_message(self.record.id)) from None
        finally:
            if self.prefetcher is not None:
                self.prefetcher.close()
            try:  # a no-op once finished: the owner is already cleared
                self.lease.release(ended)
            except Exception as e:
                if not connection_lost(e):
                    raise  # a store that stayed away: the lease goes stale with this process

    def _run(self) -> Finished:
        self.events.terms(*self.rules.terms)
        if self.workers is not None:
            self.workers.settle(self)
        ran = 0
        while True:
            self.check_lease()
            decision = self.strategy.decide()
            adopt(self.store, self.record.id, self.me, decision.adopted,
                  decision.adopted_round, self.events)
            if isinstance(decision.then, Conclusion):
                if self.merge.enter(decision.then):  # the walk answered a merge: search it
                    self.search(self.merge.view)
                    continue
                answer = self.merge.answer(decision.then, self.rules.terms)
                return Finished(self.finish(answer), ran)
            ran += 1
            try:
                self.run_round(decision.then)
            except TakeBack:  # `back` at a manual prompt: the last answer is asked again
                taken = take_back(self.store, self.record.id, self.me, self.events)
                if taken is not None:
                    self.merge.taken_back(taken)
                self.search(self.merge.view)

    def search(self, view: View) -> None:
        """Search ``view`` from what is stored (a fresh strategy reads it as ``resume``)."""
        self.view = view
        self.strategy = self.judging.strategy(view)

    # -- the answer ------------------------------------------------------------------------

    def finish(self, answer: Conclusion) -> BisectionRecord:
        """Confirm, write and follow the answer (run/ending.py)."""
        if self.prefetcher is not None:  # what the search would have probed next: not needed
            self.prefetcher.close()
        return ending.finish(self.answering(), answer, self.walk_view, self.lease)

    def answering(self) -> ending.Ending:
        """What follows the answer needs of this bisection (read when it comes)."""
        return ending.Ending(self.store, self.record, self.judging, self.source,
                             self.pipeline.executor, self.events, self.slots[0], self.width,
                             self.workers is None, self.clone)

    def check_lease(self) -> None:
        self.lease.check()

    def run_round(self, r: Round) -> None:
        """Note the round as in flight (the lease must still be ours), then run its probes:
        on workers through the queue, else on this box's slots."""
        if not bisections.set_in_flight(self.store, self.record.id, me=self.lease.me,
                                        round_=r.number, positions=r.positions):
            raise LeaseLost(f"bisection {self.record.id} was taken over by another process")
        self.events.round_start(r.number, self.width, r.left)
        if self.prefetcher is not None:
            self.prefetcher.ahead(self.strategy.ahead(r), keep=r.positions)
        eta = slots.time_left(self.store, self.record, self.width, r.left)
        for pos in r.positions:
            self._seq += 1
            sha = self.candidates[pos]
            self.events.probe_start(self._seq, pos, sha, self.subject(sha), r.left, eta)
        if self.workers is not None:
            return self.workers.run(self, r.positions, r.number)
        slots.run_here(r.positions, self.slots, lambda pos, gpu: self.pipeline.probe(
            pos, self.candidates[pos], gpu=gpu, round_=r.number))

    # -- what the queue's dispatch reads (:class:`~bisector.run.remote.Coordinator`) --------

    @property
    def me(self) -> str:
        return self.lease.me

    def cost(self, pos: int) -> int:
        return self.source.cost(pos)
