"""disagreements: an index from a commit to the bisections whose range holds it

`bisect list --disagree` pairs a bisection that named a culprit with the bisections of the same
oracle whose frozen candidates hold that commit (store/disagree.py): one index seek a culprit
on ``candidate (sha, bisection_id, position)``, instead of a scan of every candidate list.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29 06:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_candidate_sha", "candidate", ["sha", "bisection_id", "position"])


def downgrade() -> None:
    op.drop_index("ix_candidate_sha", table_name="candidate")
