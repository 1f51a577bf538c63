"""Open the store: engine, pragmas, and migrations to head.

SQLite gets WAL and a busy timeout so two bisections (or a worker and a `bisect list`) can share
one file; every verdict is committed in its own short transaction. The schema is the Alembic
migrations' (a new database gets the same tables in one step); a database written by a newer
bisector, or a file that is not a bisector database at all, is refused with a message instead of
being "fixed".
"""

from __future__ import annotations

import os
import sqlite3
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
from bisector.store.location import sqlite_path
from bisector.store.location import url_from as url_from

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
    it into one line (:meth:`lost`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self.retry_s = defaults.STORE_RETRY_S

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One short unit of work, committed at the end: a crash loses nothing committed."""
        conn = None if self.engine.dialect.name == "sqlite" else self.connect()
        s = self._sessions() if conn is None else self._sessions(bind=conn)
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
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
    page first (:func:`check_sqlite_file`); a caller that writes always has it checked."""
    url = url_from(db)
    if (path := sqlite_path(db)) is not None:
        if path.is_dir():
            raise StoreError(f"--db {path} is a directory: name a file in it, e.g. "
                             f"{path / 'bisector.db'}")
        if not path.exists() and not create:
            raise StoreError(f"no bisector database at {path}: run a bisection first or fix --db")
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


def check_sqlite_file(path: Path, *, whole: bool = True) -> None:
    """Refuse a file that is not a SQLite database or is damaged, before anything writes to
    it: the header, the schema read back, then SQLite's quick_check of every page. That last
    one reads the whole file (0.26 s for 500 MB from the page cache, seconds from disk), so
    with ``whole=False`` (a command that only reads) it runs only for a file of at most
    ``SQLITE_FULL_CHECK_BYTES``; damage a read meets later is :func:`damaged`'s one line, and
    a write never goes to a store that was not checked whole (a damaged free-page list can
    make SQLite overwrite live rows without an error)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as f:
        header = f.read(16)
    if header != b"SQLite format 3\x00":
        raise StoreError(
            f"{path} is not a SQLite database (corrupt or another kind of file): "
            f"move it aside or point --db elsewhere"
        )
    full = whole or path.stat().st_size <= defaults.SQLITE_FULL_CHECK_BYTES
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            con.execute("PRAGMA schema_version").fetchone()
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            ok = con.execute("PRAGMA quick_check").fetchone() if full else ("ok",)
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise StoreError(_damaged_line(str(path), e)) from None
    if ok is None or ok[0] != "ok":
        raise StoreError(
            f"{path} failed SQLite's integrity check: move it aside or point --db elsewhere"
        )


def _damaged_line(where: str, e: BaseException) -> str:
    return f"{where} is a damaged SQLite database ({e}): move it aside or point --db elsewhere"


# What SQLite says of a file whose pages are not what it wrote (SQLITE_CORRUPT, SQLITE_NOTADB).
_DAMAGE = ("database disk image is malformed", "is not a database")


def damaged(e: BaseException, db: str) -> StoreError | None:
    """The one line for SQLite damage a query met in the store ``db`` (a large store is not
    checked page by page when a command that only reads opens it), or None for anything
    else."""
    orig = getattr(e, "orig", e)
    if not isinstance(orig, sqlite3.DatabaseError):
        return None
    if not any(words in str(orig).lower() for words in _DAMAGE):
        return None
    return StoreError(_damaged_line(str(sqlite_path(db) or db), orig))


def migrate(engine: Engine, *, new_in_one_step: bool = True) -> None:
    """Bring the schema to head, refusing foreign or newer databases without writing to them.

    The usual case (already at head) takes no lock and loads no Alembic. Anything else is
    decided under a lock that serialises migrations between processes, because a migration in
    progress elsewhere looks, from outside, like a foreign database. An empty database gets
    the models' tables and head's stamp in one step (``new_in_one_step``) instead of every
    migration in turn, which rebuilds SQLite tables again and again (half a second on the
    first command of a new store); the test that migrations and models agree keeps the two
    ways equal, and Alembic takes the stamp like its own.
    """
    if _heads_and_tables(engine)[0] == {SCHEMA_HEAD}:
        return
    with migration_lock(engine):
        current, tables = _heads_and_tables(engine)
        if current == {SCHEMA_HEAD}:
            return
        if not current and tables - {"alembic_version"}:
            raise StoreError(
                f"the database holds tables of another application "
                f"({', '.join(sorted(tables)[:3])}...): point --db at a bisector database "
                f"or an empty one"
            )
        if not current and new_in_one_step:
            with engine.begin() as conn:
                from bisector.store.models import Base  # lazy: the models import is heavy

                Base.metadata.create_all(conn)
                _stamp(conn)
            return
        from alembic import command  # lazy: a store at head never needs it
        from alembic.script import ScriptDirectory

        cfg = alembic_config()
        script = ScriptDirectory.from_config(cfg)
        known = {rev.revision for rev in script.walk_revisions()}
        unknown = sorted(r for r in current if r not in known)
        if unknown:
            raise StoreError(
                f"the database is at schema revision {unknown[0]}, newer than this bisector "
                f"knows: upgrade bisector (pip install -U bisector)"
            )
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")


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

