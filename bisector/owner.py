"""Who runs what: owner ids shared by bisection leases and container labels.

An owner is ``host:pid:start``, where ``start`` is the process's start time in clock ticks
since boot (``/proc/PID/stat``). The start time makes an owner unique even when the kernel
reuses the pid: a new process with the old pid is not the old owner, so its bisection can be
taken over instead of looking alive forever.
"""

from __future__ import annotations

import os
import socket
from functools import cache


def _start_ticks(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return stat.rsplit(")", 1)[1].split()[19]


@cache
def _me(pid: int) -> str:
    start = _start_ticks(pid)
    return f"{socket.gethostname()}:{pid}" + (f":{start}" if start else "")


def owner_id() -> str:
    return _me(os.getpid())  # keyed by pid: a forked child gets its own id


def local_pid_alive(owner: str) -> bool | None:
    """Whether the owner's process lives; None when the owner is on another host (unknowable)."""
    parts = owner.split(":")
    if len(parts) == 3:
        host, pid_s, start = parts
    elif len(parts) == 2:
        (host, pid_s), start = parts, None
    else:
        return False
    if host != socket.gethostname():
        return None
    try:
        pid = int(pid_s)
        os.kill(pid, 0)
    except (ProcessLookupError, ValueError, OverflowError):
        return False
    except PermissionError:
        pass
    # A different start time: the pid was reused by another process.
    return start is None or _start_ticks(pid) in (start, None)
