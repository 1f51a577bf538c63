"""A store written by the released code (de2d389, schema 0007, table ``verdict``) opens with
this code: migration 0008 renames ``verdict`` to ``run`` keeping every row, the finished
bisection shows as it was, and the bisection interrupted by Ctrl-C resumes and finishes without
paying again for the runs it had paid for. The stores were made by the old code itself
(tests/fixtures/make_store_de2d389.py), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bisector.app.demo.torchlet import generate
from bisector.store.location import SCHEMA_HEAD
from tests.support import run_cli

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OLD_REPO = "/tmp/bisector-de2d389/home/data/demo/torchlet"
PAID_BEFORE_CTRL_C = 3


@pytest.fixture(scope="module")
def demo_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo history again: its generator is deterministic, so these are the old shas."""
    path = tmp_path_factory.mktemp("upgrade") / "torchlet"
    generate(path)
    return path


# The bisections name the old clone; the test points them at the history made again here.
def _sqlite_store(tmp_path: Path, repo: Path) -> str:
    db = tmp_path / "store.sqlite"
    shutil.copyfile(FIXTURES / "store-de2d389.sqlite", db)
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE bisection SET repo_path = ?, settings = replace(settings, ?, ?)",
                    (str(repo), OLD_REPO, str(repo)))
    con.close()
    return str(db)


def _postgres_store(pg_url: str, repo: Path) -> str:
    import psycopg

    dsn = pg_url.replace("postgresql+psycopg://", "postgresql://")
    dump = (FIXTURES / "store-de2d389.sql").read_text()
    # pg_dump of a newer server may SET parameters an older one does not know.
    dump = "\n".join(ln for ln in dump.splitlines() if not ln.startswith("SET transaction_timeout"))
    psql = shutil.which("psql")
    assert psql, "psql is needed to load the PostgreSQL fixture"
    subprocess.run([psql, "-q", "-v", "ON_ERROR_STOP=1", dsn], input=dump, text=True, check=True,
                   capture_output=True)
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("UPDATE bisection SET repo_path = %s, "
                    "settings = replace(settings::text, %s, %s)::json",
                    (str(repo), OLD_REPO, str(repo)))
    return pg_url


def _rows(db: str, sql: str) -> list[Any]:
    url = db if "://" in db else f"sqlite:///{db}"
    engine = sa.create_engine(url)
    try:
        with engine.connect() as con:
            return [tuple(r) for r in con.execute(sa.text(sql))]
    finally:
        engine.dispose()


def _json(db: str, *args: str) -> dict[str, Any]:
    r = run_cli("--db", db, *args, "--json")
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_old_store_upgrades_shows_and_resumes(backend: str, request: pytest.FixtureRequest,
                                               tmp_path: Path, home: Path,
                                               demo_repo: Path) -> None:
    db = (_sqlite_store(tmp_path, demo_repo) if backend == "sqlite"
          else _postgres_store(request.getfixturevalue("pg_url"), demo_repo))
    before = _rows(db, "SELECT id, commit_sha, outcome FROM verdict ORDER BY id")
    probes_before = _rows(db, "SELECT bisection_id, seq, commit_sha, verdict_id, verdict "
                              "FROM probe ORDER BY bisection_id, seq")
    assert len(before) == 16 and len(probes_before) == 13

    done = _json(db, "show", "1")  # the first command migrates
    assert _rows(db, "SELECT version_num FROM alembic_version") == [(SCHEMA_HEAD,)]
    assert _rows(db, "SELECT id, commit_sha, outcome FROM run ORDER BY id") == before
    assert _rows(db, "SELECT bisection_id, seq, commit_sha, run_id, verdict FROM probe "
                     "ORDER BY bisection_id, seq") == probes_before
    assert done["state"] == "done" and done["culprit"]["sha"]
    assert [p["sha"] for p in done["probes"]] == [
        sha for b, _, sha, _, _ in probes_before if b == 1]

    paid = {sha for b, _, sha, _, _ in probes_before if b == 2}
    assert len(paid) == PAID_BEFORE_CTRL_C
    resumed = _json(db, "resume", "2")
    assert resumed["state"] == "done"
    assert resumed["culprit"]["sha"] == done["culprit"]["sha"]
    # The runs paid before Ctrl-C are kept, in order, and none was paid for again.
    assert [p["sha"] for p in resumed["probes"]][:PAID_BEFORE_CTRL_C] == [
        sha for b, _, sha, _, _ in probes_before if b == 2]
    slow = _rows(db, "SELECT oracle_sha256 FROM run WHERE id = "
                     "(SELECT run_id FROM probe WHERE bisection_id = 2 AND seq = 1)")[0][0]
    again = _rows(db, f"SELECT commit_sha FROM run WHERE oracle_sha256 = '{slow}'")
    assert sorted(sha for (sha,) in again if sha in paid) == sorted(paid)


def test_sqlite_downgrade_gives_the_old_table_back(tmp_path: Path, demo_repo: Path) -> None:
    from alembic import command

    from bisector.store.db import alembic_config

    db = _sqlite_store(tmp_path, demo_repo)
    before = _rows(db, "SELECT * FROM verdict ORDER BY id")
    cfg = alembic_config()
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0008")
        command.downgrade(cfg, "0007")
    engine.dispose()
    assert _rows(db, "SELECT * FROM verdict ORDER BY id") == before
    assert _rows(db, "SELECT count(*) FROM probe WHERE verdict_id IS NOT NULL") == [(13,)]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_old_culprits_get_their_facts_from_their_clones(backend: str,
                                                         request: pytest.FixtureRequest,
                                                         tmp_path: Path, home: Path,
                                                         demo_repo: Path) -> None:
    """The old store's culprit was named before its author, pull request and paths were kept:
    the first list that filters by them reads them again from the clone (issue 49), so an old
    store answers --author and --touching; a clone that is gone is skipped, not an error."""
    db = (_sqlite_store(tmp_path, demo_repo) if backend == "sqlite"
          else _postgres_store(request.getfixturevalue("pg_url"), demo_repo))
    done = _json(db, "show", "1")
    culprit = done["culprit"]["sha"]
    author = subprocess.run(["git", "-C", str(demo_repo), "log", "-1", "--format=%an", culprit],
                            capture_output=True, text=True, check=True).stdout.strip()
    changed = subprocess.run(["git", "-C", str(demo_repo), "diff-tree", "--no-commit-id", "-r",
                              "--name-only", culprit], capture_output=True, text=True,
                             check=True).stdout.split()
    assert _rows(db, "SELECT count(*) FROM git_commit") == [(0,)]

    def ids(*args: str) -> set[int]:
        r = run_cli("--db", db, "list", "--format", "json", *args)
        assert r.returncode == 0, r.stderr
        return {row["id"] for row in json.loads(r.stdout)}

    assert ids("--author", author.upper()) == {1}
    assert ids("--touching", changed[0]) == {1}
    assert _rows(db, "SELECT sha FROM git_commit") == [(culprit,)]
    # The failure text of its bad probes, searched in the documents migration 0016 filled.
    [(said,)] = _rows(db, "SELECT r.output_tail FROM probe p JOIN run r ON r.id = p.run_id "
                          "WHERE p.verdict = 'bad' AND p.bisection_id = 1 ORDER BY p.seq "
                          "LIMIT 1")
    needle = next(line for line in said.splitlines() if len(line.strip()) >= 8).strip()
    assert 1 in ids("--text", needle[:40].swapcase())
    assert ids("--text", "no run ever said this") == set()
    # A second old culprit whose clone is gone: skipped, and the note still counts it.
    engine = sa.create_engine(db if "://" in db else f"sqlite:///{db}")
    with engine.begin() as con:
        con.execute(sa.text("UPDATE bisection SET repo_path = '/gone/clone' WHERE id = 1"))
        con.execute(sa.text("DELETE FROM commit_path"))
        con.execute(sa.text("DELETE FROM git_commit"))
    engine.dispose()
    r = run_cli("--db", db, "list", "--author", author)
    assert r.returncode == 0 and "1 culprit(s) were named before bisector kept" in r.stderr
