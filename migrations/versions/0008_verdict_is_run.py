"""run: the table of oracle runs was called ``verdict``; a verdict is now only good/bad/skip

One word, one meaning (docs/architecture.md, glossary): a *run* is one execution of an oracle
on (commit, oracle hash, environment), shared by every bisection; a *verdict* is what a run
meant for one bisection, which the probe stores. So the table ``verdict`` becomes ``run`` and the
columns that point at it (``probe.verdict_id``, ``probe_task.verdict_id``) become ``run_id``.

Every row is kept: tables and columns are renamed in place (PostgreSQL keeps the sequence and
the foreign keys follow; SQLite 3.26+ rewrites the references of other tables), indexes are
made again under their new names, and constraint names follow where the database lets them be
renamed. The downgrade renames everything back.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

KEY = ["commit_sha", "oracle_sha256", "env_fingerprint"]
# Constraint names of PostgreSQL (SQLite keeps them inside CREATE TABLE, where nothing reads
# them): (table, old, new) with the tables named as they are after the upgrade.
CONSTRAINTS = [
    ("run", "pk_verdict", "pk_run"),
    ("run", "fk_verdict_artifact_id_artifact", "fk_run_artifact_id_artifact"),
    ("run", "fk_verdict_oracle_sha256_oracle", "fk_run_oracle_sha256_oracle"),
    ("probe", "fk_probe_verdict_id_verdict", "fk_probe_run_id_run"),
    ("probe_task", "fk_probe_task_verdict_id_verdict", "fk_probe_task_run_id_run"),
]


def _rename(old: str, new: str, *, indexes: tuple[str, str], back: bool) -> None:
    """Rename the table ``old`` to ``new`` and the columns pointing at it, keeping every row."""
    bind = op.get_bind()
    old_ix, new_ix = indexes
    op.drop_index(f"uq_{old_ix}_key", table_name=old)
    op.drop_index(f"ix_{old_ix}_key", table_name=old)
    op.rename_table(old, new)
    for table in ("probe", "probe_task"):
        op.execute(sa.text(f'ALTER TABLE "{table}" RENAME COLUMN "{old}_id" TO "{new}_id"'))
    if bind.dialect.name == "postgresql":
        for table, before, after in CONSTRAINTS:
            if back:
                table, before, after = {"run": "verdict"}.get(table, table), after, before
            op.execute(sa.text(f'ALTER TABLE "{table}" RENAME CONSTRAINT "{before}" TO "{after}"'))
    op.create_index(f"ix_{new_ix}_key", new, KEY)
    op.create_index(f"uq_{new_ix}_key", new, KEY, unique=True,
                    sqlite_where=sa.text("reusable"), postgresql_where=sa.text("reusable"))


def upgrade() -> None:
    _rename("verdict", "run", indexes=("verdict", "run"), back=False)


def downgrade() -> None:
    _rename("run", "verdict", indexes=("run", "verdict"), back=True)
