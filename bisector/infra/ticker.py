"""A thread that does one thing every N seconds until it is stopped: heartbeats and watchers.

A lease's heartbeat, a watch result's heartbeat and a worker's "should this probe stop?"
watcher are all this: a daemon thread that waits ``seconds``, calls a function, and goes on
until its owner stops it or the function says it is done. A failing call (a database hiccup)
is tried again at the next tick, never raised into a thread nobody joins. The wait between
calls is its :class:`~bisector.base.clock.Clock`'s, so a test steps the time instead of
sleeping through it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from bisector.base.clock import MONOTONIC, Clock


class Ticker:
    """``fn`` every ``seconds`` in a daemon thread named ``name``; ``fn`` returns False when
    there is nothing more to do. Usable as a context manager (started on entry, stopped and
    joined on exit)."""

    def __init__(self, seconds: float, fn: Callable[[], bool], name: str,
                 clock: Clock = MONOTONIC) -> None:
        self.seconds, self.fn, self.name, self.clock = seconds, fn, name, clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Ticker:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self.clock.wait(self._stop, self.seconds):
            try:
                if not self.fn():
                    return
            except Exception:  # a passing failure: the next tick tries again
                continue

    def stop(self, timeout: float = 5.0) -> None:
        """Stop ticking and wait (up to ``timeout``) for a call in progress to end."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)
        self._thread = None

    def __enter__(self) -> Ticker:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
