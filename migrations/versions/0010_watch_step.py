"""watch_flip.facts: what a performance step was (its size, p-value, metric, the step it undoes)

A performance oracle's flips are change points of its series, not changes of answer: the row
keeps the step's numbers beside the commits, so the table, the picture and the notification
say "+18 % (p 0.002)" without reading the series again. Exit-code flips leave it null.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("watch_flip") as batch:
        batch.add_column(sa.Column("facts", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("watch_flip") as batch:
        batch.drop_column("facts")
