"""bisection_text: each bisection's failure text as one document (SQLite), for `bisect list
--text`; an index on git_commit.created_at

A common phrase searched run by run (0013's index of every run) gave 54,000 runs to take back to
their bisections before the newest page could be kept (1.4 s on a SQLite store of two million
runs). Each bisection's document holds the distinct texts of the runs its bad probes used,
keyed by its id in an FTS5 trigram table (3.34 and later, as 0013's), so the index answers
bisections newest first (bisector/store/bisection_text.py says how); a trigger on ``probe``
appends a bad probe's text, another drops a deleted bisection's document, and the documents of
the bisections already stored are filled here. PostgreSQL keeps searching the runs (its planner
is fast there). ``ix_git_commit_created_at``: the lists that read culprits' facts look for
culprits named before the first facts were kept (store/commits.py) from the index.
The statements are written out as they are today (the module may change later).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29 06:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

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
    "INSERT INTO bisection_text(rowid, body) SELECT bisection_id, char(10) || "
    "group_concat(body, char(10)) FROM (SELECT DISTINCT p.bisection_id, "
    "r.reason || char(10) || r.output_tail AS body FROM probe p JOIN run r ON r.id = p.run_id "
    "WHERE p.verdict = 'bad') GROUP BY bisection_id",
)


def upgrade() -> None:
    op.create_index("ix_git_commit_created_at", "git_commit", ["created_at"])
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        version = str(bind.execute(sa.text("SELECT sqlite_version()")).scalar())
        if tuple(int(p) for p in version.split(".")[:2]) >= (3, 34):  # the trigram tokenizer
            for statement in SQLITE:
                op.execute(statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS bisection_text_probe")
        op.execute("DROP TRIGGER IF EXISTS bisection_text_gone")
        op.execute("DROP TABLE IF EXISTS bisection_text")
    op.drop_index("ix_git_commit_created_at", table_name="git_commit")
