"""One advisory file lock between the threads and processes of one box (``flock``).

Several places make something once that others then read (a uv skeleton, a store's schema, a
repository mirror). ``fcntl.flock`` on a lock file beside it is all they need, and the kernel
drops the lock with a killed process; this is the one context manager for it.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def held(lock: Path, how: int = fcntl.LOCK_EX) -> Iterator[None]:
    """``lock`` (made if missing) held ``how`` (``LOCK_EX`` or ``LOCK_SH``) for the block."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as f:
        fcntl.flock(f, how)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
