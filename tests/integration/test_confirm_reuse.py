"""Issue 21 (repeat work costs nothing): a bisection whose culprit was confirmed before under
the same key (commit, oracle bytes, environment) reuses that confirmation with 0 new oracle
runs; ``--reconfirm`` asks for fresh runs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from tests.support import start

pytestmark = [pytest.mark.e2e]


def _runs(db: Path) -> int:
    with sqlite3.connect(db) as con:
        return int(con.execute("SELECT count(*) FROM run").fetchone()[0])


def test_a_confirmed_culprit_is_not_run_again_unless_asked(home: Path, tmp_path: Path,
                                                          world: SyntheticHistory) -> None:
    db = tmp_path / "b.db"
    first = start(db, world.path, world.main[0], world.main[-1])
    assert first.returncode == 0, first.stderr
    d1 = json.loads(first.stdout)
    assert d1["culprit"]["sha"] == world.culprit
    assert d1["result"]["confirmation"]["status"] == "confirmed"
    before = _runs(db)

    again = start(db, world.path, world.main[0], world.main[-1])
    assert again.returncode == 0, again.stderr
    d2 = json.loads(again.stdout)
    assert d2["culprit"]["sha"] == world.culprit
    checked = d2["result"]["confirmation"]
    assert checked["status"] == "confirmed" and checked["reused_from"] == d1["id"]
    assert _runs(db) == before  # every probe and the confirmation reused: 0 new runs
    assert f"confirmed by bisection {d1['id']}" in again.stderr
    assert "--reconfirm" not in d2["reproduce"]

    fresh = start(db, world.path, world.main[0], world.main[-1], "torchlet_norm", "--reconfirm")
    assert fresh.returncode == 0, fresh.stderr
    d3 = json.loads(fresh.stdout)
    assert "reused_from" not in d3["result"]["confirmation"]
    assert d3["result"]["confirmation"]["status"] == "confirmed"
    assert _runs(db) >= before + 2  # the culprit and its parent ran again
