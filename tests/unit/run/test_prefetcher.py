"""Preparing the next probes while the oracle runs (run/prefetch.py, core/lookahead.py): the
commits named ahead are the ones the search then probes, a probe takes what was made ahead
(waiting for it when in flight), and nothing made ahead changes a verdict: a failed, dropped or
passing-failure prefetch leaves the probe to obtain as before."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import pytest

from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Answer, Obtained, Unobtainable
from bisector.base import defaults
from bisector.base.kinds import Way
from bisector.core.lookahead import next_rounds
from bisector.core.prior import Prior
from bisector.core.search import Next, Verdict, next_step
from bisector.infra import cancel
from bisector.run import runner as runner_mod
from bisector.run.prefetch import Prefetcher, pays
from bisector.store import runs as run_store
from bisector.store.db import Store
from tests.clocks import GUARD_S, SteppedClock
from tests.unit.fakes import FakeExecutor, FakeSource, make_runner, new_bisection, shas

pytestmark = [pytest.mark.unit]


@pytest.mark.parametrize("width", [1, 2, 3])
def test_the_next_round_is_always_among_the_commits_named_ahead(width: int) -> None:
    rng = random.Random(width)
    for _ in range(150):
        n = rng.randint(2, 400)
        culprit = rng.randint(1, n - 1)
        weights = [rng.random() + 0.01 for _ in range(n)]
        prior = Prior.from_weights(weights) if rng.random() < 0.5 else None
        known: dict[int, Verdict] = {}
        named: list[tuple[int, float]] | None = None
        while isinstance(step := next_step(n, known, width=width,
                                           prior=prior if 0 in known else None), Next):
            if named is not None:
                assert set(step.positions) <= {p for p, _ in named}, (n, culprit, step)
            named = next_rounds(n, known, step.positions, width=width,
                                prior=prior if 0 in known or 0 in step.positions else None)
            assert all(0 < c <= 1 + 1e-9 for _, c in named)
            assert [c for _, c in named] == sorted((c for _, c in named), reverse=True)
            for p in step.positions:
                known[p] = Verdict.BAD if p >= culprit else Verdict.GOOD


def test_one_gpu_prepares_the_two_midpoints_at_even_odds() -> None:
    named = next_rounds(101, {0: Verdict.GOOD, 100: Verdict.BAD}, [50])
    assert [p for p, _ in named] == [25, 75] or [p for p, _ in named] == [75, 25]
    assert all(c == pytest.approx(0.5) for _, c in named)
    # The endpoints' round continues one way only: the first midpoint, for sure.
    assert next_rounds(101, {}, [0, 100]) == [(50, pytest.approx(1.0))]
    # A round whose every outcome ends the search names nothing.
    assert next_rounds(3, {0: Verdict.GOOD, 2: Verdict.BAD}, [1]) == []


def test_a_source_build_is_made_ahead_only_on_a_spare_slot_when_it_pays() -> None:
    assert pays(0.01, Way.PREBUILT, 0) and pays(0.01, Way.OVERLAY, 0)
    assert pays(0.5, Way.CACHED, 0)
    assert not pays(1.0, Way.BROKEN, 3)
    assert not pays(0.5, Way.BUILD, 0)  # every build slot serves the round's own probes
    assert pays(0.5, Way.BUILD, 1)
    assert not pays(defaults.SPECULATIVE_BUILD_PRICE, Way.BUILD, 1)


@dataclass
class Gated:
    """An obtain of our own protocol that runs until the test lets it end (:meth:`let`) or its
    scope is dropped (then it stops, as a download does), counting calls per position and the
    threads they ran in; ``at_once``: every call ends as soon as it starts."""

    at_once: bool = False
    fail_first: set[int] = field(default_factory=set)
    passing_failure: set[int] = field(default_factory=set)
    calls: list[tuple[int, str]] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)
    _gates: dict[tuple[str, int], threading.Event] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _event(self, what: str, pos: int) -> threading.Event:
        with self._lock:
            return self._gates.setdefault((what, pos), threading.Event())

    def began(self, pos: int) -> None:
        assert self._event("began", pos).wait(GUARD_S), f"{pos} was never obtained"

    def ended(self, pos: int) -> None:
        assert self._event("ended", pos).wait(GUARD_S), f"the obtain of {pos} never ended"

    def let(self, pos: int) -> None:
        self._event("let", pos).set()

    def __call__(self, pos: int) -> Answer:
        with self._lock:
            self.calls.append((pos, threading.current_thread().name))
            first = sum(1 for p, _ in self.calls if p == pos) == 1
        self._event("began", pos).set()
        try:
            if not self.at_once:
                gate = self._event("let", pos)
                try:
                    with cancel.killable(gate.set):  # dropped: the kill opens the gate
                        assert gate.wait(GUARD_S), f"the test never let {pos} end"
                except cancel.Stopped:
                    pass
                if cancel.stopping():
                    self.stopped.append(pos)
                    raise cancel.Stopped("dropped")
            if first and pos in self.fail_first:
                raise OSError("the index went away")
            if first and pos in self.passing_failure:
                return Unobtainable("the builder container could not start", permanent=False)
            return Obtained(Installable(f"key{pos}", f"wheel {pos}"), None, fresh=True)
        finally:
            self._event("ended", pos).set()

    def of(self, pos: int) -> list[str]:
        return [t for p, t in self.calls if p == pos]


def prefetcher(obtain: Gated, slots: int = 2, **kw: object) -> Prefetcher:
    return Prefetcher(obtain, lambda _pos: "prebuilt", None, slots, **kw)  # type: ignore[arg-type]


def test_a_probe_takes_what_was_made_ahead_and_says_how_much_was_hidden() -> None:
    clock, obtain = SteppedClock(), Gated()
    made: list[str] = []
    env_made = threading.Event()

    def prepare(inst: Installable) -> None:
        made.append(inst.key)
        env_made.set()

    pf = Prefetcher(obtain, lambda _pos: "prebuilt", prepare, 2, clock=clock)
    try:
        assert pf.ahead([(5, 0.5), (9, 0.5)]) == [5, 9]
        obtain.began(5)
        clock.advance(0.3)  # the download takes 0.3 s while the oracle of the round before runs
        obtain.let(5)
        assert env_made.wait(GUARD_S)
        clock.advance(0.5)  # which goes on a while longer
        got = pf.obtain(5)
    finally:
        pf.close()
    assert isinstance(got, Obtained) and got.installable.key == "key5" and got.fresh
    assert got.ahead == {"obtain": 0.3}  # all of it hidden (its environment took no time)
    # obtained once, ahead, never again by the probe
    assert len(obtain.of(5)) == 1 and obtain.of(5)[0].startswith("ahead")
    assert made == ["key5"]  # its environment made ahead too


def test_a_probe_waits_for_a_prefetch_in_flight_instead_of_obtaining_twice() -> None:
    clock, obtain = SteppedClock(), Gated()
    pf = prefetcher(obtain, clock=clock)
    answer: list[Answer] = []
    probe = threading.Thread(target=lambda: answer.append(pf.obtain(3)), name="probe")
    try:
        pf.ahead([(3, 1.0)])
        obtain.began(3)
        clock.advance(0.1)  # made ahead for 0.1 s ...
        probe.start()
        clock.until_read("probe")  # ... when the probe asks for it
        clock.advance(0.3)  # the probe waits 0.3 s for the rest
        obtain.let(3)
        probe.join(GUARD_S)
    finally:
        pf.close()
    got = answer[0]
    assert isinstance(got, Obtained) and len(obtain.of(3)) == 1
    # Only the part made before the probe asked counts as hidden: what it waited for does not.
    assert got.ahead == {"obtain": 0.1}


@pytest.mark.parametrize("fault", ["fail_first", "passing_failure"])
def test_a_failed_prefetch_leaves_the_probe_to_obtain_as_before(fault: str) -> None:
    obtain = Gated(at_once=True, **{fault: {4}})  # type: ignore[arg-type]
    pf = prefetcher(obtain)
    try:
        pf.ahead([(4, 1.0)])
        got = pf.obtain(4)  # waits for the prefetch in flight, whose failure it then meets
    finally:
        pf.close()
    assert isinstance(got, Obtained) and got.installable.key == "key4" and not got.ahead
    assert [t.startswith("ahead") for t in obtain.of(4)] == [True, False]


def test_the_losing_side_is_dropped_when_the_next_round_starts() -> None:
    obtain = Gated()
    pf = prefetcher(obtain)
    try:
        pf.ahead([(10, 0.5), (30, 0.5)])
        obtain.began(10)
        obtain.began(30)
        # The round at 30 starts (kept for its probe); 10 lost: its download stops.
        pf.ahead([(20, 0.5), (40, 0.5)], keep=[30])
        obtain.ended(10)
        assert obtain.stopped == [10]
        obtain.began(20)  # on the slot 10 left
    finally:
        pf.close()
    obtain.ended(20)
    obtain.ended(30)
    assert sorted(obtain.stopped) == [10, 20, 30]  # close drops the rest ...
    assert 40 not in {p for p, _ in obtain.calls}  # ... and 40 never started
    assert not cancel.stopping()  # the probes' own stop is untouched


def test_nothing_is_made_ahead_without_room_on_the_disk() -> None:
    obtain = Gated(at_once=True)
    pf = prefetcher(obtain, room=lambda: False)
    try:
        assert pf.ahead([(1, 1.0)]) == []
    finally:
        pf.close()
    assert obtain.calls == []


def probe_order(store: Store, n: int, culprit: int, prefetch: int, width: int = 1
                ) -> tuple[str | None, list[tuple[int, int, str]], FakeSource]:
    cands = shas(n)
    # An environment of its own: the other run's verdicts are not reused.
    bid = new_bisection(store, cands, env=f"env-{n}-{prefetch}-{width}")
    source = FakeSource(broken={n // 3} - {0, n - 1})  # one commit that does not build
    runner = make_runner(store, bid, cands, FakeExecutor(cands, culprit), source=source,
                         width=width)
    if prefetch:  # as run/factory.open_bisection builds it
        runner.prefetcher = runner_mod.Prefetcher(source.obtain, source.kind, None, prefetch)
        runner.pipeline.obtain = runner.prefetcher.obtain
    done = runner.run()
    # Probes of one round finish in any order.
    probes = sorted((p.round or 0, p.position, p.verdict) for p in run_store.probes(store, bid))
    return done.record.culprit_sha, probes, source


@pytest.mark.parametrize("width", [1, 2])
def test_the_same_probes_and_culprit_with_and_without_the_prefetch(store: Store,
                                                                   width: int) -> None:
    for n, culprit in ((2, 1), (50, 37), (300, 137)):
        off = probe_order(store, n, culprit, 0, width)
        on = probe_order(store, n, culprit, 2 * width, width)
        assert on[:2] == off[:2] and on[0] == shas(n)[culprit]
        # Made ahead: more obtained than probed (the losing sides), never fewer.
        assert set(off[2].obtained) <= set(on[2].obtained)
