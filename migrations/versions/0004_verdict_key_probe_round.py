"""one reusable verdict per (commit, oracle, environment); probe rounds; in-flight probes

The round a probe ran in, and the positions of the round in flight (so ``resume`` re-runs
exactly those after Ctrl-C or kill -9 with several probes running).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 16:30:00

A reusable verdict is a fact about its key, so the key is unique among reusable rows (a
partial unique index). Runs that say more about the machine than the commit (timeouts, signals,
infrastructure skips) are not reusable and may repeat. Older stores may hold the same fact
twice (two bisections judging one commit at once): the newest stays reusable, the others are
kept as history with ``reusable`` false, so nothing measured is deleted.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "UPDATE verdict SET reusable = false WHERE reusable AND id NOT IN ("
        " SELECT max(id) FROM verdict WHERE reusable"
        " GROUP BY commit_sha, oracle_sha256, env_fingerprint)"
    )
    op.create_index(
        "uq_verdict_key", "verdict", ["commit_sha", "oracle_sha256", "env_fingerprint"],
        unique=True, sqlite_where=sa.text("reusable"), postgresql_where=sa.text("reusable"),
    )
    with op.batch_alter_table("probe", schema=None) as batch_op:
        batch_op.add_column(sa.Column("round", sa.Integer(), nullable=True))
    with op.batch_alter_table("bisection", schema=None) as batch_op:
        batch_op.add_column(sa.Column("in_flight", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bisection", schema=None) as batch_op:
        batch_op.drop_column("in_flight")
    with op.batch_alter_table("probe", schema=None) as batch_op:
        batch_op.drop_column("round")
    op.drop_index("uq_verdict_key", table_name="verdict")
