"""Terminal output: live progress, over the two consoles of bisector/cli/console.py.

:func:`escape` is the CLI's one filter for text put into a rich markup string: redacted, every
control character made visible (:mod:`bisector.base.escape`), then rich's markup escaped, so a
subject, an oracle's output or an index URL in an error neither drives the terminal nor shows
a token. Every CLI module imports it (and ``err``, ``out``) from bisector/cli/console.py, which
loads no rich until something is printed; this module imports rich's progress display, so the
commands import it inside the function that shows progress."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text

from bisector.base.escape import safe_line
from bisector.cli.console import err, escape, out, real
from bisector.core.search import Verdict

if TYPE_CHECKING:
    from bisector.oracle.manual import ManualProbe

__all__ = ["RichEvents", "clock", "err", "escape", "out"]

DOWNLOAD, STEP = "download", "step"  # the two kinds of rows of the live display
LINE_CHARS = 120  # of a build's log line: a compiler command line can be kilobytes


def clock(seconds: float) -> str:
    """``12 s``, ``3 min 05 s``, ``1 h 02 min``: an elapsed time that reads well as it ticks."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class _When(ProgressColumn):
    """Another column, drawn only for rows of one kind (and, ``sized``, only once the total
    is known): one Progress shows downloads (bytes, speed, a bar once the size is known) and
    probe steps (elapsed time, a build's newest log line) side by side."""

    def __init__(self, column: ProgressColumn, kind: str, sized: bool = False) -> None:
        super().__init__()
        self.column, self.kind, self.sized = column, kind, sized

    def render(self, task: Task) -> RenderableType:
        if task.fields.get("kind") != self.kind or (self.sized and task.total is None):
            return Text("")
        return self.column.render(task)


class _Bytes(DownloadColumn):
    """Bytes so far, "of" the total once it is known (rich's own column shows ``12.0/? MiB``
    for a download whose size the server did not say)."""

    def render(self, task: Task) -> Text:
        if task.total is not None:
            return super().render(task)
        return Text(f"{task.completed / 2**20:,.1f} MiB", style="progress.download")


class _Step(ProgressColumn):
    """The row's text; for a probe's step also how long it has run (ticking) and, for a build,
    the newest line of its log."""

    def render(self, task: Task) -> Text:
        text = Text(task.description, no_wrap=True, overflow="ellipsis")
        if task.fields.get("kind") == STEP:
            text.append(f" ({clock(task.elapsed or 0.0)})", style="progress.elapsed")
            line = str(task.fields.get("line") or "")
            if line:
                text.append(f"  {line[:LINE_CHARS]}", style="dim")
        return text


class RichEvents:
    """Live progress: a line per probe as it starts and ends, and below them one live display
    with a row per download (bytes, speed, time left) and per probe step in flight (building,
    overlaying, running the oracle: how long so far; a build's newest log line).

    One :class:`~rich.progress.Progress` serves the whole run, because a console can show only
    one live display at a time and K probes run at once (from K threads: rich's Progress is
    thread-safe, and the row maps here are guarded by a lock)."""

    def __init__(self, console: Console) -> None:
        self.console = console = real(console)  # rich's own, not the stand-in of console.py
        self.progress = Progress(
            SpinnerColumn(), _Step(),
            _When(BarColumn(), DOWNLOAD, sized=True),
            _When(TaskProgressColumn(), DOWNLOAD, sized=True),
            _When(_Bytes(binary_units=True), DOWNLOAD),
            _When(TransferSpeedColumn(), DOWNLOAD),
            _When(TimeRemainingColumn(), DOWNLOAD, sized=True),
            console=console, transient=True, refresh_per_second=4)
        self._lock = threading.Lock()
        self._steps: dict[str, TaskID] = {}  # probe's commit -> its row
        self._downloads: dict[str, TaskID] = {}  # file name -> its row
        self._live = False

    def _add(self, description: str, **fields: Any) -> TaskID:
        """A new row (the display starts with the first one); the caller holds the lock."""
        if not self._live:
            self.progress.start()
            self._live = True
        return self.progress.add_task(description, total=None, **fields)

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]note:[/] {escape(text)}")

    def round_start(self, round_: int, width: int, left: int) -> None:
        if width > 1:
            self.console.print(f"[bold]round {round_}[/] (up to {width} probes at once)")

    def download(self, name: str, done: int, total: int | None) -> None:
        with self._lock:
            task = self._downloads.get(name)
            if total is not None and done >= total:  # ended (or broke off): take the row down
                if task is not None:
                    self.progress.remove_task(self._downloads.pop(name))
                return
            if task is None:
                task = self._downloads[name] = self._add(f"downloading {safe_line(name)}",
                                                         kind=DOWNLOAD)
            self.progress.update(task, completed=done, total=total)

    def phase(self, sha: str, text: str) -> None:
        text = safe_line(text)  # rows are rich Text, not markup: filtered, not escaped
        with self._lock:
            task = self._steps.get(sha)
            if task is None:
                self._steps[sha] = self._add(text, kind=STEP, line="")
            else:  # a new step of the same probe: its clock starts again
                self.progress.reset(task, description=text, kind=STEP, line="")

    def build_line(self, sha: str, text: str) -> None:
        with self._lock:
            task = self._steps.get(sha)
            if task is not None:
                self.progress.update(task, line=safe_line(text))

    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int,
                    eta_s: float | None) -> None:
        # lazy: `bisect --help` and completion import none of this
        from bisector.app.plan import human

        eta = f", about {human(eta_s)} left" if eta_s is not None else ""
        self.console.print(
            f"[bold]probe {seq}[/] (about {left} left{eta}): [cyan]{sha[:12]}[/] "
            f"{escape(subject[:70])}"
        )

    def probe_done(
        self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float, reused: bool
    ) -> None:
        with self._lock:
            task = self._steps.pop(sha, None)
            if task is not None:
                self.progress.remove_task(task)
        colour = {Verdict.GOOD: "green", Verdict.BAD: "red", Verdict.SKIP: "yellow"}[verdict]
        how = "reused verdict" if reused else f"{seconds:.1f}s"
        self.console.print(
            f"  [{colour}]{verdict.value}[/] [cyan]{sha[:12]}[/] ({how}; {escape(reason)})"
        )

    def ask(self, probe: ManualProbe) -> int:
        """``--manual``: the commit, the shell line, then good / bad / skip as ``git bisect``
        takes them (``shell`` opens the shell here and asks again; ``quit`` stops the run as
        Ctrl-C does). Answers are read from standard input, so a script can pipe them."""
        quiet, self.console.quiet = self.console.quiet, False  # `-q` never hides a question
        try:
            return self._ask(probe)
        finally:
            self.console.quiet = quiet

    def _ask(self, probe: ManualProbe) -> int:
        # lazy: `bisect --help` and completion import none of this
        from bisector.oracle.manual import Answer

        self.close()  # no live display under a prompt
        self.console.print(
            f"[bold]judge {probe.commit[:12]}[/] ({escape(probe.obtained)}). Try it in a shell "
            f"in its tree with its environment:\n  {escape(probe.shell)}")
        answers = {"good": Answer.NO_BUG, "g": Answer.NO_BUG, "bad": Answer.BUG,
                   "b": Answer.BUG, "skip": Answer.SKIP, "s": Answer.SKIP}
        while True:
            self.console.print("does it show the bug? [bold]bad[/] (yes), [bold]good[/] (no), "
                               "[bold]skip[/], [bold]shell[/] or [bold]quit[/]: ", end="")
            line = sys.stdin.readline()
            if not line:  # end of input: nobody left to ask
                raise KeyboardInterrupt
            word = line.strip().lower()
            if word in answers:
                return answers[word]
            if word in ("q", "quit"):
                raise KeyboardInterrupt
            if word == "shell":
                subprocess.run(["/bin/sh", "-c", probe.shell], check=False)
                continue
            self.console.print(f"[yellow]{escape(word)!r} is not an answer[/]")

    def close(self) -> None:
        """Take the live display down (what it showed was transient); safe to call twice."""
        with self._lock:
            for task in [*self._steps.values(), *self._downloads.values()]:
                self.progress.remove_task(task)
            self._steps.clear()
            self._downloads.clear()
            if self._live:
                self.progress.stop()
                self._live = False
