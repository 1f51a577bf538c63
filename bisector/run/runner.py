"""Driving one stored bisection to its end: one loop over a search strategy.

Each round the loop checks the lease, asks the :class:`~bisector.run.strategies.base.Strategy`
(plain, noisy or performance: the oracle's metadata picks) for the next positions or the
answer, logs the verdicts it found judged elsewhere, and runs the round: K probes at once, one
per slot (a GPU, or none), each through the same :class:`~bisector.run.pipeline.Pipeline`, each
result stored the moment it exists. Ctrl-C (or SIGTERM) kills every probe in flight; none of
them is recorded, so ``resume`` re-runs exactly those and, the search being deterministic given
its evidence, reaches the same answer. The answer is then confirmed (when asked) and written.

With a :class:`~bisector.run.remote.Workers` (workers on a PostgreSQL store) the K probes of a
round are K queue jobs run by K workers instead of K threads here; this process stays the
coordinator: the lease, the search, the rounds and the answer are the same code.
"""

from __future__ import annotations

import math
import queue
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass

from bisector.base.errors import Cancelled, EndpointError, LeaseLost
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import State
from bisector.core.search import Verdict
from bisector.executors.base import prepare
from bisector.infra import cancel
from bisector.oracle.manual import TakeBack
from bisector.run import at_culprit, confirm, culprit_facts
from bisector.run.into_merge import Inside, go_inside
from bisector.run.lease import Lease
from bisector.run.opened import Opened
from bisector.run.pipeline import Pipeline, SampleRecorder, StoreRecorder
from bisector.run.prefetch import Prefetcher
from bisector.run.remote import Workers, cancelled_message
from bisector.run.strategies.base import Adopted, Conclusion, Round, View
from bisector.run.wiring import Judging, Means
from bisector.store import answers, bisections, durations
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
        self.lease = lease or Lease(store, record.id)
        self.key = run_store.Key(record.oracle_sha256, record.env_fingerprint)
        # A flaky oracle's runs are samples: every probe runs and each run is kept.
        recorder = (SampleRecorder if oracle.meta.sampled else StoreRecorder)(
            store, record.id, self.key, self.lease.me)
        # The judge of failing runs (run/hunt.py): every probe, stored verdict and
        # confirmation run of this bisection is judged through the same one.
        self.hunt = judging.hunt
        # What the next probes need, made while the oracles run (run/prefetch.py): here only,
        # workers obtain on their own boxes.
        executor = means.executor
        self.prefetcher = None if means.prefetch <= 0 or means.workers is not None else \
            Prefetcher(source.obtain, source.kind, lambda inst: prepare(executor, inst, oracle),
                       means.prefetch, means.spare_builds, unbuilt=source.obtain_unbuilt)
        self.pipeline = Pipeline(source.obtain if self.prefetcher is None
                                 else self.prefetcher.obtain, executor, oracle, rules,
                                 recorder, self.events, self.hunt)
        self._seq = run_store.last_seq(store, record.id)  # a resumed run counts on
        # Set: each round's probes go to workers through a queue (``run/remote.py``).
        self.workers = means.workers
        walk = candidates[:record.n_candidates]
        self.view = self.walk_view = View(store, record, walk, self.key, rules, oracle.meta,
                                          self.width, source.cost if self.width == 1 else None,
                                          judging.prior, self.hunt)
        self.strategy = judging.strategy(self.view)
        # A first-parent answer that is a merge: searched inside (run/into_merge.py).
        self.inside: Inside | None = None

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
                    self.reconnect(e)
        except (cancel.Stopped, Cancelled):
            # Probes killed in this process because `bisect cancel` asked (seen by the
            # lease's cancel watcher): nothing killed was recorded, `resume` runs them again.
            if not self.lease.cancelled.is_set() and not bisections.cancel_requested(
                    self.store, self.record.id):
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

    def reconnect(self, e: BaseException) -> None:
        """The database went away in the middle of a store call (a PostgreSQL restart):
        wait for it (``defaults.STORE_RETRY_S``), then carry on if the lease is still ours.
        Every run finished so far is stored; a round cut short is run again from what is."""
        self.events.note(f"the store {self.store.url} went away; waiting for it to come back")
        if not self.store.reachable():
            self.store.retry_s = 0.0  # gone for good: nothing more waits for it
            raise self.store.lost(e, self.record.id) from None
        if not bisections.beat(self.store, self.record.id, me=self.lease.me):
            raise LeaseLost(f"bisection {self.record.id} was taken over by another process "
                            f"while the store was away; this one stops")
        if not self.lease.cancelled.is_set():
            cancel.reset()  # a round stopped by the failure is run again, not cancelled
        self.events.note("the store is back: carrying on")

    def _run(self) -> Finished:
        self.events.terms(*self.rules.terms)
        if self.workers is not None:
            self.workers.settle(self)
        ran = 0
        while True:
            self.check_lease()
            decision = self.strategy.decide()
            self.adopt(decision.adopted, decision.adopted_round)
            if isinstance(decision.then, Conclusion):
                if self.inside is None and self.go_inside(decision.then):
                    continue
                answer = decision.then if self.inside is None else \
                    self.inside.answer(decision.then, self.rules.terms)
                return Finished(self.finish(answer), ran)
            ran += 1
            try:
                self.run_round(decision.then)
            except TakeBack:
                self.take_back()

    def go_inside(self, walk: Conclusion) -> bool:
        """The walk answered a merge: go on among the commits it brings (True), the search
        inside asked from now on; False when there is no merge or the user said no."""
        if not self.judging.into_merge:
            return False
        n, me = self.record.n_candidates, self.lease.me
        inside = go_inside(walk, self.candidates, n, self.record.repo_path, lambda shas:
                           bisections.extend(self.store, self.record.id, me=me, start=n,
                                             shas=shas))
        if inside is None:
            return False
        self.inside = inside
        self.events.note(f"the first-parent culprit {inside.merge[:12]} is a merge bringing "
                         f"{len(inside.candidates) - 2} commit(s): searching among them "
                         f"(--no-into-merge stops at the merge)")
        self.view = inside.view(self.walk_view)
        self.strategy = self.judging.strategy(self.view)
        return True

    # -- verdicts --------------------------------------------------------------------------

    def adopt(self, adopted: Adopted, round_: int | None) -> None:
        """Log verdicts judged elsewhere as reused probes, labelled with the round they
        informed, so ``bisect log`` shows them."""
        if not run_store.adopt(self.store, self.record.id, self.lease.me,
                              [a for a, _ in adopted], round_):
            raise LeaseLost(f"bisection {self.record.id} was taken over by another process")
        for a, reason in adopted:
            self.events.probe_done(a.position, a.commit_sha, Verdict(a.verdict), reason, 0.0,
                                   True)

    def take_back(self) -> None:
        """``back`` at a ``--manual`` prompt: the probe asked about was abandoned (nothing
        recorded); the previous answer leaves the bisection (``store/answers.take_back``) and
        its commit is the round in flight again, so a fresh strategy, reading that as
        ``resume`` would, asks about it next."""
        owned, taken = answers.take_back(self.store, self.record.id, self.lease.me)
        if not owned:
            raise LeaseLost(f"bisection {self.record.id} was taken over by another process")
        if taken is None:
            self.events.note("nothing to undo: no answer was given yet")
        else:
            self.events.note(f"took back {taken.verdict} for {taken.commit_sha[:12]}: "
                             f"asking about it again")
            if self.inside is not None and taken.position < self.record.n_candidates:
                # Back into the walk: its answer may change, and with it the merge.
                self.inside, self.view = None, self.walk_view
        self.strategy = self.judging.strategy(self.view)

    def time_left(self, left: int) -> float | None:
        """Seconds the search should still take: ``left`` probes, ``width`` at a time (a round
        of K probes cuts the window K+1 ways, worth log2(K+1) single probes), each at the mean
        paid-for probe of this oracle measured on this repository. None when nothing was
        measured yet: another oracle's probes are no estimate of this one's."""
        per = durations.probe_seconds(self.store, self.record.repo_path,
                                      self.record.oracle_sha256)
        if per is None or left <= 0:
            return None
        return math.ceil(left / math.log2(self.width + 1)) * per.mean_s

    # -- probes ----------------------------------------------------------------------------

    def dispatch(self, positions: tuple[int, ...], round_: int, left: int) -> None:
        eta = self.time_left(left)
        for pos in positions:
            self._seq += 1
            sha = self.candidates[pos]
            self.events.probe_start(self._seq, pos, sha, self.subject(sha), left, eta)
        if self.workers is not None:
            self.workers.run(self, positions, round_)
            return
        if self.width == 1:
            for pos in positions:  # the endpoints with one slot: one after the other
                self.pipeline.probe(pos, self.candidates[pos], gpu=self.slots[0],
                                    round_=round_)
            return
        free: queue.Queue[str | None] = queue.Queue()
        for slot in self.slots:
            free.put(slot)
        # A round that fits the slots runs its i-th probe on the i-th GPU: a performance
        # round places the reference so that each GPU alternates reference and candidate
        # (strategies/perf.layout), and its pairs never cross GPUs.
        placed = len(positions) <= len(self.slots)

        def work(i: int, pos: int) -> None:
            gpu = self.slots[i] if placed else free.get()
            try:
                self.pipeline.probe(pos, self.candidates[pos], gpu=gpu, round_=round_)
            finally:
                if not placed:
                    free.put(gpu)

        with ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="probe") as pool:
            futures = [pool.submit(work, i, pos) for i, pos in enumerate(positions)]
            try:
                done, _ = wait(futures, return_when=FIRST_EXCEPTION)
                for f in done:
                    f.result()  # a probe that failed (not a verdict: a bug, a lost lease)
            except BaseException:
                cancel.stop_all()  # Ctrl-C or a failure: kill what is still in flight
                wait(futures)
                raise

    # -- the answer ------------------------------------------------------------------------

    def finish(self, answer: Conclusion) -> BisectionRecord:
        """Confirm the culprit (when asked), then write the answer; the endpoints' failure
        raises with its message once written."""
        if self.prefetcher is not None:  # what the search would have probed next: not needed
            self.prefetcher.close()
        b, result, message = self.record, dict(answer.result), answer.message
        state = answer.state
        culprit = None if answer.culprit is None else self.candidates[answer.culprit]
        prior = self.walk_view.prior
        info = prior.info if prior is not None else None
        if info is not None:  # which prior the search used, and what it saved
            paid = run_store.paid_runs(self.store, b.id, below=b.n_candidates)  # the walk's
            # Plain bisection is priced from the verdicts this one reused, as it would have
            began = {p.position: Verdict(p.verdict) for p in run_store.probes(self.store, b.id)
                     if p.reused and p.position < b.n_candidates}
            result["prior"] = info.summary(self.walk_view.n, self.width, paid, answer.culprit,
                                           began)
        if answer.culprit is not None and self.judging.confirm:
            result["confirmation"] = checked = confirm.confirm(
                self.confirming(), answer.culprit, answer.judge, answer.posterior)
            message = confirm.warning(checked)
            state = confirm.state_after(state, checked)
        if not bisections.finish(self.store, b.id, me=self.lease.me, state=state,
                                 result=result, culprit_sha=culprit, message=message):
            raise LeaseLost(f"bisection {b.id} was taken over by another process before it "
                            f"finished here")
        self.lease.stop_beating()
        if culprit is not None:  # its author, PR and paths, for `bisect list`'s filters
            culprit_facts.keep(self.store, self.record.repo_path, culprit)
        if culprit is not None and answer.culprit is not None and state is State.DONE:
            self.at_culprit(answer.culprit, culprit)
        if answer.stop:
            raise EndpointError(message or "")
        return bisections.get(self.store, b.id)

    def at_culprit(self, position: int, sha: str) -> None:
        """What runs at the culprit once the answer is stored (run/at_culprit.py), added to
        the result. Ctrl-C there stops it alone: the answer is already written."""
        if self.workers is not None:  # the probes ran on workers: this box is no culprit's
            return
        try:
            found = at_culprit.after(self.confirming(), self.judging.at_culprit, position, sha)
        except (cancel.Stopped, KeyboardInterrupt):
            self.events.note("stopped at the culprit: its answer is stored; what ran there "
                             "after it (collect_env, the compiler bisector) is not")
            return
        except Exception as e:  # never the answer's loss: it is stored already
            if connection_lost(e):
                raise
            self.events.note(f"what runs at the culprit failed ({type(e).__name__}: {e}); "
                             f"the answer is stored")
            return
        if found:
            bisections.add_to_result(self.store, self.record.id, found)

    def confirming(self) -> confirm.CulpritCheck:
        return confirm.CulpritCheck(self.store, self.key, self.record.id,
                               list(self.walk_view.candidates),
                               self.source, self.pipeline.executor, self.oracle, self.rules,
                               self.events, self.slots[0], self.revert, self.judging.reconfirm,
                               self.hunt, self.parents)

    def check_lease(self) -> None:
        """Stop if the lease was lost, or if `bisect cancel` asked (between rounds)."""
        if self.lease.lost.is_set():
            raise LeaseLost(f"bisection {self.record.id} was taken over by another process; "
                            f"this one stops")
        if self.lease.cancelled.is_set() or bisections.cancel_requested(self.store,
                                                                          self.record.id):
            raise Cancelled(cancelled_message(self.record.id))

    def run_round(self, r: Round) -> None:
        """Note the round as in flight (the lease must still be ours), then run it."""
        if not bisections.set_in_flight(self.store, self.record.id, me=self.lease.me,
                                        round_=r.number, positions=r.positions):
            raise LeaseLost(f"bisection {self.record.id} was taken over by another process")
        self.events.round_start(r.number, self.width, r.left)
        if self.prefetcher is not None:
            self.prefetcher.ahead(self.strategy.ahead(r), keep=r.positions)
        self.dispatch(r.positions, r.number, r.left)

    def revert(self, culprit: str, onto: str) -> str | None:
        """The culprit's revert on the bad endpoint, made in the clone (None: not clean)."""
        return confirm.make_revert(self.record.repo_path, culprit, onto)

    def parents(self, sha: str) -> list[str]:
        """A commit's git parents in the clone: confirmation runs the culprit's own."""
        return confirm.git_parents(self.record.repo_path, sha)

    # -- what the queue's dispatch reads (:class:`~bisector.run.remote.Coordinator`) --------

    @property
    def me(self) -> str:
        return self.lease.me

    def cost(self, pos: int) -> int:
        return self.source.cost(pos)
