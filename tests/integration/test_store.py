"""The store against real SQLite files and a real PostgreSQL server."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from bisector.base.errors import StoreError
from bisector.store.db import open_store
from bisector.store.models import Base


def _drift(store_url: str) -> list[object]:
    store = open_store(store_url)
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(ctx, Base.metadata))


def test_sqlite_migrations_match_models(tmp_path: Path) -> None:
    assert _drift(str(tmp_path / "b.db")) == []


def test_postgres_migrations_match_models(pg_url: str) -> None:
    assert _drift(pg_url) == []


def test_sqlite_uses_wal(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "b.db"))
    with store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_migrating_twice_is_a_no_op(tmp_path: Path) -> None:
    import sqlite3

    def schema_version() -> int:
        with sqlite3.connect(tmp_path / "b.db") as con:
            return int(con.execute("PRAGMA schema_version").fetchone()[0])

    open_store(str(tmp_path / "b.db")).engine.dispose()
    before = schema_version()
    open_store(str(tmp_path / "b.db")).engine.dispose()
    assert schema_version() == before  # the second open changed no table


def test_corrupt_file_is_refused_untouched(tmp_path: Path) -> None:
    f = tmp_path / "b.db"
    f.write_bytes(b"this is not a database, it is a shopping list\n" * 20)
    before = f.read_bytes()
    with pytest.raises(StoreError, match="not a SQLite database"):
        open_store(str(f))
    assert f.read_bytes() == before


def test_damaged_sqlite_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "b.db"
    open_store(str(f)).engine.dispose()  # the last close checkpoints the WAL into the file
    raw = bytearray(f.read_bytes())
    raw[100:] = b"\xff" * (len(raw) - 100)  # keep the header, smash every b-tree page
    f.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match=r"damaged|integrity"):
        open_store(str(f))


def test_foreign_database_is_refused_untouched(tmp_path: Path) -> None:
    f = tmp_path / "b.db"
    con = sqlite3.connect(f)
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="another application"):
        open_store(str(f))
    con = sqlite3.connect(f)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert names == {"invoices"}


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "b.db"
    open_store(str(f))
    con = sqlite3.connect(f)
    con.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="newer than this bisector"):
        open_store(str(f))


def test_unreachable_postgres_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="cannot open the database"):
        open_store("postgresql+psycopg://nobody@127.0.0.1:1/none")


def _open(url: str) -> str:
    from bisector.store.db import open_store as _o

    _o(url).engine.dispose()
    return "ok"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_many_processes_opening_a_fresh_store_at_once(tmp_path: Path, backend: str,
                                                      request: pytest.FixtureRequest) -> None:
    import multiprocessing

    url = str(tmp_path / "fresh.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        assert pool.map(_open, [url] * 6) == ["ok"] * 6
    assert _drift(url) == []
