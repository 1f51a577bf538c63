"""Run a child process with logs on disk and a timeout that kills its whole process group.

Builds and oracles both go through here: one place that gets the hard parts right (a new
session so grandchildren die too, SIGTERM then SIGKILL after a grace period, and the child
killed even when the controller is interrupted while waiting).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bisector.base import defaults
from bisector.base.clock import MONOTONIC, Clock
from bisector.base.paths import REAPER_SCRIPT
from bisector.infra import cancel


@dataclass(frozen=True)
class ProcResult:
    returncode: int | None
    timed_out: bool
    duration_s: float

    @property
    def signal(self) -> int | None:
        rc = self.returncode
        return -rc if rc is not None and rc < 0 else None


def _kill_group(proc: subprocess.Popen[Any], grace_s: float) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_for(proc: subprocess.Popen[Any], timeout_s: float) -> int:
    """``proc.wait(timeout=timeout_s)`` without its polling: Popen's wait sleeps in growing
    steps up to 50 ms, so a child that ends after 90 ms is seen after 113 (every probe of a
    small project paid that). A pidfd becomes readable the moment the child ends; where
    there is none (Linux before 5.3), Popen's own wait."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout_s)
    try:
        # Reaped meanwhile (a stop from another thread waits on it too): its pid may be
        # another process's by now, so the pidfd is not trusted; until reaped it is ours.
        if proc.poll() is not None:
            return proc.returncode
        # poll, not select: any descriptor number, and a day at a time, so a timeout of
        # years (an oracle may ask for one) is not an overflow
        ready = select.poll()
        ready.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout_s
        while not ready.poll(max(0.0, min(deadline - time.monotonic(), 86400.0)) * 1000):
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
    finally:
        os.close(fd)
    return proc.wait()


def run_logged(
    cmd: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdout_path: Path,
    stderr_path: Path | None = None,
    timeout_s: float,
    grace_s: float = defaults.PROCESS_GRACE_S,
    on_line: Callable[[str], None] | None = None,
) -> ProcResult:
    """Run ``cmd``; stdout to ``stdout_path`` and stderr to ``stderr_path`` (or merged).

    ``on_line`` is told the newest line of ``stdout_path`` while it runs (see :func:`follow`).
    """
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with stdout_path.open("wb") as out:
        err_f = stderr_path.open("wb") if stderr_path else None
        try:
            proc = subprocess.Popen(
                list(cmd),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err_f if err_f else subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                # Registered so a stop asked for by another thread (Ctrl-C with several
                # probes in flight) kills this group too.
                with cancel.killable(lambda: _kill_group(proc, 0.5)), \
                        follow(stdout_path, on_line):
                    rc: int | None = wait_for(proc, timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                _kill_group(proc, grace_s)
                rc, timed_out = proc.returncode, True
            except BaseException:
                _kill_group(proc, 0.5)
                raise
            else:
                # The leader exited; reap anything it left behind in its group.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        finally:
            if err_f:
                err_f.close()
    return ProcResult(returncode=rc, timed_out=timed_out, duration_s=time.monotonic() - start)


FOLLOW_WINDOW = 64 * 1024  # bytes read back per look: a line longer than that is cut


@contextlib.contextmanager
def follow(path: Path, on_line: Callable[[str], None] | None,
           every_s: float = 0.5, clock: Clock = MONOTONIC) -> Iterator[None]:
    """While the block runs, tell ``on_line`` the newest complete non-empty line ``path``
    gained, every ``every_s`` (and once more at the end, unfinished last line included).

    The log file is followed, rather than the child's output piped through this process,
    because the child writes its log straight to the file: the log stays whole whatever
    happens to the controller, and a build in a container writes to a bind-mounted file the
    same way. Only the newest line of each look is passed (a live display needs no more), and
    only the last ``FOLLOW_WINDOW`` bytes are read, so a build that writes megabytes a second
    costs one small read per look. ``\r`` ends a line too (progress counters redraw with it).
    The looks are paced by ``clock`` (a test steps one).
    """
    if on_line is None:
        yield
        return
    callback = on_line
    stop = threading.Event()
    pos, last = 0, ""  # where the next look starts (after the last whole line); what was told

    def look(final: bool) -> None:
        nonlocal pos, last
        try:
            size = path.stat().st_size
        except OSError:
            return
        if size <= pos:
            return
        start = max(pos, size - FOLLOW_WINDOW)
        with path.open("rb") as f:
            f.seek(start)
            data = f.read(size - start)
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        whole = data if final else data[:cut + 1] if cut >= 0 else b""
        parts = re.split(rb"[\r\n]", whole)
        if start > pos:
            parts = parts[1:]  # begins mid-line: the window cut it
        pos = start + len(whole)
        for raw in reversed(parts):
            line = raw.decode("utf-8", errors="replace").strip()
            if line:
                if line != last:
                    last = line
                    callback(line)
                return

    def pump() -> None:
        while not clock.wait(stop, every_s):
            look(final=False)
        look(final=True)

    thread = threading.Thread(target=pump, name=f"follow-{path.name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def tail(path: Path | None, lines: int = 20, max_chars: int = 4000) -> str:
    if path is None or not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - max_chars))
        data = f.read().decode("utf-8", errors="replace")
    return "\n".join(data.splitlines()[-lines:])


REAPER = REAPER_SCRIPT
MARK_VAR = "BISECTOR_PROBE"


def reaped(cmd: Sequence[str], mark: str) -> list[str]:
    """``cmd`` run under the reaper: nothing it starts (a daemon included) outlives it.

    ``mark`` (``owner|run``) is put in the environment of everything it starts, so that a
    sweep can find leftovers even when the reaper itself was killed. ``-I -S``: the reaper
    needs the standard library alone, so no ``site`` (its ``.pth`` files) is read at its start,
    a cost every probe paid.
    """
    return [sys.executable, "-I", "-S", str(REAPER), mark, "--", *cmd]


def reaper_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment for :func:`reaped`: the reaper checks it still has this parent."""
    return {**env, "BISECTOR_REAPER_PARENT": str(os.getpid())}


def sweep_probes(owner_gone: Callable[[str], bool]) -> list[int]:
    """Kill processes of probes whose controller is gone (read from their ``BISECTOR_PROBE``);
    returns the pids killed. Run at every start and resume."""
    killed = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(MARK_VAR.encode() + b"="):
                owner = item.split(b"=", 1)[1].decode(errors="replace").split("|", 1)[0]
                if owner_gone(owner):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(entry), signal.SIGKILL)
                        killed.append(int(entry))
                break
    return killed


def cap_output(path: Path, cap: int = defaults.OUTPUT_CAP) -> None:
    """Keep at most ``cap`` bytes of an output file: its head and its tail, with a note of
    what was cut between. Copied in chunks, so a 300 MB line never sits in memory."""
    try:
        size = path.stat().st_size
    except OSError:
        return
    if size <= cap:
        return
    half = cap // 2
    tmp = path.with_suffix(path.suffix + ".cap")
    with path.open("rb") as src, tmp.open("wb") as dst:
        copied = 0
        while copied < half:
            chunk = src.read(min(1 << 20, half - copied))
            if not chunk:
                break
            dst.write(chunk)
            copied += len(chunk)
        dst.write(f"\n[bisector: {size - 2 * half} bytes cut]\n".encode())
        src.seek(size - half)
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    tmp.replace(path)


def call(cmd: Sequence[str], *, env: Mapping[str, str], timeout_s: float | None = None,
         stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE,
         ) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` (text, no check) that a stop from another thread can kill: installs
    and facts collection of K probes at once must not outlive Ctrl-C."""
    proc = subprocess.Popen(list(cmd), env=dict(env), stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=stderr, text=True, start_new_session=True)
    try:
        with cancel.killable(lambda: _kill_group(proc, 0.5)):
            out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc, 1.0)
        out, err = proc.communicate()
    except BaseException:
        _kill_group(proc, 0.5)
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def call_bounded(cmd: Sequence[str], *, input: str | None = None,
                 env: Mapping[str, str] | None = None, timeout_s: float,
                 grace_s: float = 1.0) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run ``cmd`` (text, no check) in a process group of its own, ``input`` on its stdin;
    past ``timeout_s`` the whole group is stopped (SIGTERM, then SIGKILL after ``grace_s``,
    whatever the leader did), so nothing it started outlives it: a hung notifier's
    ``curl`` too. Returns the result and whether it timed out."""
    proc = subprocess.Popen(list(cmd), env=None if env is None else dict(env),
                            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(input, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _stop_group(proc, grace_s)
        try:
            out, err = proc.communicate(timeout=grace_s)
        except subprocess.TimeoutExpired:  # a process that left the group holds the pipes
            out, err = "", ""
    except BaseException:
        _stop_group(proc, 0.5)
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err), timed_out


def _stop_group(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGTERM to the group, the leader waited for ``grace_s``, then SIGKILL to the group
    (members that ignored SIGTERM, or outlived a leader that obeyed it)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10.0)
