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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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

from bisector.base import defaults
from bisector.base.clock import MONOTONIC, Clock
from bisector.base.escape import safe_line
from bisector.base.events import MEASURED, is_ahead
from bisector.cli.console import err, escape, out, real
from bisector.core.search import Verdict

if TYPE_CHECKING:
    from bisector.oracle.manual import ManualProbe

__all__ = ["RichEvents", "clock", "err", "escape", "out"]

DOWNLOAD, STEP = "download", "step"  # the two kinds of rows of the live display
TICK_S = 0.25  # how often the line printer (no terminal) looks at the rows
LINE_CHARS = 120  # of a build's log line: a compiler command line can be kilobytes


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def download_line(name: str, done: float, total: float | None, speed: float | None,
                  left: float | None) -> str:
    """``downloading X: 12.0 of 100.0 MiB (12%), 3.1 MiB/s, about 28 s left``; bytes and
    speed alone when the server did not say the size."""
    if total:
        text = f"downloading {name}: {mib(done)} of {mib(total)} ({done / total:.0%})"
    else:
        text = f"downloading {name}: {mib(done)} so far (the server did not say the size)"
    if speed:
        text += f", {mib(speed)}/s"
        if left is not None and total:
            text += f", about {clock(left)} left"
    return text


@dataclass
class _Said:
    """When the line printer last spoke of a row (None: not yet)."""

    at: float | None = None


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
    thread-safe, and the row maps here are guarded by a lock).

    Where the console is no terminal (a log file, CI, a pipe) a live display shows nothing,
    so ``lines`` (the default there) prints the rows as lines instead: a step once it has run
    :data:`~bisector.base.defaults.STEP_LINE_AFTER_S` and then every few minutes, a download
    with its bytes, speed and time left every :data:`~bisector.base.defaults.DOWNLOAD_LINE_S`
    and once more when it ends. Steps shorter than that say nothing, so a quick command's
    output (and a one-line error) stays as it was.

    The rows' times and the line printer's pace are read on ``clock`` (a test steps one)."""

    def __init__(self, console: Console, lines: bool | None = None,
                 probe_lines: bool = True, clock: Clock = MONOTONIC) -> None:
        self.console = console = real(console)  # rich's own, not the stand-in of console.py
        self.lines = (not console.is_terminal) if lines is None else lines
        # ``bisect check`` says its one verdict itself: its probe's end is no line of its own
        self.probe_lines, self.clock = probe_lines, clock
        self.progress = Progress(
            SpinnerColumn(), _Step(),
            _When(BarColumn(), DOWNLOAD, sized=True),
            _When(TaskProgressColumn(), DOWNLOAD, sized=True),
            _When(_Bytes(binary_units=True), DOWNLOAD),
            _When(TransferSpeedColumn(), DOWNLOAD),
            _When(TimeRemainingColumn(), DOWNLOAD, sized=True),
            console=console, transient=True, refresh_per_second=4, get_time=clock.now)
        self._lock = threading.Lock()
        self._steps: dict[str, TaskID] = {}  # probe's commit -> its row
        self._downloads: dict[str, TaskID] = {}  # file name -> its row
        self._general: TaskID | None = None  # the row of a step that is no probe's
        self._said: dict[TaskID, _Said] = {}  # rows the line printer follows
        self._live = False
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._words = {Verdict.GOOD: "good", Verdict.BAD: "bad", Verdict.SKIP: "skip"}

    def terms(self, old: str, new: str) -> None:
        self._words.update({Verdict.GOOD: old, Verdict.BAD: new})

    def _add(self, description: str, **fields: Any) -> TaskID:
        """A new row (the display starts with the first one); the caller holds the lock."""
        if not self._live:
            self.progress.start()
            self._live = True
        if self.lines and self._ticker is None:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick_loop, name="progress-lines",
                                            daemon=True)
            self._ticker.start()
        task = self.progress.add_task(description, total=None, **fields)
        self._said[task] = _Said()
        return task

    def _remove(self, task: TaskID) -> None:
        """Take a row down; a download the line printer spoke of gets its last line. The
        caller holds the lock."""
        said = self._said.pop(task, _Said())
        if self.lines and said.at is not None:
            row = self._row(task)
            if row is not None and row.fields.get("kind") == DOWNLOAD:
                took = row.elapsed or 0.0
                rate = f" ({mib(row.completed / took)}/s)" if took > 0 else ""
                name = row.description.removeprefix("downloading ")
                self.console.print(f"downloaded {escape(name)}: {mib(row.completed)} in "
                                   f"{clock(took)}{rate}", highlight=False)
        self.progress.remove_task(task)

    def _row(self, task: TaskID) -> Task | None:
        return next((t for t in self.progress.tasks if t.id == task), None)

    def _tick_loop(self) -> None:
        while not self.clock.wait(self._stop, TICK_S):
            self.tick()

    def tick(self) -> None:
        """Print a line for each row that has waited long enough since it started or was
        last printed (the line printer's thread calls it every :data:`TICK_S` of the clock)."""
        if not self.lines:
            return
        now = self.progress.get_time()
        with self._lock:
            for row in self.progress.tasks:
                said = self._said.get(row.id)
                if said is None or row.start_time is None:
                    continue
                download = row.fields.get("kind") == DOWNLOAD
                since = now - (said.at if said.at is not None else row.start_time)
                wait = (defaults.STEP_LINE_AFTER_S if said.at is None else
                        defaults.DOWNLOAD_LINE_S if download else defaults.STEP_LINE_EVERY_S)
                if since < wait:
                    continue
                said.at = now
                if download:
                    name = row.description.removeprefix("downloading ")
                    text = download_line(name, row.completed, row.total, row.speed,
                                         row.time_remaining)
                else:
                    text = f"{row.description} ({clock(now - row.start_time)} so far)"
                self.console.print(escape(text), style="dim", highlight=False)

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]note:[/] {escape(text)}")

    def status(self, text: str) -> None:
        """A step of no probe's: one row that each new step takes over (its clock restarts)."""
        text = safe_line(text)
        with self._lock:
            if self._general is not None:
                self._remove(self._general)
            self._general = self._add(text, kind=STEP, line="")

    def round_start(self, round_: int, width: int, left: int) -> None:
        if width > 1:
            self.console.print(f"[bold]round {round_}[/] (up to {width} probes at once)")

    def download(self, name: str, done: int, total: int | None) -> None:
        with self._lock:
            task = self._downloads.get(name)
            if total is not None and done >= total:  # ended (or broke off): take the row down
                if task is not None:
                    self.progress.update(task, completed=done)
                    self._remove(self._downloads.pop(name))
                return
            if task is None:
                task = self._downloads[name] = self._add(f"downloading {safe_line(name)}",
                                                         kind=DOWNLOAD)
            self.progress.update(task, completed=done, total=total)

    def phase(self, sha: str, text: str) -> None:
        if is_ahead():  # a step of a probe prepared ahead: no probe's row yet
            return
        text = safe_line(text)  # rows are rich Text, not markup: filtered, not escaped
        with self._lock:
            task = self._steps.get(sha)
            if task is None:
                self._steps[sha] = self._add(text, kind=STEP, line="")
            else:  # a new step of the same probe: its clock starts again
                self.progress.reset(task, description=text, kind=STEP, line="")
                self._said[task] = _Said()

    def build_line(self, sha: str, text: str) -> None:
        if is_ahead():
            return
        with self._lock:
            task = self._steps.get(sha)
            if task is not None:
                self.progress.update(task, line=safe_line(text))

    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int,
                    eta_s: float | None) -> None:
        # lazy: `bisect --help` and completion import none of this
        from bisector.app.plan import human

        with self._lock:  # the steps before the first probe (listing an index) are over
            if self._general is not None:
                self._remove(self._general)
                self._general = None
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
                self._remove(task)
        if not self.probe_lines:
            return
        colour = {Verdict.GOOD: "green", Verdict.BAD: "red", Verdict.SKIP: "yellow"}[verdict]
        word = self._words[verdict]
        if reason.startswith(MEASURED) and verdict is not Verdict.SKIP:
            colour, word, reason = "cyan", "measured", reason[len(MEASURED):]
        how = "reused verdict" if reused else f"{seconds:.1f}s"
        self.console.print(
            f"  [{colour}]{word}[/] [cyan]{sha[:12]}[/] ({how}; "
            f"{escape(reason)})"
        )

    def ask(self, probe: ManualProbe) -> int:
        """``--manual``: the commit, the shell line, then bad/yes, good/no or skip as ``git
        bisect`` and mozregression take them; ``back`` takes the previous answer back,
        ``retry`` makes the tree and environment again and opens the shell, ``shell`` opens
        it here and asks again, ``quit`` stops the run as Ctrl-C does. Answers are read from
        standard input, so a script can pipe them (words: ``oracle/manual.REPLIES``)."""
        quiet, self.console.quiet = self.console.quiet, False  # `-q` never hides a question
        try:
            return self._ask(probe)
        finally:
            self.console.quiet = quiet

    def _ask(self, probe: ManualProbe) -> int:
        # lazy: `bisect --help` and completion import none of this
        from bisector.oracle.manual import Reply, reply

        self.close()  # no live display under a prompt
        again = f" (made again: retry {probe.retried})" if probe.retried else ""
        self.console.print(
            f"[bold]judge {probe.commit[:12]}[/] ({escape(probe.obtained)}){again}. Try it in a "
            f"shell in its tree with its environment:\n  {escape(probe.shell)}")
        if probe.retried:
            subprocess.run(["/bin/sh", "-c", probe.shell], check=False)
        back = f" (undo {escape(probe.undo)})" if probe.undo else ""
        while True:
            self.console.print("does it show the bug? [bold]bad[/]/yes/y, [bold]good[/]/no/n, "
                               f"[bold]skip[/], [bold]back[/]{back}, [bold]retry[/], "
                               "[bold]shell[/] or [bold]quit[/]: ", end="")
            line = sys.stdin.readline()
            if not line:  # end of input: nobody left to ask
                raise KeyboardInterrupt
            word = line.strip().lower()
            code = reply(word)
            if code == Reply.BACK and probe.undo is None:
                self.console.print("[yellow]nothing to undo: no answer was given yet[/]")
            elif code is not None:
                return code
            elif word in ("q", "quit"):
                raise KeyboardInterrupt
            elif word == "shell":
                subprocess.run(["/bin/sh", "-c", probe.shell], check=False)
            else:
                self.console.print(f"[yellow]{escape(word)!r} is not an answer[/]")

    def close(self) -> None:
        """Take the live display down (what it showed was transient); safe to call twice."""
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
        self._ticker = None
        with self._lock:
            general = [] if self._general is None else [self._general]
            for task in [*self._steps.values(), *self._downloads.values(), *general]:
                self._remove(task)
            self._steps.clear()
            self._downloads.clear()
            self._general = None
            if self._live:
                self.progress.stop()
                self._live = False


@contextmanager
def waiting(console: Console = err, probe_lines: bool = True) -> Iterator[RichEvents]:
    """Events for a command's steps before (or without) a run: listing an index in ``start``
    or ``plan``, the one probe of ``check``; the display is taken down when the block ends,
    whatever happens in it."""
    events = RichEvents(console, probe_lines=probe_lines)
    try:
        yield events
    finally:
        events.close()
