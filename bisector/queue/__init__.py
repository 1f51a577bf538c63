"""The job queue behind :class:`bisector.run.remote.Queue`: Procrastinate on PostgreSQL
(:mod:`bisector.queue.procrastinate`, imported only where a queue is used, since procrastinate is
the optional ``postgres`` extra)."""

from __future__ import annotations

import importlib.util

from bisector.base.errors import UsageError


def need_queue(required: bool = True) -> bool:
    """Is the queue's package (procrastinate, the ``postgres`` extra) installed? A one-line
    error saying how to get it when ``required``."""
    if importlib.util.find_spec("procrastinate") is not None:
        return True
    if required:
        raise UsageError("workers need the procrastinate package: pip install "
                         "'bisector[postgres]' (or pip install 'procrastinate>=3')")
    return False
