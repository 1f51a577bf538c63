"""The failure text of runs (``run.reason`` and ``run.output_tail``), searched by the database's
own index: `bisect list --text "illegal memory access"` must not read two million output tails
in Python.

One meaning on both databases: a case-insensitive substring of either column. SQLite keeps an
FTS5 table with the trigram tokenizer (``run_text``, its content read from ``run`` and kept in
step by triggers), whose phrase query is exactly that for three characters or more; PostgreSQL
answers ``ILIKE '%text%'``, which pg_trgm's GIN indexes serve. The extension needs a privilege a
team's role may lack: without it the indexes are left out (the same answers, by a scan), and
``docs/store.md`` says how to add them. Neither index is a model: the schema test and Alembic's
autogenerate skip every name that starts with ``run_text`` (:func:`include_name`).

Migration 0013 writes the same statements as they were then; a store made in one step gets them
from :func:`install` (models.py calls it after the ``run`` table is created).
"""

from __future__ import annotations

import contextlib
from typing import Any

from sqlalchemy import ColumnElement, Connection, column, select, table, text
from sqlalchemy.exc import DBAPIError

PREFIX = "run_text"
SQLITE = (
    "CREATE VIRTUAL TABLE run_text USING fts5(reason, output_tail, content='run', "
    "content_rowid='id', tokenize='trigram')",
    "CREATE TRIGGER run_text_insert AFTER INSERT ON run BEGIN "
    "INSERT INTO run_text(rowid, reason, output_tail) "
    "VALUES (new.id, new.reason, new.output_tail); END",
    "CREATE TRIGGER run_text_delete AFTER DELETE ON run BEGIN "
    "INSERT INTO run_text(run_text, rowid, reason, output_tail) "
    "VALUES ('delete', old.id, old.reason, old.output_tail); END",
    "CREATE TRIGGER run_text_update AFTER UPDATE OF reason, output_tail ON run BEGIN "
    "INSERT INTO run_text(run_text, rowid, reason, output_tail) "
    "VALUES ('delete', old.id, old.reason, old.output_tail); "
    "INSERT INTO run_text(rowid, reason, output_tail) "
    "VALUES (new.id, new.reason, new.output_tail); END",
)
POSTGRES = (
    "CREATE INDEX run_text_reason_trgm ON run USING gin (reason gin_trgm_ops)",
    "CREATE INDEX run_text_output_tail_trgm ON run USING gin (output_tail gin_trgm_ops)",
)
TRIGRAM = 3  # the trigram index answers a needle of this many characters or more

_fts: dict[str, bool] = {}  # per database URL: does it have run_text (SQLite 3.34 or later)?


def install(conn: Connection) -> None:
    """Make the index on a new store (its ``run`` table was just created)."""
    if conn.dialect.name == "sqlite":
        # SQLite before 3.34 has no trigram tokenizer: the search then scans (same answers).
        version = str(conn.execute(text("SELECT sqlite_version()")).scalar())
        if tuple(int(p) for p in version.split(".")[:2]) >= (3, 34):
            for statement in SQLITE:
                conn.execute(text(statement))
    elif conn.dialect.name == "postgresql":
        # A role that may not create the extension gets no index: a failed statement would
        # end PostgreSQL's transaction, so it runs inside a savepoint.
        with contextlib.suppress(DBAPIError), conn.begin_nested():
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
            for statement in POSTGRES:
                conn.execute(text(statement))


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """For Alembic's comparisons: the index's tables, shadow tables and indexes are not
    models (nor store/bisection_text.py's documents)."""
    return not (name and name.startswith((PREFIX, "bisection_text"))
                and type_ in ("table", "index"))


def _has_fts(conn: Connection) -> bool:
    key = str(conn.engine.url)
    if key not in _fts:
        _fts[key] = conn.execute(text(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_text'"
        )).first() is not None
    return _fts[key]


def escape_like(needle: str) -> str:
    return needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def matching(conn: Connection, run_id: Any, reason: Any, output_tail: Any,
             needle: str) -> ColumnElement[bool]:
    """A condition on a query of runs (``run_id``, ``reason``, ``output_tail`` its columns):
    the run's failure text holds ``needle``, in any case."""
    pattern = f"%{escape_like(needle)}%"
    if conn.dialect.name == "sqlite" and _has_fts(conn):
        fts = table(PREFIX, column("rowid"), column(PREFIX), column("reason"),
                    column("output_tail"))
        if len(needle) >= TRIGRAM:
            phrase = '"' + needle.replace('"', '""') + '"'
            found = select(fts.c.rowid).where(fts.c[PREFIX].op("MATCH")(phrase))
        else:  # too short for a trigram: the table's own scan (fewer bytes than run's rows)
            found = select(fts.c.rowid).where(
                fts.c.reason.like(pattern, escape="\\")
                | fts.c.output_tail.like(pattern, escape="\\"))
        cond: ColumnElement[bool] = run_id.in_(found)
        return cond
    either: ColumnElement[bool] = (reason.ilike(pattern, escape="\\")
                                   | output_tail.ilike(pattern, escape="\\"))
    return either
