"""The newest bisections of a store, read without opening it as bisector/store/db.py does.

For the TAB completion of ids: it must answer in milliseconds and never change anything, so
it neither migrates nor creates (a SQLite file is opened read-only with the standard library,
a server through SQLAlchemy with a short connect timeout) and any failure is "no ids".
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass

from bisector.store.location import SCHEMA_HEAD, sqlite_path, url_from

QUERY = ("SELECT id, state, good_ref, bad_ref FROM bisection ORDER BY id DESC LIMIT {limit}")
CONNECT_TIMEOUT_S = 2


@dataclass(frozen=True)
class Recent:
    id: int
    state: str
    good: str
    bad: str


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
    con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=1)
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
        con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=1)
        heads = {r[0] for r in con.execute("SELECT version_num FROM alembic_version")}
    except sqlite3.Error:
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


def listing(db: str, limit: int) -> list[dict[str, object]] | None:
    """The newest ``limit`` bisections' list columns, newest first (None: use the full path)."""
    rows = _rows(db, f"SELECT {', '.join(LIST_COLUMNS)} FROM bisection ORDER BY id DESC "
                     f"LIMIT ?", int(limit))
    return None if rows is None else [dict(zip(LIST_COLUMNS, r, strict=True)) for r in rows]


def identity(db: str, bisection_id: int) -> str | None:
    """A digest of what a finished bisection's record says (its state, endpoints, oracle,
    answer, message) and of its probes: a snapshot of its view (app/snapshots.py) is served
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
