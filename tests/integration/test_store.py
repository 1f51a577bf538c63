"""The store against real SQLite files and a real PostgreSQL server."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from bisector.base import defaults
from bisector.base.errors import StoreError
from bisector.store import fulltext
from bisector.store.db import SCHEMA_HEAD, alembic_config, migrate, open_store, url_from
from bisector.store.models import Base
from tests.support import invoke, one_line_error


def _drift(store_url: str, one_step: bool) -> list[object]:
    """What differs between the models and a new database's schema, made by running every
    migration in turn (``one_step=False``) or in one step (what a new store gets)."""
    engine = create_engine(url_from(store_url))
    migrate(engine, new_in_one_step=one_step)
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_heads() == (SCHEMA_HEAD,)
        # The failure text's index is no model (store/fulltext.py); it is tested on its own.
        ctx = MigrationContext.configure(conn, opts={"compare_type": True,
                                                     "include_name": fulltext.include_name})
        drift = list(compare_metadata(ctx, Base.metadata))
    engine.dispose()
    return drift


@pytest.mark.parametrize("one_step", [False, True], ids=["migrated", "one-step"])
def test_sqlite_migrations_match_models(tmp_path: Path, one_step: bool) -> None:
    assert _drift(str(tmp_path / "b.db"), one_step) == []


def test_postgres_migrations_match_models(pg_url: str) -> None:
    # Migrated in turn; the one-step schema is the models' by construction (checked above).
    assert _drift(pg_url, False) == []


def test_schema_head_is_alembics_head() -> None:
    """A store at SCHEMA_HEAD is opened without Alembic: it must be the newest migration."""
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_current_head() == SCHEMA_HEAD


def test_a_one_step_store_takes_later_migrations(tmp_path: Path) -> None:
    """A store made in one step is stamped like a migrated one: Alembic can go on from it."""
    engine = create_engine(url_from(str(tmp_path / "b.db")))
    migrate(engine)
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "-1")
        assert MigrationContext.configure(conn).get_current_heads() != (SCHEMA_HEAD,)
    migrate(engine)
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_heads() == (SCHEMA_HEAD,)


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
    with pytest.raises(StoreError, match=r"damaged|integrity"):  # the URL naming a driver
        open_store(f"sqlite+pysqlite:///{f}")


def test_a_large_store_is_read_whole_only_before_a_write(tmp_path: Path) -> None:
    f = tmp_path / "b.db"
    open_store(str(f)).engine.dispose()
    con = sqlite3.connect(f)
    con.execute("INSERT INTO oracle (sha256, name, content, meta, created_at) "
                "VALUES (?, 'o', 'x', '{}', '2026-01-01')", ("0" * 64,))
    tail = "x" * 8000  # a year of probes' output tails makes a store this size and more
    rows = ((f"{i:040x}", "0" * 64, "f" * 64, "good", 0, "exit 0", False, 1.0, "2026-01-01",
             "2026-01-01", tail, "{}")
            for i in range(defaults.SQLITE_FULL_CHECK_BYTES // 8000 + 500))
    con.executemany("INSERT INTO run (commit_sha, oracle_sha256, env_fingerprint, outcome, "
                    "exit_code, reason, reusable, duration_s, started_at, finished_at, "
                    "output_tail, facts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'bisection'").fetchone()
    size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()  # the last close checkpoints the WAL into the file
    assert f.stat().st_size > defaults.SQLITE_FULL_CHECK_BYTES
    with f.open("r+b") as raw:  # the bisection table's root page smashed, the schema whole
        raw.seek((root[0] - 1) * size)
        raw.write(b"\xff" * size)
    before = f.read_bytes()
    # To read it, header and schema are enough; the damage a query meets is one line.
    open_store(str(f), reads_only=True).engine.dispose()
    r = invoke("--db", str(f), "list")
    one_line_error(r, f"{f} is a damaged SQLite database", code=StoreError.exit_code)
    assert "move it aside" in r.stderr
    r = invoke("show", "last", env={"BISECTOR_DB": str(f)})  # the store as cli() found it
    one_line_error(r, f"{f} is a damaged SQLite database", code=StoreError.exit_code)
    # To write to it, every page is checked first: a damaged store is refused untouched.
    with pytest.raises(StoreError, match=r"damaged|integrity"):
        open_store(str(f))
    one_line_error(invoke("--db", str(f), "gc", "--max-size", "50G", "--dry-run"),
                   "damaged SQLite database", code=StoreError.exit_code)
    # Issue 32, item 9: the web view answered HTTP 500; it says what is wrong, as list does.
    from starlette.testclient import TestClient

    from bisector.web.server import create_app

    client = TestClient(create_app(open_store(str(f), reads_only=True)),
                        raise_server_exceptions=False)
    got = client.get("/")
    assert got.status_code == 503 and "is a damaged SQLite database" in got.text
    assert f.read_bytes() == before


@pytest.mark.adversarial
def test_du_says_a_store_it_cannot_read(tmp_path: Path) -> None:
    """Issue 32, item 9: ``du`` on a damaged small store silently fell back to the files."""
    f = tmp_path / "b.db"
    f.write_bytes(b"SQLite format 3\x00" + b"\xff" * 8000)
    r = invoke("--db", str(f), "du")
    assert r.exit_code == 0, r.stderr
    assert "note:" in r.stderr and "sizes below are from the files alone" in r.stderr


def test_a_command_that_only_reads_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """A store in another journal mode (a backup made with VACUUM INTO is one) is not switched
    to WAL by a read: that would write its header without the page-by-page check."""
    f = tmp_path / "b.db"
    open_store(str(f)).engine.dispose()
    con = sqlite3.connect(f)
    assert con.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    con.close()
    before = f.read_bytes()
    for args in (("list",), ("list", "--json")):
        assert invoke("--db", str(f), *args).exit_code == 0
    assert f.read_bytes() == before
    open_store(str(f)).engine.dispose()  # a command that may write: WAL, as always
    con = sqlite3.connect(f)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    con.close()


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
    assert _drift(url, one_step=True) == []  # already at head: only checked
