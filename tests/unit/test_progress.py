"""The live display: downloads with bytes and speed (a bar only once the size is known), probe
steps with a ticking clock and a build's newest log line, and a time estimate per probe."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import httpx
from rich.console import Console

from bisector.artifacts.index import whole_size
from bisector.base.events import Every, step, steps_to
from bisector.cli.progress import RichEvents, clock, download_line
from bisector.core.search import Verdict
from bisector.infra.proc import follow
from tests.clocks import SteppedClock

LINES = "progress-lines"  # the line printer's thread


def events() -> tuple[RichEvents, Console, SteppedClock]:
    """The live display (as a terminal shows it), on a clock the test steps."""
    console = Console(file=io.StringIO(), width=200, force_terminal=False, color_system=None)
    tick = SteppedClock()
    return RichEvents(console, lines=False, clock=tick), console, tick


def rows(ev: RichEvents) -> str:
    """What the live display shows now, as plain text."""
    c = Console(file=io.StringIO(), width=200, color_system=None)
    c.print(ev.progress.make_tasks_table(ev.progress.tasks))
    assert isinstance(c.file, io.StringIO)
    return c.file.getvalue()


def test_a_download_of_unknown_size_shows_bytes_and_no_bar() -> None:
    ev, _, _ = events()
    try:
        ev.download("torch.whl", 30 * 2**20, None)
        shown = rows(ev)
        assert "downloading torch.whl" in shown and "30.0 MiB" in shown
        assert "%" not in shown and "━" not in shown and "of 0" not in shown
        assert "/?" not in shown
        ev.download("torch.whl", 60 * 2**20, 120 * 2**20)  # the size became known
        shown = rows(ev)
        assert "50%" in shown and "60.0/120.0 MiB" in shown
    finally:
        ev.close()


def test_a_download_row_goes_when_it_ends_and_a_late_end_is_ignored() -> None:
    ev, _, _ = events()
    try:
        ev.download("a.whl", 10, None)
        ev.download("b.whl", 10, 100)
        ev.download("a.whl", 25, 25)  # the provider's end call after an unsized download
        ev.download("b.whl", 100, 100)  # the last chunk
        ev.download("b.whl", 100, 100)  # then its end call: no row comes back
        assert ev.progress.tasks == []
    finally:
        ev.close()


def test_a_step_shows_its_clock_and_a_builds_newest_line() -> None:
    ev, _, tick = events()
    sha = "ab" * 20
    try:
        ev.phase(sha, f"building {sha[:12]} from source")
        tick.advance(12)
        ev.build_line(sha, "[412/5000] Building CXX object aten/foo.o")
        shown = rows(ev)
        assert f"building {sha[:12]} from source (12 s)" in shown
        assert "[412/5000] Building CXX object aten/foo.o" in shown
        ev.phase(sha, f"running oracle on {sha[:12]}")  # the next step: new clock, no line
        tick.advance(3)
        shown = rows(ev)
        assert f"running oracle on {sha[:12]} (3 s)" in shown
        assert "Building CXX" not in shown and "building" not in shown
        ev.probe_done(0, sha, Verdict.BAD, "exit 1", 15.0, False)
        assert ev.progress.tasks == []
    finally:
        ev.close()


def test_steps_of_probes_at_once_are_rows_of_their_own() -> None:
    ev, _, _ = events()
    a, b = "a" * 40, "b" * 40
    try:
        ev.phase(a, "building a")
        ev.phase(b, "building b")
        ev.build_line(b, "only b's line")
        shown = rows(ev).splitlines()
        line_a = next(ln for ln in shown if "building a" in ln)
        line_b = next(ln for ln in shown if "building b" in ln)
        assert "only b's line" in line_b and "only b's line" not in line_a
    finally:
        ev.close()


def test_probe_line_says_the_time_left_only_when_measured() -> None:
    ev, console, _ = events()
    ev.probe_start(3, 10, "c" * 40, "subject", 8, 240.0)
    ev.probe_start(4, 11, "d" * 40, "subject", 7, None)
    assert isinstance(console.file, io.StringIO)
    lines = console.file.getvalue().splitlines()
    assert lines[0].startswith("probe 3 (about 8 left, about 4 min left):")
    assert lines[1].startswith("probe 4 (about 7 left):")


def test_clock_reads_well_as_it_ticks() -> None:
    assert [clock(s) for s in (0, 12.9, 65, 3599, 3725)] == [
        "0 s", "12 s", "1 min 05 s", "59 min 59 s", "1 h 02 min"]


def test_whole_size_comes_from_the_server_or_is_unknown() -> None:
    assert whole_size(httpx.Response(200, headers={"content-length": "500"}), 0) == 500
    ranged = httpx.Response(206, headers={"content-range": "bytes 100-499/500",
                                          "content-length": "400"})
    assert whole_size(ranged, 100) == 500
    # No Content-Range on a 206: what is still to come plus what is on disk.
    assert whole_size(httpx.Response(206, headers={"content-length": "400"}), 100) == 500
    assert whole_size(httpx.Response(200), 0) is None
    assert whole_size(httpx.Response(200, headers={"content-length": "80",
                                                   "content-encoding": "gzip"}), 0) is None


def test_follow_tells_the_newest_whole_line_and_the_last_one_at_the_end(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("")
    seen: list[str] = []
    clock = SteppedClock()
    with follow(log, seen.append, every_s=0.5, clock=clock), log.open("a") as f:
        f.write("first\n\n   \nsecond\nhalf a li")
        f.flush()
        clock.step("follow-build.log", 0.5)  # the follower's next look
        assert seen == ["second"], "an unfinished line waits; blank lines are never told"
        f.write("ne\r[1/3] step\r[2/3] step\r")
        f.flush()
        clock.step("follow-build.log", 0.5)
        assert seen[-1] == "[2/3] step", "a carriage return ends a line too"
        f.write("done, no newline")
    assert seen[-1] == "done, no newline", "the end tells the unfinished last line"
    assert "half a line" not in seen  # only the newest line of each look


def test_follow_without_a_callback_does_nothing(tmp_path: Path) -> None:
    before = threading.active_count()
    with follow(tmp_path / "nothing.log", None):
        assert threading.active_count() == before


def line_events() -> tuple[RichEvents, io.StringIO, SteppedClock]:
    """Events as a log or CI sees them: rows become lines, printed by the line printer's
    thread when the clock the test steps says they are due."""
    out = io.StringIO()
    tick = SteppedClock()
    ev = RichEvents(Console(file=out, width=300, color_system=None, force_terminal=False),
                    clock=tick)
    assert ev.lines
    return ev, out, tick


def test_without_a_terminal_a_step_that_lasts_gets_a_line_and_a_quick_one_none() -> None:
    ev, out, tick = line_events()
    try:
        ev.status("listing torchlet on the nightly index http://127.0.0.1:1/i/torchlet/")
        tick.step(LINES, 0.5)
        assert out.getvalue() == ""  # under a second: a quick command's output stays as it was
        ev.status("reading the commit of 3 nightly wheel(s) not seen before")
        tick.step(LINES, 1.5)
        assert out.getvalue() == ("reading the commit of 3 nightly wheel(s) not seen before "
                                  "(1 s so far)\n")
        tick.step(LINES, 0.5)  # said once, then again only after a long while
        assert out.getvalue().count("\n") == 1
        tick.step(LINES, 60.5)
        assert out.getvalue().splitlines()[-1].endswith("(1 min 02 s so far)")
        sha = "ab" * 20
        ev.phase(sha, f"installing torchlet-0.1.whl for {sha[:12]}")
        tick.step(LINES, 2)
        assert out.getvalue().splitlines()[-1] == (f"installing torchlet-0.1.whl for "
                                                   f"{sha[:12]} (2 s so far)")
    finally:
        ev.close()


def test_without_a_terminal_a_download_line_has_bytes_speed_and_time_left() -> None:
    ev, out, tick = line_events()
    try:
        ev.download("torch.whl", 2**20, 10 * 2**20)
        tick.step(LINES, 1)  # a second in: its first line, no speed known yet
        ev.download("torch.whl", 2 * 2**20, 10 * 2**20)
        tick.step(LINES, 1)  # the next line only after DOWNLOAD_LINE_S
        ev.download("torch.whl", 3 * 2**20, 10 * 2**20)
        tick.step(LINES, 4)
        assert out.getvalue().splitlines() == [
            "downloading torch.whl: 1.0 MiB of 10.0 MiB (10%)",
            "downloading torch.whl: 3.0 MiB of 10.0 MiB (30%), 1.0 MiB/s, about 7 s left"]
        ev.download("torch.whl", 10 * 2**20, 10 * 2**20)  # the end
        assert out.getvalue().splitlines()[-1] == ("downloaded torch.whl: 10.0 MiB in 6 s "
                                                   "(1.7 MiB/s)")
    finally:
        ev.close()


def test_download_line_without_a_size_says_bytes_and_speed_only() -> None:
    assert download_line("t.whl", 3 * 2**20, None, 2**20, None) == (
        "downloading t.whl: 3.0 MiB so far (the server did not say the size), 1.0 MiB/s")
    assert download_line("t.whl", 0, 100, None, None) == (
        "downloading t.whl: 0.0 MiB of 0.0 MiB (0%)")


def test_every_lets_through_the_first_call_then_one_per_period() -> None:
    tick = SteppedClock()
    often = Every(0.5, clock=tick)
    seen = []
    for _ in range(10):
        seen.append(often.due())
        tick.advance(0.125)  # exact in binary: no rounding at the period
    assert seen == [True, False, False, False, True, False, False, False, True, False]


def test_steps_reach_the_probe_that_runs_in_this_thread_only() -> None:
    heard: list[str] = []
    step("nobody listens")  # outside a probe: nothing, no error
    with steps_to(heard.append):
        step("creating an environment")
        other = threading.Thread(target=step, args=("another thread's step",))
        other.start()
        other.join()
    step("after the probe")
    assert heard == ["creating an environment"]
