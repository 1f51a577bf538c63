"""What a run tells whoever watches it (the CLI draws it with rich; a worker logs it).

Called from worker threads too when several probes run at once, so an implementation must be
thread-safe (rich's console is).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Protocol

from bisector.base.kinds import Verdict


class Events(Protocol):
    def note(self, text: str) -> None: ...
    def status(self, text: str) -> None:
        """A step that is no probe's and may take more than a second starts (listing an
        index, reading its wheels' commits, looking for nightlies past it); it lasts until
        the next one or until a probe starts. Said before it starts: never a silent wait."""
    def phase(self, sha: str, text: str) -> None:
        """The probe of ``sha`` starts a step (building, overlaying, running the oracle); it
        lasts until that probe's next step or its end. Keyed by commit because the steps of K
        probes at once interleave."""
    def build_line(self, sha: str, text: str) -> None:
        """The newest non-empty line the running build of ``sha`` wrote to its log (called
        from the thread that follows the log)."""
    def download(self, name: str, done: int, total: int | None) -> None:
        """``done`` bytes of ``name`` so far, ``total`` None while the server has not said.
        Called once more with ``done == total`` when the download ended, also when it broke
        off, so a display can take it down."""
    def round_start(self, round_: int, width: int, left: int) -> None:
        """A search round starts; ``width``: how many probes this run runs at once."""
    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int,
                    eta_s: float | None) -> None:
        """``left``: probes the search needs at most from here; ``eta_s``: how long they
        should take at the probe cost measured on this repository (None: nothing measured)."""
    def probe_done(self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float,
                   reused: bool) -> None: ...
    def terms(self, old: str, new: str) -> None:
        """The words this bisection's verdicts are said in (``broken``/``fixed`` for
        ``--find-fix``), told before its first probe."""


# How a performance run's reason begins: its exit code says nothing of good or bad (the paired
# test decides, over many runs), so progress shows what it measured, not a verdict word.
MEASURED = "measured "


class QuietEvents:
    """Says nothing: tests, ``bisect plan``, library callers."""

    def note(self, text: str) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def phase(self, sha: str, text: str) -> None:
        pass

    def build_line(self, sha: str, text: str) -> None:
        pass

    def download(self, name: str, done: int, total: int | None) -> None:
        pass

    def round_start(self, round_: int, width: int, left: int) -> None:
        pass

    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int,
                    eta_s: float | None) -> None:
        pass

    def probe_done(self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float,
                   reused: bool) -> None:
        pass

    def terms(self, old: str, new: str) -> None:
        pass


# Where the steps of the probe running in this thread go (``running the oracle`` is the
# pipeline's; creating an environment, installing, collecting facts are the executor's). A
# context variable rather than a parameter: every executor and test fake keeps its signature,
# and K probes at once in K threads each see only their own.
_STEP: ContextVar[Callable[[str], None] | None] = ContextVar("bisector_step", default=None)


@contextmanager
def steps_to(say: Callable[[str], None]) -> Iterator[None]:
    """Within the block, :func:`step` in this thread calls ``say``."""
    token = _STEP.set(say)
    try:
        yield
    finally:
        _STEP.reset(token)


def step(text: str) -> None:
    """The current probe starts a step that may take more than a second; nothing when no
    probe listens (``bisect check``, a benchmark, a library caller)."""
    say = _STEP.get()
    if say is not None:
        say(text)


class Every:
    """True at most once per ``seconds`` (the first call always): a download's chunks arrive
    hundreds a second, a display needs a few."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self._last: float | None = None

    def due(self) -> bool:
        now = self.clock()
        if self._last is not None and now - self._last < self.seconds:
            return False
        self._last = now
        return True


# Set in the threads that prepare probes ahead of need (run/prefetch.py): their steps belong
# to no probe yet, so a display shows none of them as a probe's row (the probe's own line
# says later how much was made ahead).
_AHEAD: ContextVar[bool] = ContextVar("bisector_ahead", default=False)


@contextmanager
def flag_set(flag: ContextVar[bool]) -> Iterator[None]:
    """``flag`` true in this thread (its context) while the block runs: how work done ahead
    of need marks itself (``made_ahead``)."""
    token = flag.set(True)
    try:
        yield
    finally:
        flag.reset(token)


def made_ahead() -> AbstractContextManager[None]:
    return flag_set(_AHEAD)


def is_ahead() -> bool:
    return _AHEAD.get()
