"""The object every command gets (``@click.pass_obj``): where the store is, and the store itself
opened on first use; the command's :class:`~bisector.run.policy.Policy` and the configuration
files, each resolved or read once by the group (cli/__init__.py). Its own module so that the
command modules (disk, watch, workers) name it without importing the group in cli/__init__.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bisector.base.errors import StoreError
from bisector.store.location import sqlite_path

if TYPE_CHECKING:
    from bisector.cli.config_file import ConfigFile
    from bisector.run.policy import Policy
    from bisector.store.db import Store


class Ctx:
    """What every command gets (``@click.pass_obj``): the store's location, opened on first
    use. A plain class, not a dataclass: importing `dataclasses` would add to the start of
    every command (make bench, section 12)."""

    # The store of the command running now, as ``cli()`` resolved it (--db, $BISECTOR_DB, the
    # default): what ``main()`` names when a query meets a damaged page.
    last_db: str | None = None
    # The store the command opened, if any: what ``main()`` closes before the process exits.
    opened: Store | None = None

    def __init__(self, db: str, debug: bool, policy: Policy,
                 config_files: list[ConfigFile] | None = None) -> None:
        self.db, self.debug = db, debug
        # What the command line, $BISECTOR_ARTIFACTS and the user's file chose, resolved once:
        # every use case this command calls is handed it (never os.environ).
        self.policy = policy
        # The bisector.toml files as the group read them (cli/config_file.files): the watch's
        # tables come from these bytes, not from a second read.
        self.config_files = config_files or []
        self._store: Store | None = None
        self._whole = False  # checked page by page (store/trouble.py: check_sqlite_file)
        Ctx.last_db = db

    def store(self, create: bool = True, reads_only: bool = False) -> Store:
        """The store, opened on first use; ``reads_only``: the command never writes to it."""
        # lazy: SQLAlchemy and Alembic, for the commands that open the store
        from bisector.store.db import open_store, read_only_line
        from bisector.store.trouble import check_sqlite_file

        if self._store is None:
            self._store = open_store(self.db, create=create, reads_only=reads_only)
            self._whole = not reads_only
            Ctx.opened = self._store
        elif not reads_only and self._store.read_only and (path := sqlite_path(self.db)):
            raise StoreError(read_only_line(path))  # opened to read as it is, now to write
        elif not reads_only and not self._whole and (path := sqlite_path(self.db)):
            check_sqlite_file(path)  # opened to read, now to write: checked whole first
            self._whole = True
        return self._store
