"""The one "every N seconds until stopped" thread behind heartbeats and watchers, on a clock the
test steps (tests/clocks.py): no test here sleeps or depends on how fast the machine is."""

from __future__ import annotations

import threading

import pytest

from bisector.infra.ticker import Ticker
from tests.clocks import GUARD_S, SteppedClock

pytestmark = pytest.mark.unit


def test_it_calls_every_period_until_the_function_says_it_is_done() -> None:
    clock = SteppedClock()
    calls: list[float] = []

    def fn() -> bool:
        calls.append(clock.now())
        return len(calls) < 3

    t = Ticker(10, fn, "tick-done", clock).start()
    thread = t._thread
    assert thread is not None
    n = clock.until_waiting("tick-done")
    clock.advance(9.5)
    assert clock.entered("tick-done") == n and calls == []  # not yet a period
    clock.advance(0.5)
    clock.until_waiting("tick-done", n + 1)
    clock.step("tick-done", 10)
    assert calls == [1010, 1020]
    clock.advance(10)  # the third call says it is done: the thread ends, nothing after it
    thread.join(GUARD_S)
    assert not thread.is_alive() and calls == [1010, 1020, 1030]
    t.stop()


def test_a_failing_call_is_tried_again_at_the_next_tick() -> None:
    clock = SteppedClock()
    calls = [0]

    def fn() -> bool:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("a database hiccup")
        return True

    with Ticker(1, fn, "tick-fails", clock):
        clock.step("tick-fails", 1)  # raised, and the ticker waits again all the same
        assert calls[0] == 1
        clock.step("tick-fails", 1)
        assert calls[0] == 2


def test_stop_ends_it_and_waits_for_the_call_in_progress() -> None:
    clock = SteppedClock()
    inside, release, finished = threading.Event(), threading.Event(), threading.Event()

    def fn() -> bool:
        inside.set()
        release.wait(GUARD_S)
        finished.set()
        return True

    t = Ticker(1, fn, "tick-stop", clock).start()
    clock.until_waiting("tick-stop")
    clock.advance(1)
    assert inside.wait(GUARD_S)
    stopper = threading.Thread(target=t.stop)
    stopper.start()
    assert t._stop.wait(GUARD_S)  # stop was asked while the call runs ...
    assert stopper.is_alive() and not finished.is_set()  # ... and waits for it to end
    release.set()
    stopper.join(GUARD_S)
    assert not stopper.is_alive() and finished.is_set()
    n = [0]
    t2 = Ticker(1, lambda: bool(n.__setitem__(0, n[0] + 1)) or True, "tick-exit", clock)
    with t2:
        thread = t2._thread
        assert thread is not None
    assert not thread.is_alive() and n[0] == 0  # stopped and joined on exit: no tick after
