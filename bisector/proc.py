"""Run a child process with logs on disk and a timeout that kills its whole process group.

Builds and oracles both go through here: one place that gets the hard parts right (a new
session so grandchildren die too, SIGTERM then SIGKILL after a grace period, and the child
killed even when the controller is interrupted while waiting).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bisector import cancel, defaults


@dataclass(frozen=True)
class ProcResult:
    returncode: int | None
    timed_out: bool
    duration_s: float

    @property
    def signal(self) -> int | None:
        rc = self.returncode
        return -rc if rc is not None and rc < 0 else None


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
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


def run_logged(
    cmd: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdout_path: Path,
    stderr_path: Path | None = None,
    timeout_s: float,
    grace_s: float = defaults.PROCESS_GRACE_S,
) -> ProcResult:
    """Run ``cmd``; stdout to ``stdout_path`` and stderr to ``stderr_path`` (or merged)."""
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
                with cancel.killable(lambda: _kill_group(proc, 0.5)):
                    rc: int | None = proc.wait(timeout=timeout_s)
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


def tail(path: Path | None, lines: int = 20, max_chars: int = 4000) -> str:
    if path is None or not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - max_chars))
        data = f.read().decode("utf-8", errors="replace")
    return "\n".join(data.splitlines()[-lines:])
