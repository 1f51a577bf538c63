"""Owning a bisection: a lease whose heartbeat beats for as long as the run lives.

The beat comes from a thread, not from the probe loop, so an hour-long build or oracle run
keeps it fresh (rq's ``monitor_work_horse`` does the same for a job). A lease is taken over
only when its owner is gone: on this host, its process (pid and start time) no longer exists;
on another host, its heartbeat is older than ``defaults.LEASE_STALE_S``. Taking over is a
compare-and-set on the owner the taker saw, so two takers never both win, and a live owner is
never displaced. When a beat finds the lease is no longer ours, the run stops writing (every
probe write checks the owner) and says so. A second, faster ticker (``defaults.CANCEL_POLL_S``)
looks for `bisect cancel`'s request and stops what runs in this process (an oracle, a build,
an install, a confirmation run) the moment it finds one. A beat that fails (the database
restarting) is tried again at the next; the runner decides whether the lease survived.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from bisector.base import defaults
from bisector.base.clock import MONOTONIC, Clock
from bisector.base.errors import BusyError, Cancelled, LeaseLost
from bisector.base.kinds import State
from bisector.infra import cancel
from bisector.infra.owner import owner_alive, owner_id
from bisector.infra.ticker import Ticker
from bisector.run.remote import cancelled_message
from bisector.store import bisections, claims
from bisector.store.db import Store


class Lease:
    def __init__(self, store: Store, bisection_id: int, *, me: str | None = None,
                 beat_s: float = defaults.LEASE_BEAT_S,
                 stale_s: float = defaults.LEASE_STALE_S, clock: Clock = MONOTONIC) -> None:
        self.store, self.id = store, bisection_id
        self.me = me or owner_id()
        self.beat_s, self.stale_s = beat_s, stale_s
        self.lost = threading.Event()
        # `bisect cancel` asked, seen at a beat: what runs in this process is stopped.
        self.cancelled = threading.Event()
        # Both wait on ``clock``: a test steps it to make a beat happen (tests/clocks.py).
        self._ticker = Ticker(beat_s, self._beat, f"lease-{bisection_id}", clock)
        self._watcher = Ticker(defaults.CANCEL_POLL_S, self._look, f"cancel-{bisection_id}",
                               clock)

    def acquire(self) -> None:
        """Own the bisection, or raise BusyError naming the live owner."""
        b = bisections.get(self.store, self.id)
        if b.owner != self.me:
            if b.state is State.RUNNING and owner_alive(b.owner, b.heartbeat_at, self.stale_s):
                raise BusyError(f"bisection {self.id} is being run by {b.owner}: wait for it, "
                                f"or stop that process and run `bisect resume {self.id}`")
            if not bisections.take(self.store, self.id, me=self.me, seen=b.owner):
                raise BusyError(f"bisection {self.id} was just taken by another process: "
                                f"see `bisect list`")
        else:
            bisections.take(self.store, self.id, me=self.me, seen=self.me)
        self.cancelled.clear()
        self._ticker.start()
        self._watcher.start()

    def _beat(self) -> bool:
        """One heartbeat (a failure is retried at the next); False once the lease is lost."""
        ok = bisections.beat(self.store, self.id, me=self.me)
        claims.beat(self.store, self.me)
        asked = bisections.cancel_requested(self.store, self.id)
        if not ok:
            self.lost.set()
            return False
        if asked:
            self._cancel()
        return True

    def _look(self) -> bool:
        """Has `bisect cancel` asked? Then stop everything in flight here, and look no more."""
        if bisections.cancel_requested(self.store, self.id):
            self._cancel()
            return False
        return True

    def _cancel(self) -> None:
        if not self.cancelled.is_set():
            self.cancelled.set()
            cancel.stop_all()  # probes in this process; a queue's are stopped by cancel

    def check(self) -> None:
        """Stop if the lease was lost, or if `bisect cancel` asked (between rounds)."""
        if self.lost.is_set():
            raise LeaseLost(f"bisection {self.id} was taken over by another process; this one "
                            f"stops")
        if self.cancel_asked():
            raise Cancelled(cancelled_message(self.id))

    def cancel_asked(self) -> bool:
        """Did `bisect cancel` ask (seen by the watcher, or in the store now)?"""
        return self.cancelled.is_set() or bisections.cancel_requested(self.store, self.id)

    def regain(self, e: BaseException, note: Callable[[str], None]) -> None:
        """The database went away in the middle of a store call (a PostgreSQL restart):
        wait for it (``defaults.STORE_RETRY_S``), then carry on if the lease is still ours.
        Every run finished so far is stored; a round cut short is run again from what is."""
        note(f"the store {self.store.url} went away; waiting for it to come back")
        if not self.store.reachable():
            self.store.retry_s = 0.0  # gone for good: nothing more waits for it
            raise self.store.lost(e, self.id) from None
        if not bisections.beat(self.store, self.id, me=self.me):
            raise LeaseLost(f"bisection {self.id} was taken over by another process while the "
                            f"store was away; this one stops")
        if not self.cancelled.is_set():
            cancel.reset()  # a round stopped by the failure is run again, not cancelled
        note("the store is back: carrying on")

    def stop_beating(self) -> None:
        self._watcher.stop()
        self._ticker.stop()

    def release(self, state: State = State.INTERRUPTED) -> None:
        """Stop beating and hand the bisection back (only if it is still ours)."""
        self.stop_beating()
        bisections.release(self.store, self.id, me=self.me, state=state)

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
