"""Who runs what: ``host:pid`` owner ids, shared by bisection ownership and container labels."""

from __future__ import annotations

import os
import socket


def owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def local_pid_alive(owner: str) -> bool | None:
    """Whether the owner's process lives; None when the owner is on another host (unknowable)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return None
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    return True
