"""build statistics of an artifact (ccache hits and misses of that build)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("artifact", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stats", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("artifact", schema=None) as batch_op:
        batch_op.drop_column("stats")
