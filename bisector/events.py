"""What a run tells whoever watches it (the CLI draws it with rich; a worker logs it).

Called from worker threads too when several probes run at once, so an implementation must be
thread-safe (rich's console is).
"""

from __future__ import annotations

from typing import Protocol

from bisector.core.search import Verdict


class Events(Protocol):
    def note(self, text: str) -> None: ...
    def phase(self, text: str) -> None: ...
    def download(self, name: str, done: int, total: int) -> None: ...
    def round_start(self, round_: int, width: int, left: int) -> None:
        """A search round starts; ``width``: how many probes this run runs at once."""
    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int) -> None: ...
    def probe_done(self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float,
                   reused: bool) -> None: ...


class QuietEvents:
    """Says nothing: tests, ``bisect plan``, library callers."""

    def note(self, text: str) -> None:
        pass

    def phase(self, text: str) -> None:
        pass

    def download(self, name: str, done: int, total: int) -> None:
        pass

    def round_start(self, round_: int, width: int, left: int) -> None:
        pass

    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int) -> None:
        pass

    def probe_done(self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float,
                   reused: bool) -> None:
        pass
