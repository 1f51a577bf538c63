"""Stopping everything a run has in flight, from the thread that got Ctrl-C.

With K probes at once, the main thread waits on K worker threads, each blocked on a child
process or a container. Ctrl-C (or SIGTERM) reaches only the main thread, so every child
registers how to kill it here while it runs; :func:`stop_all` kills them all, and whatever a
worker then gets back (a process killed by a signal) is never recorded as a verdict, because
:func:`stopping` is set first.

One registry per process: a controller runs one bisection at a time.
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


def stopping() -> bool:
    return _stopping.is_set()


def reset() -> None:
    """A new run starts: forget an earlier stop."""
    _stopping.clear()


@contextmanager
def killable(kill: Callable[[], None]) -> Iterator[None]:
    """Register ``kill`` while the block runs; if a stop came first, do not start at all."""
    with _lock:
        if _stopping.is_set():
            raise Stopped("stopping")
        key = next(_ids)
        _live[key] = kill
    try:
        yield
    finally:
        with _lock:
            _live.pop(key, None)


def stop_all() -> None:
    """Mark the run as stopping and kill every registered child (never raises)."""
    _stopping.set()
    with _lock:
        kills = list(_live.values())
    for kill in kills:
        with suppress(Exception):
            kill()
