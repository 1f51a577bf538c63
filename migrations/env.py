"""Alembic environment. bisector runs migrations in code (bisector.store.db.migrate) and hands
over its connection; the ``alembic`` CLI works too, with the URL from ``BISECTOR_DB``."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine

from bisector.store import fulltext
from bisector.store.models import Base

config = context.config
target_metadata = Base.metadata


def include_name(name, type_, parent_names) -> bool:  # type: ignore[no-untyped-def]
    """Procrastinate's tables (the workers' queue, applied by bisector/workers/queue.py) are
    its own schema, and the failure text's index (bisector/store/fulltext.py) is no model:
    autogenerate must never propose dropping them."""
    return (not (type_ == "table" and name and name.startswith("procrastinate_"))
            and fulltext.include_name(name, type_, parent_names))


def run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run(connection)
else:
    url = os.environ.get("BISECTOR_DB") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("set BISECTOR_DB to the database URL to run alembic by hand")
    engine = create_engine(url)
    with engine.begin() as conn:
        run(conn)
