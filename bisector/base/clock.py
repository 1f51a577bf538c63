"""Time as a value handed in: what reads the time or waits for it takes a :class:`Clock`.

The prefetcher measures how much of a probe's torch was made while the previous oracle ran,
the ticker (heartbeats, the cancel watcher) waits between calls, the progress display and a
build log's follower print at an interval. In production all of them read ``time.monotonic``
and wait on their stop event (:data:`MONOTONIC`); a test hands in a clock it steps by hand, so
it says "a minute passed" instead of sleeping one, and then waits for the event it expects
rather than for a time long enough on an idle machine (and too short on a loaded one).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a clock that never goes back (only differences mean anything)."""

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """Wait ``seconds`` or until ``stop`` is set, whichever comes first; True when
        ``stop`` was set (``threading.Event.wait``'s answer)."""


class Monotonic:
    """The machine's clock: ``time.monotonic`` and the stop event's own wait."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        return stop.wait(seconds)


MONOTONIC: Clock = Monotonic()
