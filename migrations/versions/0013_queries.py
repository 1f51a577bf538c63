"""queries: indexes for `bisect list`'s filters and `bisect commit`, culprits' git facts, and
the failure text's index

`bisect list --state/--oracle/--culprit/--since/--until` and `bisect commit` each become one
SQL query on an index (bisection.created_at, .culprit_sha, .oracle_name, .oracle_sha256;
probe.run_id from a run to the bisections that used it). bisection.culprit_inside holds the
commit inside a merge culprit, copied from the result's JSON, so --culprit finds it from an
index too. ``git_commit`` and ``commit_path``
keep what git said of a culprit when it was named (author, pull request, every path it
changed and the folders above them), for --author, --culprit #PR and --touching. The failure
text (run.reason, run.output_tail) gets SQLite's FTS5 trigram table ``run_text`` (filled from
the runs already stored) or, on PostgreSQL where the role may create pg_trgm, two GIN trigram
indexes (bisector/store/fulltext.py says why these).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29 12:00:00
"""

from __future__ import annotations

import contextlib

import sqlalchemy as sa
from alembic import op
from sqlalchemy.exc import DBAPIError

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

BISECTION_INDEXES = ("created_at", "culprit_sha", "culprit_inside", "oracle_name",
                     "oracle_sha256")
FTS = (
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
    "INSERT INTO run_text(run_text) VALUES ('rebuild')",
)
TRGM = (
    "CREATE INDEX run_text_reason_trgm ON run USING gin (reason gin_trgm_ops)",
    "CREATE INDEX run_text_output_tail_trgm ON run USING gin (output_tail gin_trgm_ops)",
)


def upgrade() -> None:
    op.add_column("bisection", sa.Column("culprit_inside", sa.String(40), nullable=True))
    b = sa.table("bisection", sa.column("result", sa.JSON()),
                 sa.column("culprit_inside", sa.String(40)))
    inside = b.c.result["into_merge"]["sha"].as_string()
    op.execute(b.update().where(inside.is_not(None)).values(culprit_inside=inside))
    for name in BISECTION_INDEXES:
        op.create_index(f"ix_bisection_{name}", "bisection", [name])
    op.create_index("ix_probe_run_id", "probe", ["run_id"])
    op.create_table(
        "git_commit",
        sa.Column("sha", sa.String(40), primary_key=True),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("author_email", sa.Text(), nullable=False),
        sa.Column("authored_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pr", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_git_commit_pr", "git_commit", ["pr"])
    op.create_table(
        "commit_path",
        sa.Column("sha", sa.String(40), sa.ForeignKey(
            "git_commit.sha", ondelete="CASCADE", name="fk_commit_path_sha_git_commit"),
            primary_key=True),
        sa.Column("path", sa.String(1000), primary_key=True),
        sa.Column("folder", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_commit_path_path", "commit_path", ["path", "sha"])
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        version = str(bind.execute(sa.text("SELECT sqlite_version()")).scalar())
        if tuple(int(p) for p in version.split(".")[:2]) >= (3, 34):  # the trigram tokenizer
            for statement in FTS:
                op.execute(statement)
    elif bind.dialect.name == "postgresql":
        # A role that may not create the extension gets no index (the same answers by a
        # scan); a failed statement would end the migration's transaction: a savepoint.
        with contextlib.suppress(DBAPIError), bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
            for statement in TRGM:
                bind.execute(sa.text(statement))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for trigger in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS run_text_{trigger}")
        op.execute("DROP TABLE IF EXISTS run_text")
    elif bind.dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS run_text_reason_trgm")
        op.execute("DROP INDEX IF EXISTS run_text_output_tail_trgm")
    op.drop_index("ix_commit_path_path", table_name="commit_path")
    op.drop_table("commit_path")
    op.drop_index("ix_git_commit_pr", table_name="git_commit")
    op.drop_table("git_commit")
    op.drop_index("ix_probe_run_id", table_name="probe")
    for name in BISECTION_INDEXES:
        op.drop_index(f"ix_bisection_{name}", table_name="bisection")
    with op.batch_alter_table("bisection") as batch:
        batch.drop_column("culprit_inside")
