"""prebuilt wheel to commit mapping cache

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "prebuilt",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("url_hash", sa.String(length=64), nullable=False),
        sa.Column("filename", sa.String(length=300), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("version", sa.String(length=100), nullable=False),
        sa.Column("commit_sha", sa.String(length=40), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prebuilt")),
        sa.UniqueConstraint("url_hash", name=op.f("uq_prebuilt_url_hash")),
    )
    with op.batch_alter_table("prebuilt", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_prebuilt_commit_sha"), ["commit_sha"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("prebuilt", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_prebuilt_commit_sha"))
    op.drop_table("prebuilt")
