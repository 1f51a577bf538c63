"""Terminal output: two consoles (progress on stderr, results on stdout) and live progress."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from bisector.core.search import Verdict

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


class RichEvents:
    """Live progress: one line per probe, a spinner while a build or an oracle runs.

    Called from several threads when probes run at once (rich's console is thread-safe)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: Any = None

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]note:[/] {escape(text)}")

    def round_start(self, round_: int, width: int, left: int) -> None:
        if width > 1:
            self.console.print(f"[bold]round {round_}[/] (up to {width} probes at once)")

    def download(self, name: str, done: int, total: int) -> None:
        pct = f" {100 * done / total:.0f}%" if total else ""
        size = f"{done / 2**20:.0f} of {total / 2**20:.0f} MiB" if total else \
            f"{done / 2**20:.0f} MiB"
        self.phase(f"downloading {name}: {size}{pct}")

    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int) -> None:
        self.console.print(
            f"[bold]probe {seq}[/] (about {left} left): [cyan]{sha[:12]}[/] {escape(subject[:70])}"
        )

    def phase(self, text: str) -> None:
        if self.status is None:
            self.status = self.console.status(escape(text))
            self.status.start()
        else:
            self.status.update(escape(text))

    def probe_done(
        self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float, reused: bool
    ) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        colour = {Verdict.GOOD: "green", Verdict.BAD: "red", Verdict.SKIP: "yellow"}[verdict]
        how = "reused verdict" if reused else f"{seconds:.1f}s"
        self.console.print(
            f"  [{colour}]{verdict.value}[/] [cyan]{sha[:12]}[/] ({how}; {escape(reason)})"
        )

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
