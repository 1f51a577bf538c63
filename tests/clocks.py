"""A clock a test steps by hand (bisector/base/clock.Clock), so a test says "a minute passed"
instead of sleeping one, then waits for the event it expects (a thread that did its work and
waits again), never for a time that is long enough only on an idle machine.

The deadlines here only turn a hang into a failure; no assertion depends on them.
"""

from __future__ import annotations

import threading
from collections import Counter

GUARD_S = 30.0  # a failure guard: far beyond what any step takes, even on a loaded machine


class SteppedClock:
    """Time that moves only when :meth:`advance` says. A thread waiting on it wakes when the
    time it waits for is reached (or its stop event is set); the clock counts the waits each
    thread (by name) has entered, so a test can wait until a thread has done its work and is
    waiting again."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._cond = threading.Condition()
        self._entered: Counter[str] = Counter()
        self._inside: Counter[str] = Counter()
        self._reads: Counter[str] = Counter()

    def now(self) -> float:
        with self._cond:
            self._reads[threading.current_thread().name] += 1
            self._cond.notify_all()
            return self._now

    __call__ = now  # where a plain ``Callable[[], float]`` is taken (rich's ``get_time``)

    def advance(self, seconds: float) -> None:
        with self._cond:
            self._now += seconds
            self._cond.notify_all()

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        name = threading.current_thread().name
        with self._cond:
            until = self._now + seconds
            self._entered[name] += 1
            self._inside[name] += 1
            self._cond.notify_all()
            try:
                # The stop event cannot notify this condition: it is looked at every 10 ms
                # (a stop's reaction time, never an assertion's).
                while self._now < until and not stop.is_set():
                    self._cond.wait(0.01)
            finally:
                self._inside[name] -= 1
                self._cond.notify_all()
            return stop.is_set()

    def entered(self, name: str) -> int:
        """How many waits the thread ``name`` has entered so far."""
        with self._cond:
            return self._entered[name]

    def until_read(self, name: str, reads: int = 1) -> None:
        """Block until the thread ``name`` has read the time ``reads`` times (it got that
        far: the moment it noted is the time now)."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._reads[name] >= reads, GUARD_S)
            assert ok, f"thread {name!r} never read the time ({self._reads[name]} reads)"

    def until_waiting(self, name: str, entered: int = 1) -> int:
        """Block until the thread ``name`` is waiting on this clock, having entered at least
        ``entered`` waits; the number it has entered."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: self._inside[name] > 0 and self._entered[name] >= entered, GUARD_S)
            assert ok, f"thread {name!r} never came to wait ({self._entered[name]} waits)"
            return self._entered[name]

    def step(self, name: str, seconds: float) -> None:
        """``seconds`` pass for the thread ``name``: it is waiting, the time moves, and this
        returns once it did what it does at that time and waits again."""
        n = self.until_waiting(name)
        self.advance(seconds)
        self.until_waiting(name, n + 1)
