"""the nightly watch: one oracle result per (suite, oracle, torch version, commit), and the
flips between them, each of which starts at most one bisection

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "watch_result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(length=200), nullable=False),
        sa.Column("oracle", sa.String(length=200), nullable=False),
        sa.Column("torch_version", sa.String(length=100), nullable=False),
        sa.Column("commit_sha", sa.String(length=40), nullable=False),
        sa.Column("git_version", sa.String(length=40), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("oracle_sha256", sa.String(length=64), nullable=True),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("verdict", sa.String(length=10), nullable=True),
        sa.Column("outcome", sa.String(length=10), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("output_tail", sa.Text(), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_result")),
        sa.UniqueConstraint("suite", "oracle", "torch_version", "commit_sha",
                            name=op.f("uq_watch_result_suite")),
    )
    op.create_table(
        "watch_flip",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(length=200), nullable=False),
        sa.Column("oracle", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=12), nullable=False),
        sa.Column("from_commit", sa.String(length=40), nullable=False),
        sa.Column("to_commit", sa.String(length=40), nullable=False),
        sa.Column("from_result_id", sa.Integer(), nullable=False),
        sa.Column("to_result_id", sa.Integer(), nullable=False),
        sa.Column("bisection_id", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("owner", sa.String(length=200), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("flip_notified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_notified_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["from_result_id"], ["watch_result.id"],
                                name=op.f("fk_watch_flip_from_result_id_watch_result")),
        sa.ForeignKeyConstraint(["to_result_id"], ["watch_result.id"],
                                name=op.f("fk_watch_flip_to_result_id_watch_result")),
        sa.ForeignKeyConstraint(["bisection_id"], ["bisection.id"], ondelete="SET NULL",
                                name=op.f("fk_watch_flip_bisection_id_bisection")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_flip")),
        sa.UniqueConstraint("suite", "oracle", "from_commit", "to_commit",
                            name=op.f("uq_watch_flip_suite")),
    )


def downgrade() -> None:
    op.drop_table("watch_flip")
    op.drop_table("watch_result")
