"""worker.offer: the environment a worker offers (GPU models, Pythons, CUDA major)

Probe jobs now go to a queue per environment (``queue/routing.py``) and a worker listens to the
queues of what it offers; this column keeps that offer for ``bisect workers`` and for a
coordinator's line on who may run its probes. Null for workers that predate it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 10:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("worker") as batch:
        batch.add_column(sa.Column("offer", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("worker") as batch:
        batch.drop_column("offer")
