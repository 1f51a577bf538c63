"""The runner's logic, in-process against fakes of our own protocols and a real SQLite store:
verdict reuse, windows of suspects, endpoint stops, find-fix, resume, K-way rounds, leases."""

from __future__ import annotations

import math
import os
import signal
import threading
from collections.abc import Iterator

import pytest

from bisector.base.errors import BusyError, EndpointError, LeaseLost
from bisector.base.kinds import State
from bisector.core.verdict import Outcome, Rules
from bisector.infra import cancel
from bisector.run.lease import Lease
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.db import Store
from tests.clocks import GUARD_S, SteppedClock
from tests.unit.fakes import (
    FakeExecutor,
    FakeSource,
    block_until_stopped,
    make_runner,
    new_bisection,
    shas,
)


def rounds_bound(n: int, k: int) -> int:
    return math.ceil(math.log(n) / math.log(k + 1) - 1e-9) + 1


def test_finds_the_culprit_and_records_every_probe(store: Store) -> None:
    cands = shas(100)
    bid = new_bisection(store, cands)
    ex = FakeExecutor(cands, culprit=37)
    done = make_runner(store, bid, cands, ex).run()
    assert done.record.state is State.DONE and done.record.culprit_sha == cands[37]
    assert done.record.owner is None
    probes = run_store.probes(store, bid)
    assert [p.commit_sha for p in probes] == [c.commit for c in ex.calls]
    assert len(ex.calls) <= math.ceil(math.log2(100)) + 2


@pytest.mark.parametrize("k", [2, 3, 4, 8])
@pytest.mark.parametrize("n", [2, 3, 10, 100, 1000])
def test_k_way_rounds_stay_within_the_bound(store: Store, k: int, n: int) -> None:
    cands = shas(n)
    bid = new_bisection(store, cands)
    culprit = max(1, (n * 2) // 3)
    ex = FakeExecutor(cands, culprit=culprit)
    done = make_runner(store, bid, cands, ex, width=k).run()
    assert done.record.culprit_sha == cands[culprit]
    assert done.rounds <= rounds_bound(n, k), (done.rounds, rounds_bound(n, k))
    by_round: dict[int, list[str | None]] = {}
    for p in run_store.probes(store, bid):
        assert p.round is not None
        by_round.setdefault(p.round, [])
    for call in ex.calls:
        assert call.gpu in {str(i) for i in range(k)}
    # No two probes of one round ran on the same GPU.
    gpu_by_commit = {c.commit: c.gpu for c in ex.calls}
    for p in run_store.probes(store, bid):
        by_round[p.round or 0].append(gpu_by_commit[p.commit_sha])
    for gpus in by_round.values():
        assert len(gpus) == len(set(gpus)) <= k


def test_k_probes_of_a_round_run_at_the_same_time(store: Store) -> None:
    cands = shas(200)
    bid = new_bisection(store, cands)
    meet = threading.Barrier(4)

    def together(index: int, commit: str) -> None:
        if 3 <= index <= 6:  # the round after the endpoints: each waits for the other three
            meet.wait(GUARD_S)  # (broken, and the run fails, unless all four run at once)

    ex = FakeExecutor(cands, culprit=150, hook=together)
    make_runner(store, bid, cands, ex, width=4).run()
    first_interior = ex.calls[2:6]  # the round after the endpoints: 4 split points
    assert len({c.gpu for c in first_interior}) == 4
    latest_start = max(c.start for c in first_interior)
    earliest_end = min(c.end for c in first_interior)
    assert latest_start < earliest_end, "the four probes overlapped"


def test_a_second_bisection_reuses_every_verdict(store: Store) -> None:
    cands = shas(64)
    first = new_bisection(store, cands)
    make_runner(store, first, cands, FakeExecutor(cands, culprit=20)).run()
    second = new_bisection(store, cands)
    ex = FakeExecutor(cands, culprit=20)
    done = make_runner(store, second, cands, ex).run()
    assert done.record.culprit_sha == cands[20] and ex.calls == []
    assert all(p.reused for p in run_store.probes(store, second))
    # Another environment shares nothing.
    third = new_bisection(store, cands, env="env1")
    ex3 = FakeExecutor(cands, culprit=20)
    make_runner(store, third, cands, ex3).run()
    assert ex3.calls


def test_skips_around_the_culprit_give_a_window(store: Store) -> None:
    cands = shas(40)
    bid = new_bisection(store, cands)
    src = FakeSource(broken={18, 19, 20})
    done = make_runner(store, bid, cands, FakeExecutor(cands, culprit=20), source=src).run()
    assert done.record.state is State.AMBIGUOUS
    suspects = done.record.result["suspects"]
    assert cands[20] in suspects and set(suspects) == set(cands[18:22])  # 21: first bad


def test_an_unbuildable_commit_is_remembered_but_an_infra_skip_is_not(store: Store) -> None:
    cands = shas(16)
    bid = new_bisection(store, cands)
    src = FakeSource(broken={7}, flaky_infra={4})
    make_runner(store, bid, cands, FakeExecutor(cands, culprit=6), source=src).run()
    probed = {p.commit_sha for p in run_store.probes(store, bid)}
    assert {cands[7], cands[4]} <= probed
    kept = run_store.reusable(store, run_store.Key(bisections.get(store, bid).oracle_sha256,
                                                 "env0"), cands)
    assert cands[7] in kept and kept[cands[7]].outcome is Outcome.SKIP
    assert cands[4] not in kept


@pytest.mark.parametrize(("first", "problem"), [("good", "good_is_bad"), ("bad", "bad_is_good")])
def test_an_endpoint_that_is_wrong_stops(store: Store, first: str, problem: str) -> None:
    cands = shas(50)
    bid = new_bisection(store, cands)
    culprit = 0 if first == "good" else 50  # everything bad, or everything good
    with pytest.raises(EndpointError, match="pick an older --good" if first == "good"
                       else "--find-fix"):
        make_runner(store, bid, cands, FakeExecutor(cands, culprit=culprit)).run()
    rec = bisections.get(store, bid)
    assert rec.state is State.FAILED and rec.result["problem"] == problem and rec.owner is None
    assert len(run_store.probes(store, bid)) == 2  # nothing probed past the endpoints


def test_find_fix_looks_for_the_first_passing_commit(store: Store) -> None:
    cands = shas(80)
    bid = new_bisection(store, cands)
    # Broken (the oracle fails) until 33, fixed from 33 on.
    ex = FakeExecutor(cands, culprit=0, outcome=lambda p: Outcome.PASS if p >= 33
                      else Outcome.FAIL)
    done = make_runner(store, bid, cands, ex, rules=Rules(find_fix=True)).run()
    assert done.record.culprit_sha == cands[33]


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt during the test, as the CLI arranges it: a test run
    started in the background of a non-interactive shell inherits SIGINT ignored."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("k", [1, 3])
def test_ctrl_c_in_flight_then_resume_reruns_only_what_was_in_flight(
        store: Store, k: int, ctrl_c_raises: None) -> None:
    cands = shas(500)
    ref_id = new_bisection(store, cands, env="reference")
    ref = FakeExecutor(cands, culprit=321)
    make_runner(store, ref_id, cands, ref, width=k).run()
    expected = {c.commit for c in ref.calls}

    bid = new_bisection(store, cands)

    def interrupt(index: int, commit: str) -> None:
        if index == 5:
            if k == 1:
                raise KeyboardInterrupt  # Ctrl-C while the one oracle runs
            # Ctrl-C reaches the main thread (a real signal: it wakes the main thread's blocked
            # wait at once, where interrupt_main() waits for the wait to end); workers are
            # killed.
            os.kill(os.getpid(), signal.SIGINT)
            block_until_stopped(index, commit)
            raise cancel.Stopped("killed")

    first = FakeExecutor(cands, culprit=321, hook=interrupt)
    with pytest.raises(KeyboardInterrupt):
        make_runner(store, bid, cands, first, width=k).run()
    rec = bisections.get(store, bid)
    assert rec.state is State.INTERRUPTED and rec.owner is None
    stored = {p.commit_sha for p in run_store.probes(store, bid)}
    assert first.calls[4].commit not in stored  # the interrupted run was not recorded

    again = FakeExecutor(cands, culprit=321)
    done = make_runner(store, bid, cands, again, width=k).run()
    assert done.record.culprit_sha == cands[321]
    rerun = {c.commit for c in again.calls}
    assert rerun.isdisjoint(stored), "nothing recorded is run twice"
    assert stored | rerun == expected, "the same probes as an uninterrupted run"


def test_a_live_owner_is_never_displaced_and_a_dead_one_is_taken_over(store: Store) -> None:
    cands = shas(30)
    import os
    import socket

    from bisector.infra.owner import _me

    parent = _me(os.getppid())  # a live process that is not us
    busy = new_bisection(store, cands, owner=parent)
    with pytest.raises(BusyError, match="being run by"):
        make_runner(store, busy, cands, FakeExecutor(cands, culprit=3)).run()
    assert bisections.get(store, busy).owner == parent
    dead = new_bisection(store, cands, owner=f"{socket.gethostname()}:999999999:1")
    done = make_runner(store, dead, cands, FakeExecutor(cands, culprit=3)).run()
    assert done.record.culprit_sha == cands[3]
    # A reused pid (same pid, other start time) is not the old owner.
    reused = new_bisection(store, cands, owner=f"{socket.gethostname()}:{os.getppid()}:1")
    assert make_runner(store, reused, cands, FakeExecutor(cands, culprit=3)).run().record.state \
        is State.DONE


def test_the_heartbeat_beats_during_a_long_probe(store: Store) -> None:
    cands = shas(4)
    bid = new_bisection(store, cands)
    seen = []
    clock = SteppedClock()

    def watch(index: int, commit: str) -> None:
        if index == 1:  # the first probe runs while three beat periods pass
            for _ in range(3):
                seen.append(bisections.get(store, bid).heartbeat_at)
                clock.step(f"lease-{bid}", 30)
            seen.append(bisections.get(store, bid).heartbeat_at)

    lease = Lease(store, bid, beat_s=30, clock=clock)
    make_runner(store, bid, cands, FakeExecutor(cands, culprit=2, hook=watch), lease=lease).run()
    assert None not in seen and len(set(seen)) == 4, "the heartbeat moved while one probe ran"


def test_a_run_whose_lease_was_taken_stops_and_keeps_its_verdict(store: Store) -> None:
    cands = shas(64)
    bid = new_bisection(store, cands)

    def steal(index: int, commit: str) -> None:
        if index == 3:
            assert bisections.take(store, bid, me="otherhost:1:1",
                                   seen=bisections.get(store, bid).owner)

    with pytest.raises(LeaseLost, match="taken over"):
        make_runner(store, bid, cands, FakeExecutor(cands, culprit=9, hook=steal)).run()
    rec = bisections.get(store, bid)
    assert rec.owner == "otherhost:1:1" and rec.state is State.RUNNING
    assert len(run_store.probes(store, bid)) == 2  # the third probe was not appended ...
    key = run_store.Key(rec.oracle_sha256, "env0")
    assert len(run_store.reusable(store, key, cands)) == 3  # ... but its verdict was kept


def test_two_takers_of_a_dead_lease_cannot_both_win(store: Store) -> None:
    cands = shas(4)
    bid = new_bisection(store, cands, owner="gone:1:1")
    wins = []

    def take(me: str) -> None:
        wins.append(bisections.take(store, bid, me=me, seen="gone:1:1"))

    threads = [threading.Thread(target=take, args=(f"t{i}:1:1",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False, False, False, True]


def test_what_a_stop_quotes_is_redacted_before_it_is_cut() -> None:
    """A token that the 200-character cut would split matches no pattern: redacted first."""
    from bisector.run.strategies.base import _short

    token = "ghp_" + "A1b2C3d4E5" * 4
    said = _short("x" * 178 + " " + token)
    assert "ghp_" not in said and said.startswith("x" * 178)
