"""base/clock.py: the machine's clock as production reads it, and the stepped clock tests hand
in instead (tests/clocks.py) behaving the same way where it matters."""

from __future__ import annotations

import threading

import pytest

from bisector.base.clock import MONOTONIC, Clock
from tests.clocks import GUARD_S, SteppedClock

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("clock", [MONOTONIC, SteppedClock()], ids=["monotonic", "stepped"])
def test_a_wait_ends_at_once_when_stopped_and_says_so(clock: Clock) -> None:
    stop = threading.Event()
    stop.set()
    assert clock.wait(stop, 3600) is True  # a stop set before: no wait at all
    stop.clear()
    assert clock.wait(stop, 0) is False  # nothing to wait for, not stopped


def test_the_machine_clock_never_goes_back() -> None:
    a = MONOTONIC.now()
    assert MONOTONIC.now() >= a


def test_a_stepped_wait_ends_when_the_time_comes_or_the_stop() -> None:
    clock, stop = SteppedClock(), threading.Event()
    ended: list[bool] = []
    waiter = threading.Thread(target=lambda: ended.append(clock.wait(stop, 10)), name="waiter")
    waiter.start()
    clock.until_waiting("waiter")
    clock.advance(9.9)
    assert clock.entered("waiter") == 1 and waiter.is_alive()  # not yet its time
    clock.advance(0.1)
    waiter.join(GUARD_S)
    assert ended == [False] and clock.now() == pytest.approx(1010)
    stopped = threading.Thread(target=lambda: ended.append(clock.wait(stop, 10)), name="w2")
    stopped.start()
    clock.until_waiting("w2")
    stop.set()  # the time never comes: the stop ends it
    stopped.join(GUARD_S)
    assert ended == [False, True]
