"""What a run tells whoever watches it (the CLI draws it with rich; a worker logs it).

Called from worker threads too when several probes run at once, so an implementation must be
thread-safe (rich's console is).
"""

from __future__ import annotations

from typing import Protocol

from bisector.base.kinds import Verdict


class Events(Protocol):
    def note(self, text: str) -> None: ...
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


class QuietEvents:
    """Says nothing: tests, ``bisect plan``, library callers."""

    def note(self, text: str) -> None:
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
