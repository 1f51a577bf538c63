"""Open the store: engine, pragmas, and migrations to head.

SQLite gets WAL and a busy timeout so two bisections (or a worker and a `bisect list`) can share
one file; every verdict is committed in its own short transaction. The schema is the Alembic
migrations' (a new database gets the same tables in one step); a database written by a newer
bisector, or a file that is not a bisector database at all, is refused with a message instead of
being "fixed". A store that cannot be written here (a read-only mount, an archive) is read
as it is by the commands that only read, and refused with one line by those that write; a full
disk is said as such, never taken for damage.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    create_engine,
    event,
    inspect,
    text,
)
from sqlalchemy.exc import (
    DatabaseError,
    DBAPIError,
    DisconnectionError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.orm import Session, sessionmaker

from bisector.base import defaults
from bisector.base.errors import StoreError
from bisector.base.paths import PACKAGE_DIR
from bisector.infra import flock
from bisector.store.location import SCHEMA_HEAD as SCHEMA_HEAD

# Where the store is lives in location.py (no SQLAlchemy); re-exported for the callers here.
from bisector.store.location import default_db as default_db
from bisector.store.location import read_only, sqlite_path
from bisector.store.location import url_from as url_from
from bisector.store.peek import open_ro
from bisector.store.trouble import check_sqlite_file, disk_full, full_line, store_trouble

if TYPE_CHECKING:
    from alembic.config import Config

# The newest migration's revision. A store already there is opened without loading Alembic
# (a fifth of a second on every command); tests/integration/test_store.py checks it is
# Alembic's head.

# One transaction of the store, as the layers above name it (they never import SQLAlchemy).
Transaction = Session


def migrations_dir() -> Path:
    here = PACKAGE_DIR
    for cand in (here.parent / "migrations", here / "_migrations"):
        if (cand / "env.py").is_file():
            return cand
    raise StoreError("bisector's migrations are missing from the installation: reinstall it")


def alembic_config() -> Config:
    from alembic.config import Config  # lazy: only to migrate

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    return cfg


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def connection_lost(e: BaseException) -> bool:
    """Is ``e`` the database server going away (a restart, a network cut), as opposed to a
    bad statement? SQLAlchemy's disconnection errors and the driver's OperationalError
    (psycopg's, also when raised by the queue's own connections). SQLite's OperationalError
    ("database is locked") is no server going away and is not retried here."""
    if isinstance(e, DisconnectionError):
        return True
    if isinstance(e, DBAPIError):
        if e.connection_invalidated:
            return True
        e = e.orig if e.orig is not None else e
    return type(e).__module__.startswith("psycopg") and _psycopg_operational(e)


def _psycopg_operational(e: BaseException) -> bool:
    try:
        # lazy: psycopg is the optional postgres extra
        import psycopg
    except ImportError:
        return False
    return isinstance(e, psycopg.OperationalError)


class Store:
    """A migrated database and a session factory.

    On a server database every session first gets a live connection, waiting for the server
    (backoff, up to ``defaults.STORE_RETRY_S``) when it went away: a PostgreSQL restart in the
    middle of a bisection is a pause, not a crash. Past that wait, or when the server dies in
    the middle of a transaction, the connection error is raised; callers that own a run turn
    it into one line (:meth:`lost`). ``read_only``: a SQLite store that cannot be written
    here, opened for reading only (:func:`open_store`)."""

    def __init__(self, engine: Engine, read_only: bool = False) -> None:
        self.engine = engine
        self.read_only = read_only
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self.retry_s = defaults.STORE_RETRY_S

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One short unit of work, committed at the end: a crash loses nothing committed.

        A failure that is the store's condition, not a bug (SQLite damage a query met, a full
        disk), leaves as the store's own :class:`StoreError` with its one line
        (``store/trouble.py``): callers above the store (the CLI, the web view) catch that,
        never the database library's exceptions."""
        conn = None if self.engine.dialect.name == "sqlite" else self.connect()
        s = self._sessions() if conn is None else self._sessions(bind=conn)
        try:
            yield s
            s.commit()
        except BaseException as e:
            s.rollback()
            trouble = store_trouble(e, self.url) if isinstance(e, Exception) else None
            if trouble is not None:
                raise trouble from e
            raise
        finally:
            s.close()
            if conn is not None:
                conn.close()

    def connect(self) -> Connection:
        """A live connection (the pool pings it first), waiting for the server to come back
        with doubling pauses for up to ``retry_s``; then the last connection error."""
        deadline = time.monotonic() + self.retry_s
        pause = 0.25
        while True:
            try:
                return self.engine.connect()
            except Exception as e:
                if not connection_lost(e) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, defaults.STORE_RETRY_CAP_S)

    def reachable(self) -> bool:
        """Wait (as :meth:`connect` does) until the server answers; False when it did not."""
        try:
            self.connect().close()
        except Exception as e:
            if connection_lost(e):
                return False
            raise
        return True

    def lost(self, e: BaseException, bisection_id: int) -> StoreError:
        """The one line for a run whose database stayed away: what is stored is kept."""
        why = str(getattr(e, "orig", None) or e).strip().splitlines()
        return StoreError(f"lost the store {self.url} ({why[0] if why else type(e).__name__}); "
                          f"every finished run is kept: once the server is back, run "
                          f"`bisect resume {bisection_id}`")

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)


def open_store(db: str, *, create: bool = True, reads_only: bool = False) -> Store:
    """The store at ``db``, migrated to head (made when ``create``). ``reads_only``: the caller
    only reads (list, show, log, serve...), so a large SQLite file is not checked page by
    page first (:func:`check_sqlite_file`); a caller that writes always has it checked.

    A SQLite store that cannot be written here is opened for reading only when the caller
    only reads (no migration, no journal or WAL set up, SQLite's ``mode=ro``), and refused
    with one line when it would write."""
    url = url_from(db)
    if (path := sqlite_path(db)) is not None:
        if path.is_dir():
            raise StoreError(f"--db {path} is a directory: name a file in it, e.g. "
                             f"{path / 'bisector.db'}")
        if not path.exists() and not create:
            raise StoreError(f"no bisector database at {path}: run a bisection first or fix --db")
        if read_only(path):
            if not reads_only:
                raise StoreError(read_only_line(path))
            return _open_read_only(path, url)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create {path.parent} ({e.strerror}): point --db "
                             f"somewhere writable") from None
        # SQLite writes its journal beside the file, so the folder must be writable too.
        if not os.access(path.parent, os.W_OK) or (
                path.exists() and not os.access(path, os.W_OK)):
            raise StoreError(f"cannot write {path} (the folder or the file is read-only): "
                             f"fix its permissions or point --db elsewhere")
        check_sqlite_file(path, whole=not reads_only)
    try:
        engine = create_engine(url, pool_pre_ping=True)
    except (SQLAlchemyError, ImportError) as e:
        raise StoreError(f"cannot use database URL {url!r} ({e}): fix --db / BISECTOR_DB") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        if reads_only and path and _heads_and_tables(engine)[0] != {SCHEMA_HEAD}:
            check_sqlite_file(path)  # a migration writes: never to a store not checked whole
    migrate(engine)
    if engine.dialect.name == "sqlite" and not reads_only:
        # Persistent in the file; set only once the file is known to be ours (and checked
        # whole: it writes the header of a store in another journal mode, a backup's, say).
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
    return Store(engine)


def read_only_line(path: Path) -> str:
    """The one line for a command that writes, given a store that cannot be written here."""
    return (f"cannot write {path}: it is read-only here (a read-only mount, or the file or "
            f"its folder not writable by you) and this command writes to the store: copy it "
            f"somewhere writable and pass --db, or fix its permissions (show, log, list, "
            f"workers and serve read it as it is)")


def _open_read_only(path: Path, url: str) -> Store:
    """A store that cannot be written here, for reading: every connection SQLite's read-only
    one (store/peek.py: ``open_ro``), nothing migrated and no journal mode set; a store that
    would need a migration is refused (:func:`migrate`)."""
    check_sqlite_file(path, whole=False)
    engine = create_engine(url, creator=lambda: open_ro(path, timeout=30), pool_pre_ping=True)
    event.listen(engine, "connect", _sqlite_pragmas)
    migrate(engine, read_only=path)
    return Store(engine, read_only=True)


def migrate(engine: Engine, *, new_in_one_step: bool = True,
            read_only: Path | None = None) -> None:
    """Bring the schema to head, refusing foreign or newer databases without writing to them.

    The usual case (already at head) takes no lock and loads no Alembic. Anything else is
    decided under a lock that serialises migrations between processes, because a migration in
    progress elsewhere looks, from outside, like a foreign database. An empty database gets
    the models' tables and head's stamp in one step (``new_in_one_step``) instead of every
    migration in turn, which rebuilds SQLite tables again and again (half a second on the
    first command of a new store); the test that migrations and models agree keeps the two
    ways equal, and Alembic takes the stamp like its own.

    ``read_only``: the file of a store that cannot be written here; one not at head is refused
    with what it would need, and nothing (not even the lock's file) is written.
    """
    current, tables = _heads_and_tables(engine)
    if current == {SCHEMA_HEAD}:
        return
    if read_only is not None:
        _refuse_foreign(current, tables)
        if not current:
            raise StoreError(f"no bisector database in {read_only} (it holds no table), and "
                             f"it is read-only here: point --db at a bisector database")
        _refuse_newer(current)
        raise StoreError(
            f"{read_only} is at schema revision {sorted(current)[0]}, older than this "
            f"bisector's {SCHEMA_HEAD}, and read-only here: bringing it up to date writes to "
            f"it: copy it somewhere writable and pass --db (or open it once where it can be "
            f"written)")
    with migration_lock(engine):
        current, tables = _heads_and_tables(engine)
        if current == {SCHEMA_HEAD}:
            return
        _refuse_foreign(current, tables)
        if not current and new_in_one_step:
            with engine.begin() as conn:
                from bisector.store.models import Base  # lazy: the models import is heavy

                Base.metadata.create_all(conn)
                _stamp(conn)
            return
        from alembic import command  # lazy: a store at head never needs it

        _refuse_newer(current)
        cfg = alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")


def _refuse_foreign(current: set[str], tables: set[str]) -> None:
    if not current and tables - {"alembic_version"}:
        raise StoreError(
            f"the database holds tables of another application "
            f"({', '.join(sorted(tables)[:3])}...): point --db at a bisector database "
            f"or an empty one"
        )


def _refuse_newer(current: set[str]) -> None:
    from alembic.script import ScriptDirectory  # lazy: a store at head never needs it

    script = ScriptDirectory.from_config(alembic_config())
    known = {rev.revision for rev in script.walk_revisions()}
    unknown = sorted(r for r in current if r not in known)
    if unknown:
        raise StoreError(
            f"the database is at schema revision {unknown[0]}, newer than this bisector "
            f"knows: upgrade bisector (pip install -U bisector)"
        )


def _stamp(conn: Connection) -> None:
    """Alembic's version table at SCHEMA_HEAD, as ``alembic stamp head`` makes it."""
    table = Table("alembic_version", MetaData(), Column("version_num", String(32),
                                                        nullable=False),
                  PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))
    table.create(conn)
    conn.execute(table.insert().values(version_num=SCHEMA_HEAD))


def _heads_and_tables(engine: Engine) -> tuple[set[str], set[str]]:
    """The revisions the database is stamped with, and its tables, read with SQL alone."""
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            current = {r[0] for r in conn.execute(text("SELECT version_num FROM "
                                                       "alembic_version"))} \
                if "alembic_version" in tables else set()
    except (OperationalError, DatabaseError) as e:
        where = engine.url.database if engine.dialect.name == "sqlite" else None
        if disk_full(e, Path(where) if where else None):
            raise StoreError(full_line(where or engine.url.render_as_string(
                hide_password=True), e)) from None
        raise StoreError(
            f"cannot open the database {engine.url.render_as_string(hide_password=True)} "
            f"({e.orig}): check --db / BISECTOR_DB and that the server is running"
        ) from None
    return current, tables


MIGRATION_LOCK_KEY = 0x6269736563  # "bisec": one advisory lock id for bisector's migrations


@contextmanager
def migration_lock(engine: Engine) -> Iterator[None]:
    """Serialise migrations between processes: a file lock for SQLite, an advisory lock for
    PostgreSQL. Two bisections started at once on a fresh store must not both create tables."""
    if engine.dialect.name == "sqlite" and engine.url.database:
        with flock.held(Path(engine.url.database + ".migrate-lock")):
            yield
    elif engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})")
            try:
                yield
            finally:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})")
    else:
        yield

