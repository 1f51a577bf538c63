"""Every bad input: a one-line error that names the fix, a non-zero exit, the store untouched.

In-process through click's CliRunner (bisector.cli.main's own error mapping and exit codes):
only the store that the refusals must leave untouched is made by a real bisection."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import Result

from bisector.app.demo.torchlet import SyntheticHistory
from tests.support import ORACLES, copy_world, invoke, make_unrelated_repo, run_cli, snapshot


@pytest.fixture(scope="module")
def hist(world: SyntheticHistory, tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return copy_world(world, tmp_path_factory.mktemp("e") / "repo")


@pytest.fixture(scope="module")
def finished(hist: SyntheticHistory, tmp_path_factory: pytest.TempPathFactory,
             shared_cache: Path) -> Path:
    """A store that holds one finished bisection, made once for the module by the real CLI."""
    base = tmp_path_factory.mktemp("e-store")
    path = base / "b.db"
    run_cli("--db", str(path), "start", "--repo", str(hist.path), "--good", hist.main[8],
            "--bad", hist.main[15], "--oracle", "torchlet_norm", check=True,
            env={"BISECTOR_HOME": str(base / "home"), "BISECTOR_CACHE_DIR": str(shared_cache)})
    return path


@pytest.fixture
def db(home: Path, finished: Path) -> Path:
    """This test's copy of that store."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "b.db"
    shutil.copy(finished, path)
    return path


def assert_refused(r: Result, code: int, needle: str) -> None:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == code, r.stderr
    assert len(lines) == 1, f"expected one line, got:\n{r.stderr}"
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]


CASES = [
    # (name, good, bad, oracle, extra, exit code, message fragment)
    ("unknown ref", "v9.9.9", "main", "torchlet_norm", [], 3, "unknown good ref 'v9.9.9'"),
    ("good == bad", "main", "main", "torchlet_norm", [], 3, "same commit"),
    ("bad before good", "main", "main~5", "torchlet_norm", [], 3, "--find-fix"),
    ("missing oracle file", "main~5", "main", "./no/such/oracle.py", [], 4, "does not exist"),
    ("unknown oracle name", "main~5", "main", "no_such_oracle", [], 4, "bisect oracles"),
    ("oracle escape", "main~5", "main", "..", [], 4, "not a plain name"),
    ("malformed metadata", "main~5", "main", str(ORACLES / "bad_meta.py"), [], 4,
     "timeout has the wrong type"),
    ("oracle does not compile", "main~5", "main", str(ORACLES / "syntax_error.py"), [], 4,
     "does not compile"),
    ("two probes per GPU", "main~5", "main", "torchlet_norm", ["--gpus", "0", "--jobs", "2"],
     2, "one probe runs per GPU"),
    ("gpus not a list", "main~5", "main", "torchlet_norm", ["--gpus", "first"], 2,
     "--gpus 'first'"),
    ("unknown profile", "main~5", "main", "torchlet_norm", ["--profile", "nope"], 2,
     "unknown profile 'nope'"),
    ("malformed build variable", "main~5", "main", "torchlet_norm",
     ["--build-env", "USE_DISTRIBUTED"], 2, "write NAME=VALUE"),
]


@pytest.mark.parametrize(("name", "good", "bad", "oracle", "extra", "code", "needle"), CASES,
                         ids=[c[0] for c in CASES])
def test_bad_start_input(db: Path, hist: SyntheticHistory, name: str, good: str, bad: str,
                         oracle: str, extra: list[str], code: int, needle: str) -> None:
    before = snapshot(db)
    r = invoke("--db", str(db), "start", "--repo", str(hist.path), "--good", good, "--bad", bad,
                "--oracle", oracle, *extra)
    assert_refused(r, code, needle)
    assert snapshot(db) == before


def test_not_a_repository(db: Path, tmp_path: Path) -> None:
    before = snapshot(db)
    (tmp_path / "plain").mkdir()
    r = invoke("--db", str(db), "start", "--repo", str(tmp_path / "plain"), "--good", "a",
                "--bad", "b", "--oracle", "torchlet_norm")
    assert_refused(r, 3, "not a git repository")
    assert snapshot(db) == before


def test_unrelated_histories(db: Path, tmp_path: Path) -> None:
    before = snapshot(db)
    repo = make_unrelated_repo(tmp_path / "unrelated")
    r = invoke("--db", str(db), "start", "--repo", str(repo), "--good", "main",
                "--bad", "other", "--oracle", "torchlet_norm")
    assert_refused(r, 3, "unrelated histories")
    assert snapshot(db) == before


def test_bad_start_does_not_create_a_database(home: Path, hist: SyntheticHistory) -> None:
    path = home / "new.db"
    r = invoke("--db", str(path), "start", "--repo", str(hist.path), "--good", "nope",
                "--bad", "main", "--oracle", "torchlet_norm")
    assert_refused(r, 3, "unknown good ref")
    assert not path.exists()


@pytest.mark.parametrize("cmd", ["show", "resume", "log"])
def test_unknown_bisection_id(db: Path, cmd: str) -> None:
    before = snapshot(db)
    assert_refused(invoke("--db", str(db), cmd, "999"), 6, "no bisection with id 999")
    assert snapshot(db) == before


def test_missing_database_for_queries(home: Path) -> None:
    r = invoke("--db", str(home / "absent.db"), "list")
    assert_refused(r, 5, "no bisector database")
    assert not (home / "absent.db").exists()


def _corrupt(p: Path) -> None:
    p.write_bytes(b"not sqlite at all\n" * 100)


def _foreign(p: Path) -> None:
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE songs (id INTEGER PRIMARY KEY, title TEXT)")
    con.commit()
    con.close()


def _newer(p: Path) -> None:
    from bisector.store.db import open_store

    open_store(str(p)).engine.dispose()
    con = sqlite3.connect(p)
    con.execute("UPDATE alembic_version SET version_num='zz_future'")
    con.commit()
    con.close()


@pytest.mark.parametrize(
    ("make", "needle"),
    [(_corrupt, "not a SQLite database"), (_foreign, "another application"),
     (_newer, "newer than this bisector knows")],
    ids=["corrupt", "foreign", "newer"],
)
def test_unusable_database(home: Path, hist: SyntheticHistory, make: object,
                           needle: str) -> None:
    p = home / "weird.db"
    home.mkdir(parents=True, exist_ok=True)
    make(p)  # type: ignore[operator]
    before = p.read_bytes()
    r = invoke("--db", str(p), "start", "--repo", str(hist.path), "--good", "main~5",
                "--bad", "main", "--oracle", "torchlet_norm")
    assert_refused(r, 5, needle)
    assert p.read_bytes() == before
    assert_refused(invoke("--db", str(p), "list"), 5, needle)


@pytest.mark.adversarial
def test_list_hides_older_starts_that_stopped_at_their_endpoints(
        home: Path, world: SyntheticHistory, tmp_path: Path) -> None:
    """Issue 32, item 9: every start refused at its endpoints stayed in `bisect list`, which
    filled with them; the table keeps the newest row and says how many it hides."""
    bad = tmp_path / "always_bad.py"
    bad.write_text("import sys\nsys.exit(1)\n")
    db = str(home / "b.db")
    for _ in range(2):
        r = invoke("-q", "--db", db, "start", "--repo", str(world.path), "--good",
                   world.main[0], "--bad", world.main[-1], "--oracle", str(bad), "--no-confirm")
        assert r.exit_code == 7, r.stderr
    shown = invoke("--db", db, "list")
    assert shown.stdout.count("failed") == 1  # the newest one stays
    r = invoke("-q", "--db", db, "start", "--repo", str(world.path), "--good", world.main[0],
               "--bad", world.main[-1], "--oracle", "torchlet_norm", "--no-confirm")
    assert r.exit_code == 0, r.stderr
    shown = invoke("--db", db, "list")
    assert "failed" not in shown.stdout and "2 older bisection(s)" in shown.stderr
    assert invoke("--db", db, "list", "--all").stdout.count("failed") == 2
    assert len(json.loads(invoke("--db", db, "list", "--json").stdout)) == 3
