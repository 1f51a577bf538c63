"""watch_result.position: the torch's place on the main line, which orders builds

The watch compared the last two results by row id, so a nightly withdrawn from the index made
the next tick judge an older build as if it were newer (a false "fixed between"). A result now
records where its commit lies on the main line (``git rev-list --count``); builds are ordered by
it, then by their PEP 440 version. Rows written before this revision have none: the next
``bisect tick`` counts them from its clone.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("watch_result") as batch:
        batch.add_column(sa.Column("position", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("watch_result") as batch:
        batch.drop_column("position")
