"""The store says its own conditions as its own error: SQLite damage a query met and a full
disk leave ``Store.session`` as a :class:`StoreError` with one line, so the layers above it
(the CLI, the web view) catch bisector's exception, never the database library's."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError

from bisector.base.errors import StoreError
from bisector.store.db import Store, open_store

pytestmark = pytest.mark.unit


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(str(tmp_path / "b.db"))


def _met(message: str) -> OperationalError:
    """What SQLAlchemy raises when a statement meets this SQLite error."""
    return OperationalError("SELECT 1", {}, sqlite3.DatabaseError(message))


DAMAGED = r"b\.db is a damaged SQLite database \(database disk image is malformed\): move it"


def _damage(store: Store, path: Path) -> None:
    """Every page after the first overwritten, as a disk or a copy gone wrong leaves a file:
    the next statement reads them."""
    store.engine.dispose()
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(4096)
        f.write(b"\xff" * (size - 4096))


def test_damage_a_query_meets_leaves_the_session_as_the_stores_one_line(
        store: Store, tmp_path: Path) -> None:
    _damage(store, tmp_path / "b.db")
    with pytest.raises(StoreError, match=DAMAGED), store.session() as s:
        s.execute(text("SELECT count(*) FROM bisection")).all()


def test_a_full_disk_leaves_the_session_as_the_stores_one_line(store: Store) -> None:
    with pytest.raises(StoreError, match=r"is full \(database or disk is full\): the store is "
                                         r"intact"), store.session():
        raise _met("database or disk is full")


def test_anything_else_leaves_the_session_as_it_was_raised(store: Store) -> None:
    """A bug or a constraint a caller handles (a duplicate row) is no condition of the store."""
    with pytest.raises(IntegrityError), store.session():
        raise IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE constraint"))
    with pytest.raises(ValueError), store.session():
        raise ValueError("a bug")


def test_the_web_view_answers_the_stores_error_with_503(store: Store, tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from bisector.web import server

    app = server.create_app(store)
    _damage(store, tmp_path / "b.db")  # damaged under a running view
    got = TestClient(app, raise_server_exceptions=False).get("/")
    assert got.status_code == 503
    assert "b.db is a damaged SQLite database" in got.text and "move it aside" in got.text
    assert "Traceback" not in got.text and "sqlalchemy" not in got.text.lower()


def test_the_web_view_names_no_database_librarys_error() -> None:
    source = Path(server_file()).read_text(encoding="utf-8")
    imported = {a.name.split(".")[0] for n in ast.walk(ast.parse(source))
                if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(ast.parse(source))
                 if isinstance(n, ast.ImportFrom)}
    assert not imported & {"sqlalchemy", "sqlite3", "psycopg"}


def server_file() -> str:
    from bisector.web import server

    return str(server.__file__)
