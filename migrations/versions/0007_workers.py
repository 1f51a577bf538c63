"""workers: probes handed to `bisect worker` processes through the queue, fenced by attempt

``probe_task`` is one probe of a round given to the workers; its ``attempt`` is bumped by each
worker that starts it, and a result is written only by the attempt that is current, so the late
result of a killed worker never lands. ``worker`` lists the workers with their heartbeats (a
store with a live one enqueues probes instead of running them in-process), and
``bisection.cancel_requested_at`` is how `bisect cancel` reaches a coordinator on another host.

The queue itself (Procrastinate's tables) is not part of this schema: the first worker or
coordinator applies Procrastinate's own schema to a PostgreSQL store (``bisector/queue.py``).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bisection", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cancel_requested_at", sa.DateTime(timezone=True),
                                      nullable=True))
    op.create_table(
        "probe_task",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("bisection_id", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("commit_sha", sa.String(length=40), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        sa.Column("build_job_id", sa.BigInteger(), nullable=True),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("owner", sa.String(length=200), nullable=True),
        sa.Column("verdict_id", sa.Integer(), nullable=True),
        sa.Column("verdict", sa.String(length=10), nullable=True),
        sa.Column("reused", sa.Boolean(), nullable=False),
        sa.Column("recorded", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["bisection_id"], ["bisection.id"], ondelete="CASCADE",
                                name=op.f("fk_probe_task_bisection_id_bisection")),
        sa.ForeignKeyConstraint(["verdict_id"], ["verdict.id"],
                                name=op.f("fk_probe_task_verdict_id_verdict")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_probe_task")),
    )
    op.create_index(op.f("ix_probe_task_bisection_id"), "probe_task", ["bisection_id"])
    op.create_index(op.f("ix_probe_task_state"), "probe_task", ["state"])
    op.create_table(
        "worker",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("gpu", sa.String(length=20), nullable=True),
        sa.Column("queues", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("jobs", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["probe_task.id"], ondelete="SET NULL",
                                name=op.f("fk_worker_task_id_probe_task")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker")),
    )


def downgrade() -> None:
    op.drop_table("worker")
    op.drop_index(op.f("ix_probe_task_state"), table_name="probe_task")
    op.drop_index(op.f("ix_probe_task_bisection_id"), table_name="probe_task")
    op.drop_table("probe_task")
    with op.batch_alter_table("bisection", schema=None) as batch_op:
        batch_op.drop_column("cancel_requested_at")
