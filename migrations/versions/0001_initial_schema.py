"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 07:09:14.608430
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "artifact",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("commit_sha", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("log_path", sa.Text(), nullable=True),
        sa.Column("log_tail", sa.Text(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifact")),
        sa.UniqueConstraint("key", name=op.f("uq_artifact_key")),
    )
    with op.batch_alter_table("artifact", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_artifact_commit_sha"), ["commit_sha"], unique=False)

    op.create_table(
        "oracle",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_oracle")),
    )
    op.create_table(
        "bisection",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("repo_path", sa.Text(), nullable=False),
        sa.Column("good_ref", sa.String(length=250), nullable=False),
        sa.Column("bad_ref", sa.String(length=250), nullable=False),
        sa.Column("good_sha", sa.String(length=40), nullable=False),
        sa.Column("bad_sha", sa.String(length=40), nullable=False),
        sa.Column("oracle_name", sa.String(length=200), nullable=False),
        sa.Column("oracle_sha256", sa.String(length=64), nullable=False),
        sa.Column("polarity", sa.String(length=10), nullable=False),
        sa.Column("env_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("environment", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("notes", sa.JSON(), nullable=False),
        sa.Column("n_candidates", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("culprit_sha", sa.String(length=40), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["oracle_sha256"], ["oracle.sha256"], name=op.f("fk_bisection_oracle_sha256_oracle")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisection")),
    )
    with op.batch_alter_table("bisection", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_bisection_state"), ["state"], unique=False)

    op.create_table(
        "verdict",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("commit_sha", sa.String(length=40), nullable=False),
        sa.Column("oracle_sha256", sa.String(length=64), nullable=False),
        sa.Column("env_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("outcome", sa.String(length=10), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("reusable", sa.Boolean(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("artifact_id", sa.Integer(), nullable=True),
        sa.Column("stdout_path", sa.Text(), nullable=True),
        sa.Column("stderr_path", sa.Text(), nullable=True),
        sa.Column("output_tail", sa.Text(), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["artifact_id"], ["artifact.id"], name=op.f("fk_verdict_artifact_id_artifact")
        ),
        sa.ForeignKeyConstraint(
            ["oracle_sha256"], ["oracle.sha256"], name=op.f("fk_verdict_oracle_sha256_oracle")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verdict")),
    )
    with op.batch_alter_table("verdict", schema=None) as batch_op:
        batch_op.create_index(
            "ix_verdict_key", ["commit_sha", "oracle_sha256", "env_fingerprint"], unique=False
        )

    op.create_table(
        "candidate",
        sa.Column("bisection_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(length=40), nullable=False),
        sa.ForeignKeyConstraint(
            ["bisection_id"],
            ["bisection.id"],
            name=op.f("fk_candidate_bisection_id_bisection"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("bisection_id", "position", name=op.f("pk_candidate")),
    )
    op.create_table(
        "probe",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("bisection_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("commit_sha", sa.String(length=40), nullable=False),
        sa.Column("verdict_id", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(length=10), nullable=False),
        sa.Column("reused", sa.Boolean(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["bisection_id"],
            ["bisection.id"],
            name=op.f("fk_probe_bisection_id_bisection"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["verdict_id"], ["verdict.id"], name=op.f("fk_probe_verdict_id_verdict")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_probe")),
        sa.UniqueConstraint("bisection_id", "seq", name=op.f("uq_probe_bisection_id")),
    )
    with op.batch_alter_table("probe", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_probe_bisection_id"), ["bisection_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("probe", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_probe_bisection_id"))

    op.drop_table("probe")
    op.drop_table("candidate")
    with op.batch_alter_table("verdict", schema=None) as batch_op:
        batch_op.drop_index("ix_verdict_key")

    op.drop_table("verdict")
    with op.batch_alter_table("bisection", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bisection_state"))

    op.drop_table("bisection")
    op.drop_table("oracle")
    with op.batch_alter_table("artifact", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_artifact_commit_sha"))

    op.drop_table("artifact")
