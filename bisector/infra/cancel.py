"""Stopping everything a run has in flight, from the thread that got Ctrl-C.

With K probes at once, the main thread waits on K worker threads, each blocked on a child
process or a container. Ctrl-C (or SIGTERM) reaches only the main thread, so every child
registers how to kill it here while it runs; :func:`stop_all` kills them all, and whatever a
worker then gets back (a process killed by a signal) is never recorded as a verdict, because
:func:`stopping` is set first.

One registry per process: a controller runs one bisection at a time. Work done ahead of
need (``run/prefetch.py``: the next probes' downloads while an oracle runs) runs in a
:class:`Scope` of its own, so that work alone can be dropped when it is no longer needed: in its
thread :func:`stopping` is true once the scope is abandoned, and what it started is killed.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

_lock = threading.Lock()
_live: dict[int, Callable[[], None]] = {}
_ids = itertools.count()
_stopping = threading.Event()


class Stopped(Exception):
    """Raised in a worker that was about to start something after a stop was asked for."""


class Scope:
    """Work that may be dropped on its own (a prefetch): :meth:`abandon` makes
    :func:`stopping` true in the threads that run inside it and kills their children."""

    def __init__(self) -> None:
        self.abandoned = threading.Event()
        self._live: dict[int, Callable[[], None]] = {}

    @contextmanager
    def inside(self) -> Iterator[None]:
        """Run the block in this scope (in the calling thread)."""
        before = getattr(_local, "scope", None)
        _local.scope = self
        try:
            yield
        finally:
            _local.scope = before

    def abandon(self) -> None:
        self.abandoned.set()
        with _lock:
            kills = list(self._live.values())
        for kill in kills:
            with suppress(Exception):
                kill()


_local = threading.local()


def _scope() -> Scope | None:
    return getattr(_local, "scope", None)


def stopping() -> bool:
    scope = _scope()
    return _stopping.is_set() or (scope is not None and scope.abandoned.is_set())


def reset() -> None:
    """A new run starts: forget an earlier stop."""
    _stopping.clear()


@contextmanager
def killable(kill: Callable[[], None]) -> Iterator[None]:
    """Register ``kill`` while the block runs; if a stop came first, do not start at all."""
    scope = _scope()
    with _lock:
        if _stopping.is_set() or (scope is not None and scope.abandoned.is_set()):
            raise Stopped("stopping")
        key = next(_ids)
        _live[key] = kill
        if scope is not None:
            scope._live[key] = kill
    try:
        yield
    finally:
        with _lock:
            _live.pop(key, None)
            if scope is not None:
                scope._live.pop(key, None)


def stop_all() -> None:
    """Mark the run as stopping and kill every registered child (never raises)."""
    _stopping.set()
    with _lock:
        kills = list(_live.values())
    for kill in kills:
        with suppress(Exception):
            kill()
