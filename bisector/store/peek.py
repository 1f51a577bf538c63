"""The newest bisections of a store, read without opening it as bisector/store/db.py does.

For the TAB completion of ids: it must answer in milliseconds and never change anything, so
it neither migrates nor creates (a SQLite file is opened read-only with the standard library,
a server through SQLAlchemy with a short connect timeout) and any failure is "no ids".
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from bisector.store.location import sqlite_path, url_from

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
