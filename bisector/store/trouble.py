"""The store's conditions said as they are: a file that is no SQLite database or is damaged,
a disk that is full, each as one line naming the fix (never "damaged" for a healthy store on a
full disk), for the commands, the web view and the store's own opening (``store/db.py``)."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from bisector.base import defaults
from bisector.base.errors import StoreError
from bisector.store.location import read_only, sqlite_path
from bisector.store.peek import open_ro


def check_sqlite_file(path: Path, *, whole: bool = True) -> None:
    """Refuse a file that is not a SQLite database or is damaged, before anything writes to
    it: the header, the schema read back, then SQLite's quick_check of every page. That last
    one reads the whole file (0.26 s for 500 MB from the page cache, seconds from disk), so
    with ``whole=False`` (a command that only reads) it runs only for a file of at most
    ``SQLITE_FULL_CHECK_BYTES``; damage a read meets later is :func:`damaged`'s one line, and
    a write never goes to a store that was not checked whole (a damaged free-page list can
    make SQLite overwrite live rows without an error)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as f:
        header = f.read(16)
    if header != b"SQLite format 3\x00":
        raise StoreError(
            f"{path} is not a SQLite database (corrupt or another kind of file): "
            f"move it aside or point --db elsewhere"
        )
    full = whole or path.stat().st_size <= defaults.SQLITE_FULL_CHECK_BYTES
    try:
        con = open_ro(path)
        try:
            con.execute("PRAGMA schema_version").fetchone()
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            ok = con.execute("PRAGMA quick_check").fetchone() if full else ("ok",)
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        if disk_full(e, path):
            raise StoreError(full_line(str(path), e)) from None
        if read_only(path) and getattr(e, "sqlite_errorname", "").startswith(
                ("SQLITE_CANTOPEN", "SQLITE_READONLY")):
            raise StoreError(
                f"cannot read {path} where it is ({e}): it is read-only here, and SQLite reads "
                f"a store in WAL mode through a {path.name}-shm file beside it, which it cannot "
                f"make there: copy the store somewhere writable and pass --db") from None
        raise StoreError(_damaged_line(str(path), e)) from None
    if ok is None or ok[0] != "ok":
        raise StoreError(
            f"{path} failed SQLite's integrity check: move it aside or point --db elsewhere"
        )


def _damaged_line(where: str, e: BaseException) -> str:
    return f"{where} is a damaged SQLite database ({e}): move it aside or point --db elsewhere"


# What SQLite says of a file whose pages are not what it wrote (SQLITE_CORRUPT, SQLITE_NOTADB).
_DAMAGE = ("database disk image is malformed", "is not a database")


def damaged(e: BaseException, db: str) -> StoreError | None:
    """The one line for SQLite damage a query met in the store ``db`` (a large store is not
    checked page by page when a command that only reads opens it), or None for anything
    else."""
    orig = getattr(e, "orig", e)
    if not _damage(orig):
        return None
    return StoreError(_damaged_line(str(sqlite_path(db) or db), orig))


def _damage(e: BaseException) -> bool:
    return isinstance(e, sqlite3.DatabaseError) and any(words in str(e).lower()
                                                         for words in _DAMAGE)


# Below this much free space, an I/O error of SQLite's on that disk is taken for it being full
# (SQLite's "disk I/O error" when it cannot grow its shared-memory file, 32 KiB at a time).
DISK_FULL_BELOW_BYTES = 2**20


def disk_full(e: BaseException, path: Path | None = None) -> bool:
    """Is ``e`` the disk being full: SQLite's SQLITE_FULL ("database or disk is full"), the
    system's ENOSPC, PostgreSQL's disk_full (53100), or SQLite's I/O error on the disk of
    ``path`` with almost no room left (SQLite says "disk I/O error" when it cannot grow its
    shared-memory file there)?"""
    orig = getattr(e, "orig", None) or e
    if isinstance(orig, OSError):
        return orig.errno == errno.ENOSPC
    if getattr(orig, "sqlstate", None) == "53100":
        return True
    if not isinstance(orig, sqlite3.Error):
        return False
    name = getattr(orig, "sqlite_errorname", "")
    if name == "SQLITE_FULL" or "database or disk is full" in str(orig).lower():
        return True
    return name.startswith("SQLITE_IOERR") and path is not None and _no_room(path)


def _no_room(path: Path) -> bool:
    """The file system of ``path`` has less than ``DISK_FULL_BELOW_BYTES`` free (for
    this user: root may use the blocks kept back for it)."""
    try:
        st = os.statvfs(path if path.exists() else path.parent)
    except OSError:
        return False
    free = (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize
    return free < DISK_FULL_BELOW_BYTES


def full_line(where: str, e: BaseException) -> str:
    why = str(getattr(e, "orig", None) or e).strip().splitlines()
    return (f"the disk holding {where} is full ({why[0] if why else 'no space left'}): the "
            f"store is intact; free some space there (bisect gc, if bisector's caches are on "
            f"it) and run the command again (bisect resume finishes a bisection it stopped)")


def store_trouble(e: BaseException, db: str) -> StoreError | None:
    """The one line for a failure a command met in the store ``db`` that is no bug: its disk
    full (also a file of bisector's own on a full disk: ENOSPC names it), or SQLite damage
    (:func:`damaged`); None for anything else."""
    path = sqlite_path(db)
    if disk_full(e, path):
        orig = getattr(e, "orig", None) or e
        named = orig.filename if isinstance(orig, OSError) and orig.filename else None
        return StoreError(full_line(str(named or path or db), e))
    return damaged(e, db)
