"""The failure text of each bisection, one document a bisection (``bisection_text``, SQLite):
`bisect list --text` asks which bisections had a bad probe whose run said the text, newest
first, a page at a time.

Searched run by run (store/fulltext.py's index of every run), a common phrase ("illegal memory
access" in 54,000 of two million runs) gives every one of those runs to the query, to take back
to their bisections before it can keep the newest 50: 1.4 s on SQLite. Here each bisection's
document holds the distinct texts (reason, a newline, output tail) of the runs its bad probes
used, in an FTS5 trigram table whose rowid is the bisection's id, so the index answers
bisections, read newest first and stopped after the page (:func:`statement_for`). PostgreSQL
needs none: its planner walks the bisections newest first and checks each one's runs through
the pg_trgm indexes, or takes the few runs a rare text matches, whichever is cheaper.

Kept by the database itself, whoever writes a probe (a controller, a worker): a trigger on
``probe`` appends the run's text when a bad probe is added and the document does not hold it
yet; a bisection deleted takes its document along. Migration 0016 makes both and fills the
documents of the bisections already stored (:data:`SQLITE_FILL`); a store made in one step gets
them from :func:`install`. The meaning is fulltext.py's: a case-insensitive substring of a bad
probe's reason or output tail (a needle with a newline may also span a reason's end and its
output's start, one document holding both). The cost: a second copy of bad runs' distinct
texts.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Select, column, select, table, text

from bisector.store.fulltext import TRIGRAM, escape_like

NAME = "bisection_text"
SQLITE = (
    "CREATE VIRTUAL TABLE bisection_text USING fts5(body, tokenize='trigram')",
    "CREATE TRIGGER bisection_text_probe AFTER INSERT ON probe WHEN new.verdict = 'bad' BEGIN "
    "INSERT INTO bisection_text(rowid, body) SELECT new.bisection_id, '' WHERE NOT EXISTS "
    "(SELECT 1 FROM bisection_text WHERE rowid = new.bisection_id); "
    "UPDATE bisection_text SET body = body || char(10) || "
    "(SELECT reason || char(10) || output_tail FROM run WHERE id = new.run_id) "
    "WHERE rowid = new.bisection_id AND instr(body, "
    "(SELECT reason || char(10) || output_tail FROM run WHERE id = new.run_id)) = 0; END",
    "CREATE TRIGGER bisection_text_gone AFTER DELETE ON bisection BEGIN "
    "DELETE FROM bisection_text WHERE rowid = old.id; END",
)
SQLITE_FILL = (
    "INSERT INTO bisection_text(rowid, body) SELECT bisection_id, char(10) || "
    "group_concat(body, char(10)) FROM (SELECT DISTINCT p.bisection_id, "
    "r.reason || char(10) || r.output_tail AS body FROM probe p JOIN run r ON r.id = p.run_id "
    "WHERE p.verdict = 'bad') GROUP BY bisection_id")
_made: dict[str, bool] = {}  # per database URL: does it have bisection_text?


def install(conn: Connection) -> None:
    """Make the documents' table and triggers on a new SQLite store (``probe`` was just
    created); SQLite before 3.34 has no trigram tokenizer: the runs' search is used."""
    if conn.dialect.name == "sqlite":
        version = str(conn.execute(text("SELECT sqlite_version()")).scalar())
        if tuple(int(p) for p in version.split(".")[:2]) >= (3, 34):  # the trigram tokenizer
            for statement in SQLITE:
                conn.execute(text(statement))


def made(conn: Connection) -> bool:
    """Whether this store has the documents (SQLite before 3.34 has no trigram tokenizer)."""
    if conn.dialect.name != "sqlite":
        return False
    key = str(conn.engine.url)
    if key not in _made:
        _made[key] = conn.execute(text(
            "SELECT 1 FROM sqlite_master WHERE name = 'bisection_text'")).first() is not None
    return _made[key]


def statement_for(conn: Connection, query: Select[Any], bisection_id: Any,
                  needle: str) -> tuple[Select[Any], Any] | None:
    """``query`` (of bisections) narrowed to those whose document holds ``needle``, and the
    column to order it by, newest first; None on a store without the documents (SQLite before
    3.34: the caller searches the runs). On SQLite the text index drives the query in rowid
    order, so a page of a common phrase stops after its rows."""
    if not made(conn):
        return None
    fts = table(NAME, column("rowid"), column(NAME), column("body"))
    if len(needle) >= TRIGRAM:
        phrase = '"' + needle.replace('"', '""') + '"'
        q = query.join(fts, fts.c.rowid == bisection_id).where(fts.c[NAME].op("MATCH")(phrase))
        return q, fts.c.rowid
    # Too short for a trigram: the documents' own scan (fewer bytes than the runs').
    pattern = f"%{escape_like(needle)}%"
    short = select(fts.c.rowid).where(fts.c.body.like(pattern, escape="\\"))
    return query.where(bisection_id.in_(short)), bisection_id
