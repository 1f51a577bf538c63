"""Who runs what: owner ids shared by bisection leases and container labels.

An owner is ``host@pidns:pid:start``, where ``pidns`` is the pid namespace (a controller in a
container is another host even under the same name) and ``start`` is the process's start time
in clock ticks since boot (``/proc/PID/stat``). The start time makes an owner unique even when
the kernel reuses the pid: a new process with the old pid is not the old owner, so its
bisection can be taken over instead of looking alive forever.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta
from functools import cache

from bisector.base import defaults


def _start_ticks(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return stat.rsplit(")", 1)[1].split()[19]


@cache
def _host() -> str:
    """This host as seen from this pid namespace: a controller in a container that shares the
    host's name but not its pids is another host (its pids mean nothing here)."""
    try:
        ns = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return socket.gethostname()
    digits = "".join(ch for ch in ns if ch.isdigit())
    return f"{socket.gethostname()}@{digits}" if digits else socket.gethostname()


@cache
def _me(pid: int) -> str:
    start = _start_ticks(pid)
    return f"{_host()}:{pid}" + (f":{start}" if start else "")


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
    if host != (_host() if "@" in host else socket.gethostname()):
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


def owner_alive(owner: str | None, heartbeat: datetime | None,
                stale_s: float = defaults.LEASE_STALE_S) -> bool:
    if not owner:
        return False
    local = local_pid_alive(owner)
    if local is not None:
        return local
    if heartbeat is None:
        return False
    if heartbeat.tzinfo is None:
        heartbeat = heartbeat.replace(tzinfo=UTC)
    return datetime.now(UTC) - heartbeat < timedelta(seconds=stale_s)
