"""disagreement: the pairs of bisections of one oracle whose answers cannot both hold, kept

`bisect list --disagree` (store/disagree.py) lists bisections of one oracle (the same bytes and
polarity) that disagree: one named a culprit X, the other's frozen candidates hold X past its
good endpoint and it said no regression or named another commit. Finding every pair joins
every culprit to every range that holds it, on 0014's ``ix_candidate_sha``: 5 s on a store of
100,000 bisections. So the pairs are kept in ``disagreement`` (found again for a bisection when
it finishes, dropped when it runs again) and this migration fills the table once, with that
query, from the bisections already stored.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29 06:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

PAIRS = """
INSERT INTO disagreement (named, other)
SELECT DISTINCT n.id, o.id FROM bisection n
JOIN candidate c ON c.sha = n.culprit_sha AND c.position > 0
JOIN bisection o ON o.id = c.bisection_id
WHERE n.state = 'done' AND n.culprit_sha IS NOT NULL AND o.id <> n.id
  AND o.oracle_sha256 = n.oracle_sha256 AND o.polarity = n.polarity
  AND (o.state = 'no regression' OR (o.state = 'done' AND NOT (
       o.culprit_sha = n.culprit_sha OR coalesce(o.culprit_inside, '') = n.culprit_sha
       OR o.culprit_sha = coalesce(n.culprit_inside, ''))))
"""


def upgrade() -> None:
    op.create_table(
        "disagreement",
        sa.Column("named", sa.Integer(), sa.ForeignKey(
            "bisection.id", ondelete="CASCADE", name="fk_disagreement_named_bisection"),
            primary_key=True),
        sa.Column("other", sa.Integer(), sa.ForeignKey(
            "bisection.id", ondelete="CASCADE", name="fk_disagreement_other_bisection"),
            primary_key=True),
    )
    op.create_index("ix_disagreement_other", "disagreement", ["other"])
    op.execute(PAIRS)


def downgrade() -> None:
    op.drop_index("ix_disagreement_other", table_name="disagreement")
    op.drop_table("disagreement")
