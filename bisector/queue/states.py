"""A queue job's state and a queue's counts, in bisector's words.

The coordinator (``run/remote.py``), ``bisect workers`` and the web view ask the queue what
became of a job and how many wait; they read these values, never the queue library's own
status names, which stay in :mod:`bisector.queue.procrastinate` (the one module that imports
Procrastinate and translates its statuses into these). Another queue behind the same protocol
would translate its own the same way, and nothing above the queue would change.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class JobState(StrEnum):
    """What became of one job."""

    WAITING = "waiting"  # enqueued, no worker has taken it yet
    RUNNING = "running"  # a worker is running it
    DONE = "done"  # it ran to its end (its verdict, or its build, is in the store)
    FAILED = "failed"  # it failed for good (a bug, a box missing the clone): retries spent
    CANCELLED = "cancelled"  # stopped before any worker took it
    STOPPING = "stopping"  # its worker was asked to stop it and has not yet
    STOPPED = "stopped"  # stopped while a worker ran it
    MISSING = "missing"  # the queue no longer knows the job (deleted by hand)

    @property
    def ended(self) -> bool:
        """Nothing more will happen to the job: whatever it wrote is all there is."""
        return self in _ENDED

    @property
    def stopped(self) -> bool:
        """Stopped from outside (``bisect cancel``, a shutdown), before or while it ran."""
        return self in (JobState.CANCELLED, JobState.STOPPED)


_ENDED = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED, JobState.STOPPED,
                    JobState.MISSING})


@dataclass(frozen=True)
class QueueCounts:
    """How many jobs of one of bisector's queues are in each state (``bisect workers``)."""

    name: str
    waiting: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    stopped: int = 0  # cancelled before they ran, or stopped while they ran

    def as_dict(self) -> dict[str, str | int]:
        """The JSON of ``bisect workers --json``'s ``queues``."""
        return {"name": self.name, "waiting": self.waiting, "running": self.running,
                "done": self.done, "failed": self.failed, "stopped": self.stopped}
