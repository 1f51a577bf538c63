"""Issue 48, "the store's conditions said as they are": a store that cannot be written here (an
archive on a read-only mount) is shown and served as it is, and a full disk is a full disk.

Everything is real: a store made by a whole bisection, a folder made read-only by the means that
binds this process (permissions for a user; for root, whom permissions do not stop, a read-only
bind mount, else the immutable attribute), and a file system that is really full (a 1 MiB
tmpfs, where this process may mount one). SQLite's own SQLITE_FULL in the middle of a bisection
is also made without a mount: a page limit on every connection of the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.base.errors import StoreError
from bisector.store import db as store_db
from tests.support import bisect, invoke, one_line_error, serving

pytestmark = [pytest.mark.adversarial, pytest.mark.e2e]


def _files(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` and a digest of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir())}


def _run(*cmd: str) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0


def _unmount(folder: Path) -> bool:
    """Unmount ``folder``, lazily where this process still holds a file open there (the
    commands run in-process keep their store's connections in a pool)."""
    return _run("umount", str(folder)) or _run("umount", "--lazy", str(folder))


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[str]:
    """``folder`` and its files read-only for this process, really: a write there fails. Yields
    how (permissions, a read-only bind mount, the immutable attribute)."""
    files = [p for p in folder.iterdir() if p.is_file()]
    if os.geteuid() != 0:
        for p in files:
            p.chmod(0o444)
        folder.chmod(0o555)
        how, undo = "permissions", lambda: [folder.chmod(0o755), *(p.chmod(0o644) for p in files)]
    elif _run("mount", "--bind", str(folder), str(folder)):
        if not _run("mount", "-o", "remount,bind,ro", str(folder)):
            _unmount(folder)
            pytest.skip("root here cannot remount a bind mount read-only")
        how, undo = "read-only mount", lambda: _unmount(folder)
    elif _run("chattr", "+i", *map(str, files), str(folder)):
        how, undo = "immutable", lambda: _run("chattr", "-i", *map(str, files), str(folder))
    else:
        pytest.skip("root without CAP_SYS_ADMIN or CAP_LINUX_IMMUTABLE: nothing here makes a "
                    "folder read-only for this process")
    try:
        with pytest.raises(OSError):
            (folder / "written").write_text("x")
        with pytest.raises(OSError), files[0].open("r+b"):
            pass
        yield how
    finally:
        undo()


@pytest.fixture
def stored(home: Path, world: SyntheticHistory, tmp_path: Path) -> tuple[Path, str]:
    """A store holding one finished bisection, alone in its folder (its WAL checkpointed into
    the file, as an archived store is); and its culprit."""
    db = tmp_path / "archive" / "bisector.db"
    culprit = bisect(db, world, "--oracle", "torchlet_norm")["culprit"]["sha"]
    for extra in db.parent.iterdir():
        if extra != db:
            extra.unlink()
    assert db.with_name(db.name + "-wal").exists() is False
    return db, str(culprit)


READS: list[tuple[str, ...]] = [("show",), ("show", "--json"), ("show", "--format", "issue"),
                                ("log",), ("log", "--json"), ("list",), ("workers",)]
WRITES: list[tuple[str, ...]] = [("resume", "1"), ("cancel", "1")]


def test_a_read_only_store_is_shown_and_served(stored: tuple[Path, str]) -> None:
    """Issue 48, RO: show, log, list, workers and serve refused an archived store on a
    read-only mount ("cannot write ..."), and a store in WAL mode could not be opened at all
    where SQLite cannot make its shared-memory file. They read it as it is now, the quick
    way (snapshots) and the full way, and write nothing; the commands that write say in one
    line that it is read-only and what to do."""
    db, culprit = stored
    before = _files(db.parent)
    with read_only(db.parent):
        for quick in ("1", "0"):
            for args in READS:
                r = invoke("--db", str(db), *args, env={"BISECTOR_QUICK_READS": quick})
                assert r.exit_code == 0, (args, quick, r.stderr)
                if args[0] in ("show", "log", "list"):
                    assert culprit in r.stdout, (args, r.stdout)
        with serving("--db", str(db), env={**os.environ}) as base:
            assert httpx.get(base + "/api/bisections").json()[0]["culprit"] == culprit
            assert httpx.get(base + "/api/bisections/1").json()["culprit"]["sha"] == culprit
            for page in ("/", "/bisections/1", "/api/bisections/1/log",
                         "/bisections/1/report.md", "/watch"):
                assert httpx.get(base + page).status_code == 200, page
        for args in WRITES:
            r = invoke("--db", str(db), *args)
            one_line_error(r, f"cannot write {db}: it is read-only here",
                           code=StoreError.exit_code)
            assert "copy it somewhere writable and pass --db" in r.stderr
    assert _files(db.parent) == before


def test_a_read_only_store_that_needs_a_migration_says_so(stored: tuple[Path, str]) -> None:
    """Issue 48, RO: a read-only store at an older schema is not migrated (that writes): one
    line names both."""
    db, _ = stored
    con = sqlite3.connect(db)
    con.execute("UPDATE alembic_version SET version_num = '0011'")
    con.commit()
    con.close()
    before = _files(db.parent)
    with read_only(db.parent):
        for args in (("show",), ("list",), ("workers",)):
            one_line_error(invoke("--db", str(db), *args),
                           "is at schema revision 0011, older than this bisector's",
                           code=StoreError.exit_code)
    assert _files(db.parent) == before


# -- a full disk -------------------------------------------------------------------------------

@contextlib.contextmanager
def small_disk(folder: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs at ``folder``: a file system that really fills."""
    folder.mkdir()
    if not _run("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)):
        pytest.skip("this process may not mount a tmpfs (not root with CAP_SYS_ADMIN)")
    try:
        yield folder
    finally:
        _unmount(folder)


def _fill(folder: Path, leave: int = 0) -> Path:
    """Fill ``folder``'s file system until about ``leave`` bytes are left (none: until a write
    fails)."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            st = os.statvfs(folder)
            room = st.f_bavail * st.f_frsize - leave
            if room <= 0:
                break
            f.write(b"\0" * min(room, 2**16))
    return filler


def _intact(db: Path) -> None:
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        con.close()


FULL = "is full"


def test_a_full_disk_is_said_as_such(stored: tuple[Path, str], world: SyntheticHistory,
                                     tmp_path: Path) -> None:
    """Issue 48, DF: on a full disk a healthy store was "a damaged SQLite database ... move it
    aside" (SQLite's "disk I/O error" when it cannot make its shared-memory file), and a
    bisection whose write met the full disk ended in a traceback. Now the disk is full, in
    one line, exit 5, and the store is intact: with space again it shows, and the stopped
    bisection resumes to its culprit."""
    db, culprit = stored
    with small_disk(tmp_path / "small") as disk:
        shutil.copy(db, disk / db.name)
        small = disk / db.name
        filler = _fill(disk)
        for args in (*READS[:1], ("list",), ("log",), ("resume", "1")):
            r = invoke("--db", str(small), *args, env={"BISECTOR_QUICK_READS": "0"})
            one_line_error(r, f"the disk holding {small} {FULL}", code=StoreError.exit_code)
            assert "damaged" not in r.stderr and "move it aside" not in r.stderr
        filler.unlink()
        _intact(small)
        assert culprit in invoke("--db", str(small), "show").stdout
        # The disk fills in the middle of a bisection: its next write is refused.
        filler = _fill(disk, leave=96 * 1024)
        r = invoke("-q", "--db", str(small), "start", "--repo", str(world.path), "--good",
                   world.main[2], "--bad", world.main[-1], "--oracle", "torchlet_norm",
                   "--no-confirm")
        one_line_error(r, f"the disk holding {small} {FULL} (database or disk is full)",
                       code=StoreError.exit_code)
        filler.unlink()
        _intact(small)
        r = invoke("--db", str(small), "resume", "2", "--json")
        assert r.exit_code == 0, r.stderr
        assert culprit in r.stdout


def test_sqlite_full_is_said_as_such(stored: tuple[Path, str], world: SyntheticHistory,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, DF, where no file system can be mounted: SQLite's own SQLITE_FULL ("database
    or disk is full"), made by a page limit on every connection of the store, when a
    bisection writes: one line, exit 5, never a traceback; the store is intact, and with room
    again the same command finds the culprit."""
    db, culprit = stored
    con = sqlite3.connect(db)
    con.execute("VACUUM")  # no free page, every page full: a new bisection's rows need more
    pages = con.execute("PRAGMA page_count").fetchone()[0]
    con.close()
    plain = store_db._sqlite_pragmas

    def limited(dbapi_conn: Any, record: Any) -> None:
        plain(dbapi_conn, record)
        dbapi_conn.execute(f"PRAGMA max_page_count = {pages}")

    start = ("-q", "--db", str(db), "start", "--repo", str(world.path), "--good",
             world.main[2], "--bad", world.main[-1], "--oracle", "torchlet_norm", "--no-confirm",
             "--json")
    monkeypatch.setattr(store_db, "_sqlite_pragmas", limited)
    r = invoke(*start)
    one_line_error(r, f"the disk holding {db} {FULL} (database or disk is full)",
                   code=StoreError.exit_code)
    monkeypatch.setattr(store_db, "_sqlite_pragmas", plain)
    _intact(db)
    r = invoke(*start)
    assert r.exit_code == 0, r.stderr
    assert culprit in r.stdout
