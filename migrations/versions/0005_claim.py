"""claims: a verdict being judged right now, so a second process waits instead of judging it

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "claim",
        sa.Column("commit_sha", sa.String(length=40), nullable=False),
        sa.Column("oracle_sha256", sa.String(length=64), nullable=False),
        sa.Column("env_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("commit_sha", "oracle_sha256", "env_fingerprint",
                                name=op.f("pk_claim")),
    )


def downgrade() -> None:
    op.drop_table("claim")
