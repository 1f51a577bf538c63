"""One error hierarchy for the whole tool.

Every failure a user can cause or meet has a class here with its own exit code, and a message
that says what went wrong *and what to do*. The CLI prints the message on one line; the traceback
only with ``--debug``. Codes stay clear of 0/1/125 so scripts can tell a bisector failure from an
oracle verdict.
"""

from __future__ import annotations


class BisectorError(Exception):
    """Base class: a problem the user can act on."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(BisectorError):
    """Bad input on the command line (an option that cannot work)."""

    exit_code = 2


class RepoError(BisectorError):
    """The repository or a ref in it is not usable (not a repo, unknown ref, bad range)."""

    exit_code = 3


class OracleError(BisectorError):
    """The oracle cannot be found or its metadata is malformed."""

    exit_code = 4


class StoreError(BisectorError):
    """The verdict store cannot be opened or is from another schema."""

    exit_code = 5


class NotFoundError(BisectorError):
    """A bisection id (or similar) that the store does not hold."""

    exit_code = 6


class EndpointError(BisectorError):
    """The good or bad endpoint does not behave as claimed, so there is nothing to bisect."""

    exit_code = 7


class BusyError(BisectorError):
    """Another live process is running this bisection."""

    exit_code = 8


class BuildError(BisectorError):
    """An artifact could not be produced. Inside a bisection this becomes a SKIP, not an exit."""

    exit_code = 9


class LeaseLost(BisectorError):
    """Another process took this bisection over (this one's heartbeat went stale); this one
    stops writing to it. Every run it finished is kept as a run."""

    exit_code = 10


class TaskAborted(Exception):
    """A queued probe or build stopped because its job was asked to abort (`bisect cancel`):
    nothing was recorded. The queue's adapter (``queue/procrastinate.py``) hands it to the
    queue library as that library's own abort, so the library's exceptions stay there."""


class InterruptedBisection(BisectorError):
    """The user stopped the run; everything measured so far is stored."""

    exit_code = 130


class Cancelled(InterruptedBisection):
    """``bisect cancel`` stopped the bisection: no probe in flight was judged, and ``resume``
    finishes it."""
