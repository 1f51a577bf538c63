"""In-use marks: what a live process is using in the cache, so that ``bisect gc`` leaves it.

Times alone cannot say it: an environment a ``bisect tick`` or ``bisect check`` has judged in for
an hour looks as old as one nobody has touched for an hour, and gc removing it mid-run turns the
oracle's ``import torch`` into a ModuleNotFoundError, recorded as ``bad``. So every probe marks
what it uses (its environment, the wheel or overlay it installs, the tree a command runs in)
for as long as it uses it, and gc asks before it removes.

A mark is two things under ``<cache>/in-use/``, keyed by the item's path in the cache:

- a shared ``flock`` on ``<digest>.lock``, held from before the item is looked at until the
  probe is done. gc takes the exclusive lock, without waiting, before it moves an item away:
  when it cannot, a live process holds the item, and it stays. The kernel drops the lock of a
  process that dies (kill -9 included), so a dead owner never pins anything; and a probe that
  comes while gc holds the lock waits that moment, then finds the item gone and makes it again,
  never half of it;
- a file ``<digest>.<pid>-<random>.json`` naming the owner (``infra.owner``'s
  ``host@pidns:pid:start``), what it is doing and since when: what gc says it kept and for whom,
  and what counts where a lock says nothing (a cache shared over a filesystem whose locks are
  local to each host). A mark whose owner is dead is stale: ignored, and removed by gc. An owner
  on another host cannot be asked; its mark counts for ``defaults.IN_USE_REMOTE_S``.

Marking never fails a probe: a cache where the folder cannot be made (read-only) is used
unmarked, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bisector.base import defaults
from bisector.base.paths import cache_dir
from bisector.infra.owner import local_pid_alive, owner_id

FOLDER = "in-use"


@dataclass(frozen=True)
class Mark:
    owner: str
    path: str  # the item's path relative to the cache folder
    what: str
    since: float

    def describe(self) -> str:
        return f"in use by {self.owner} ({self.what})"


def _folder() -> Path:
    return cache_dir() / FOLDER


def _rel(path: Path) -> str | None:
    """The item's path inside the cache folder (None: not in it, nothing to mark)."""
    try:
        return os.path.relpath(os.path.abspath(path), cache_dir())
    except ValueError:
        return None


def digest(path: Path) -> str | None:
    rel = _rel(path)
    if rel is None or rel.startswith(".."):
        return None
    return hashlib.sha256(rel.encode()).hexdigest()[:32]


def _lock(fd_path: Path, kind: int) -> int | None:
    """An fd of ``fd_path`` holding ``kind`` (LOCK_SH, LOCK_EX | LOCK_NB), re-opened when gc
    replaced the file meanwhile (so both sides lock one inode); None when not granted."""
    while True:
        fd = os.open(fd_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, kind)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(fd_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # unlinked by a gc while we waited: lock the file that is there now


@contextlib.contextmanager
def using(paths: Iterable[Path | None], what: str) -> Iterator[None]:
    """Mark ``paths`` (items of the cache: an environment, a wheel's folder) as used by this
    process for the block. Paths outside the cache, and None, are skipped."""
    held: list[tuple[int, Path]] = []
    try:
        with contextlib.suppress(OSError):
            folder = _folder()
            folder.mkdir(parents=True, exist_ok=True)
            keys = sorted({(d, p) for p in paths if p is not None
                           for d in [digest(p)] if d is not None})
            for key, path in keys:
                fd = _lock(folder / f"{key}.lock", fcntl.LOCK_SH)
                assert fd is not None  # a blocking lock is always granted
                mark = folder / f"{key}.{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
                held.append((fd, mark))
                mark.write_text(json.dumps({"owner": owner_id(), "path": _rel(path),
                                            "what": what, "since": time.time()}))
        yield
    finally:
        for fd, mark in held:
            with contextlib.suppress(OSError):
                mark.unlink(missing_ok=True)
            os.close(fd)  # the lock goes with the fd


def _alive(mark: Mark, mtime: float) -> bool:
    local = local_pid_alive(mark.owner)
    if local is not None:
        return local
    return time.time() - mtime < defaults.IN_USE_REMOTE_S


def marks() -> dict[str, list[Mark]]:
    """Digest -> the live marks on that item; the marks of dead owners are removed."""
    out: dict[str, list[Mark]] = {}
    try:
        files = list(_folder().glob("*.json"))
    except OSError:
        return out
    for f in files:
        try:
            raw = json.loads(f.read_text())
            mark = Mark(str(raw["owner"]), str(raw["path"]), str(raw["what"]),
                        float(raw["since"]))
            alive = _alive(mark, f.stat().st_mtime)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or not ours to judge: left alone
        if alive:
            out.setdefault(f.name.split(".", 1)[0], []).append(mark)
        else:
            with contextlib.suppress(OSError):
                f.unlink()  # its owner is dead: a stale mark
    return out


def busy(path: Path, live: dict[str, list[Mark]]) -> str | None:
    """Why ``path`` is in use (None: it is not), from ``live`` (``marks()``) and its lock."""
    key = digest(path)
    if key is None:
        return None
    if key in live:
        return live[key][0].describe()
    lock = _folder() / f"{key}.lock"
    if not lock.exists():
        return None
    try:
        fd = _lock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return None
    if fd is None:
        return "in use by a running process"
    os.close(fd)
    return None


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[str | None]:
    """Hold ``path`` against every new user for the block (gc removing it); yields None when
    that is granted, else why it is in use (and then nothing may be removed)."""
    key = digest(path)
    if key is None:
        yield None
        return
    folder = _folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = _lock(folder / f"{key}.lock", fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fd = -1  # no locks here: the marks alone decide
    if fd is None:
        yield "in use by a running process"
        return
    try:
        live = marks().get(key)
        yield live[0].describe() if live else None
    finally:
        if fd >= 0:
            with contextlib.suppress(OSError):
                (folder / f"{key}.lock").unlink()  # under the lock: waiters re-open
            os.close(fd)
