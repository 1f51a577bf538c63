"""remote_object: which object of a team's bucket holds which artifact, and its sha256

A wheel built or downloaded on one box is uploaded to the object store under its sha256; this
row says so, per bucket. Another box reads the digest here (never from the bucket) and checks
every download against it, so a writable bucket cannot change a verdict.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "remote_object",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("bucket", sa.String(400), nullable=False),
        sa.Column("artifact_key", sa.String(64), nullable=False),
        sa.Column("object_key", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("filename", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("bucket", "artifact_key", name="uq_remote_object_key"),
    )
    op.create_index("ix_remote_object_sha256", "remote_object", ["sha256"])


def downgrade() -> None:
    op.drop_index("ix_remote_object_sha256", table_name="remote_object")
    op.drop_table("remote_object")
