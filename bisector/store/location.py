"""Where the store is, told without opening it: the URL, the default file, and whether a
SQLite store exists yet.

Kept apart from bisector/store/db.py (SQLAlchemy, Alembic) so that the commands which only
need to know where the store is (``bisect list`` on a machine that has none yet, ``--enqueue``'s
check, the completion of ids) load neither.
"""

from __future__ import annotations

import os
from pathlib import Path

from bisector.base.paths import data_dir

# The newest migration (migrations/versions): a store stamped otherwise is migrated by
# store/db.py before anything reads it; the ORM-free reads of store/peek.py skip such a store.
SCHEMA_HEAD = "0016"

DEFAULT_FILE = "bisector.db"


def url_from(db: str) -> str:
    """Accept a SQLAlchemy URL or a plain file path (the common case for SQLite)."""
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).expanduser().resolve()}"


def default_db() -> str:
    """``$BISECTOR_DB``, else ``bisector.db`` in the data folder (made by open_store when a
    store is created there, not by naming it)."""
    return os.environ.get("BISECTOR_DB") or str(data_dir(create=False) / DEFAULT_FILE)


def sqlite_path(db: str) -> Path | None:
    """The file of a SQLite store (``--db PATH``, a ``sqlite:///`` URL or one naming a driver,
    ``sqlite+pysqlite:///``), None for a server or an in-memory database. Every file store is
    checked the same way before it is opened (store/db.py), whatever its URL's spelling."""
    scheme, sep, rest = url_from(db).partition("://")
    if not sep or not (scheme == "sqlite" or scheme.startswith("sqlite+")):
        return None
    name = rest.removeprefix("/").split("?", 1)[0]  # sqlite:///rel.db, sqlite:////abs.db
    return Path(name) if rest.startswith("/") and name else None


def read_only(path: Path) -> bool:
    """A SQLite store's file that exists but cannot be written here: the file, or the folder
    SQLite writes its journal and shared-memory files in (a read-only mount, an archive
    whose permissions say so, another user's store). It can be read as it is, never
    migrated or written."""
    return path.is_file() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def absent(db: str) -> bool:
    """A SQLite store whose file does not exist yet: nothing was ever stored there, and a
    query can say so without creating it (a folder or a damaged file is not absent: opening
    it says what is wrong)."""
    path = sqlite_path(db)
    return path is not None and not path.exists() and not path.is_symlink()
