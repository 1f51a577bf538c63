"""The newest bisections of a store, read without opening it as bisector/store/db.py does.

For the TAB completion of ids: it must answer in milliseconds and never change anything, so
it neither migrates nor creates (a SQLite file is opened read-only with the standard library,
a server through SQLAlchemy with a short connect timeout) and any failure is "no ids".
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from bisector.store.location import SCHEMA_HEAD, read_only, sqlite_path, url_from

QUERY = ("SELECT id, state, good_ref, bad_ref FROM bisection ORDER BY id DESC LIMIT {limit}")
CONNECT_TIMEOUT_S = 2


@dataclass(frozen=True)
class Recent:
    id: int
    state: str
    good: str
    bad: str


def open_ro(path: Path, timeout: float = 1) -> sqlite3.Connection:
    """A connection that never writes to the SQLite store at ``path`` (SQLite's ``mode=ro``).

    A store in WAL mode is read through a shared-memory file beside it (``-shm``), which SQLite
    makes on first use; where the folder cannot be written (a read-only mount, an archived
    store) and there is none, ``mode=ro`` cannot open it. A store nobody can be writing
    (:func:`unwritten`) is then opened as immutable, which needs no file beside it. Raises
    sqlite3.Error (or OSError) when it cannot be read. Not tied to its thread: a pool
    (store/db.py) hands it to one thread at a time.
    """
    uri = path.absolute().as_uri()
    con = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout, check_same_thread=False)
    try:
        con.execute("PRAGMA schema_version").fetchone()  # SQLite opens the file on first use
        return con
    except sqlite3.OperationalError:
        con.close()
        if not unwritten(path):
            raise
    return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=timeout,
                           check_same_thread=False)


def unwritten(path: Path) -> bool:
    """Nobody can be writing the store at ``path``, so SQLite may read it as immutable (no
    lock taken, no file made beside it): it cannot be written here (:func:`read_only`), no
    write-ahead log beside it holds changes not yet in the file (immutable would skip them),
    and no one else can write it either: its file system is mounted read-only, the file has
    no write permission for anyone (an archive), or this process is root (what stops root
    stops everyone). Another user's live store in a folder of theirs is none of these."""
    wal = path.with_name(path.name + "-wal")
    if not read_only(path) or (wal.exists() and wal.stat().st_size > 0):
        return False
    return (bool(os.statvfs(path).f_flag & os.ST_RDONLY) or path.stat().st_mode & 0o222 == 0
            or os.geteuid() == 0)


def recent(db: str, limit: int = 50) -> list[Recent]:
    """Up to ``limit`` bisections, newest first; [] when there is no store or it cannot be
    read (absent, locked, foreign, older or newer schema, server away)."""
    try:
        rows = _sqlite(db, limit) if sqlite_path(db) is not None else _server(db, limit)
        return [Recent(int(str(i)), str(s), str(g), str(b)) for i, s, g, b in rows]
    except Exception:  # completion never fails loudly: no suggestions instead
        return []


def _sqlite(db: str, limit: int) -> list[tuple[object, ...]]:
    path = sqlite_path(db)
    if path is None or not path.is_file():
        return []
    con = open_ro(path)
    try:
        return con.execute(QUERY.format(limit=int(limit))).fetchall()
    finally:
        con.close()


def _server(db: str, limit: int) -> list[tuple[object, ...]]:
    # lazy: a server store needs SQLAlchemy (and its driver) even for a peek
    from sqlalchemy import create_engine, text

    url = url_from(db)
    args = {"connect_timeout": CONNECT_TIMEOUT_S} if url.startswith("postgresql") else {}
    engine = create_engine(url, connect_args=args)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(QUERY.format(limit=int(limit))))]
    finally:
        engine.dispose()


# -- ORM-free reads for `bisect list`, `show` and `log` ------------------------------------------
# A read command on a SQLite store at this bisector's schema reads with the standard library:
# SQLAlchemy and its models cost three times `import click` to import (make bench, section 16).
# Anything else (a server, an older or newer schema, a damaged file) returns None and the
# command takes the full path through store/db.py, which migrates, checks and explains.

LIST_COLUMNS = ("id", "repo_path", "good_ref", "bad_ref", "oracle_name", "state", "owner",
                "heartbeat_at", "culprit_sha", "result", "created_at")
IDENTITY_COLUMNS = ("id", "created_at", "state", "good_sha", "bad_sha", "oracle_sha256",
                    "culprit_sha", "message", "result")


def _reader(db: str) -> sqlite3.Connection | None:
    """A read-only connection to a SQLite store at SCHEMA_HEAD, else None."""
    path = sqlite_path(db)
    if path is None or not path.is_file():
        return None
    try:
        con = open_ro(path)
    except (sqlite3.Error, OSError):
        return None
    try:
        heads = {r[0] for r in con.execute("SELECT version_num FROM alembic_version")}
    except sqlite3.Error:
        con.close()
        return None
    if heads != {SCHEMA_HEAD}:
        con.close()
        return None
    return con


def _rows(db: str, sql: str, *args: object) -> list[tuple[object, ...]] | None:
    """The rows of one read-only query, or None: use the full path."""
    con = _reader(db)
    if con is None:
        return None
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.Error:
        return None
    finally:
        con.close()


def listing(db: str, limit: int, offset: int = 0) -> list[dict[str, object]] | None:
    """A page of bisections' list columns, newest first, ``offset`` rows skipped (None: use
    the full path). A page only: filters go the full path (store/queries.py)."""
    rows = _rows(db, f"SELECT {', '.join(LIST_COLUMNS)} FROM bisection ORDER BY id DESC "
                     f"LIMIT ? OFFSET ?", int(limit), int(offset))
    return None if rows is None else [dict(zip(LIST_COLUMNS, r, strict=True)) for r in rows]


def identity(db: str, bisection_id: int) -> str | None:
    """A digest of what a finished bisection's record says (its state, endpoints, oracle,
    answer, message) and of its probes: a snapshot of its view (app/report/snapshots.py) is served
    only while this is unchanged. None: no such row, or use the full path."""
    row = _rows(db, f"SELECT {', '.join(IDENTITY_COLUMNS)} FROM bisection WHERE id = ?",
                int(bisection_id))
    probes = _rows(db, "SELECT count(*), max(id) FROM probe WHERE bisection_id = ?",
                   int(bisection_id))
    if not row or not probes:
        return None
    blob = json.dumps([[str(v) for v in row[0]], [str(v) for v in probes[0]]])
    return hashlib.sha256(blob.encode()).hexdigest()


def newest_id(db: str) -> int | None:
    """The newest bisection's id (``show``/``log`` without one), None: use the full path."""
    rows = _rows(db, "SELECT max(id) FROM bisection")
    return int(str(rows[0][0])) if rows and rows[0][0] is not None else None
