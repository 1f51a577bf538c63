"""The watch's guarantees that need no index: the unique keys under concurrent ticks on one
real SQLite file and on a real PostgreSQL server, a refused configuration leaving no store
behind, and the systemd units."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bisector.infra.owner import owner_id
from bisector.store import watch as ws
from bisector.store.db import open_store
from tests.support import ROOT, run_cli

UNITS = ROOT / "deploy" / "systemd"


def _found(verdict: str) -> ws.Finding:
    return ws.Finding(verdict, "pass" if verdict == "good" else "fail", "", 0, 0.1, "", "0" * 64,
                      {})


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One store's URL: a real SQLite file, or a database on the tests' PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "b.db")
    return str(request.getfixturevalue("pg_url"))


def test_four_ticks_at_once_claim_one_flip(db_url: str) -> None:
    db = db_url
    store = open_store(str(db))
    me = owner_id()
    recs = []
    for version, sha, verdict in (("1.dev1", "a" * 40, "good"), ("1.dev2", "b" * 40, "bad")):
        state, rec = ws.claim_result(store, ws.ResultKey("s", "o", version, sha), source="x",
                                     git_version=None, me=me)
        assert state == "mine"
        assert ws.finish_result(store, rec.id, me, _found(verdict))
        recs.append(ws.get_result(store, rec.id))
    # The same result claimed again: recorded, nothing to run.
    assert ws.claim_result(store, recs[0].key, source="x", git_version=None, me="h:1")[0] \
        == "done"
    newer, older = ws.last_decided(store, "s", "o")
    assert (newer.id, older.id) == (recs[1].id, recs[0].id)

    won: list[ws.FlipRecord | None] = []
    gate = threading.Barrier(4)

    def tick(i: int) -> None:
        own = open_store(str(db))  # each tick its own engine, as separate processes have
        gate.wait()
        won.append(ws.claim_flip(own, suite="s", oracle="o", kind="regression", older=older,
                                 newer=newer, me=f"host:{100 + i}"))

    threads = [threading.Thread(target=tick, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(f is not None for f in won) == 1
    assert len(ws.flips(store)) == 1
    flip = ws.flips(store)[0]
    # Announcing is taken once too.
    assert [ws.mark_notified(store, flip.id, "flip") for _ in range(3)] == [True, False, False]


def test_a_dead_ticks_claims_are_taken_over(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "b.db"))
    dead = f"{owner_id().split(':')[0]}:999999999"  # this host, a pid that does not exist
    key = ws.ResultKey("s", "o", "1", "c" * 40)
    assert ws.claim_result(store, key, source="x", git_version=None, me=dead)[0] == "mine"
    state, rec = ws.claim_result(store, key, source="x", git_version=None, me=owner_id())
    assert state == "mine" and rec.owner == owner_id()
    older = rec
    newer = ws.claim_result(store, ws.ResultKey("s", "o", "2", "d" * 40), source="x",
                            git_version=None, me=owner_id())[1]
    flip = ws.claim_flip(store, suite="s", oracle="o", kind="fix", older=older, newer=newer,
                         me=dead)
    assert flip is not None
    (taken,) = ws.orphaned_flips(store, owner_id())
    assert taken.id == flip.id and taken.owner == owner_id()
    assert ws.orphaned_flips(store, owner_id()) == []


def test_a_skip_of_the_machine_is_tried_again_a_skip_of_the_torch_is_not(
        tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "b.db"))
    me = owner_id()
    for reusable, again in ((False, "mine"), (True, "done")):
        key = ws.ResultKey("s", "o", f"v{reusable}", "e" * 40)
        rec = ws.claim_result(store, key, source="x", git_version=None, me=me)[1]
        skip = ws.Finding("skip", "skip", "environment install failed", None, 0.0, "", "0" * 64,
                          {"reusable": reusable})
        assert ws.finish_result(store, rec.id, me, skip)
        assert ws.claim_result(store, key, source="x", git_version=None, me="h:2")[0] == again


def test_a_refused_config_leaves_no_store(home: Path, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    cfg = tmp_path / "bisector.toml"
    cfg.write_text('[[suite]]\nname = "cpu"\nrepo = "repo"\noracles = ["torchlet_norm"]\n'
                   'torch = "nighty"\n')
    r = run_cli("tick", "--config", str(cfg))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "torch = 'nighty'" in lines[0] and "use one of" in lines[0]
    cfg.write_text(cfg.read_text().replace("nighty", "nightly"))
    r = run_cli("tick", "--config", str(cfg), "--every", "at three")
    assert r.returncode == 2 and "not a cron expression" in r.stderr
    r = run_cli("tick", "--config", str(cfg), "--suite", "gpu")
    assert r.returncode == 2 and "--suite gpu: no such suite; configured: cpu" in r.stderr
    r = run_cli("tick", "--config", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "no such file" in r.stderr
    assert not (home / "data" / "bisector.db").exists()
    r = run_cli("watch", "--json")
    assert r.returncode == 5 and "no bisector database" in r.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (it comes with systemd)")
def test_the_systemd_units_verify(tmp_path: Path) -> None:
    names = sorted(p.name for p in UNITS.iterdir())
    assert names == ["bisector-build.service", "bisector-tick.service", "bisector-tick.timer",
                     "bisector-worker@.service"]
    timer = (UNITS / "bisector-tick.timer").read_text()
    assert "OnCalendar=*-*-* 03:00:00" in timer and "Persistent=true" in timer
    assert "ExecStart=/usr/local/bin/bisect worker --gpu %i" in \
        (UNITS / "bisector-worker@.service").read_text()
    assert "ExecStart=/usr/local/bin/bisect worker --queue build" in \
        (UNITS / "bisector-build.service").read_text()
    # verify checks that ExecStart exists: point it at this checkout's entry point.
    bisect = Path(sys.executable).parent / "bisect"
    for p in UNITS.iterdir():
        name = "bisector-worker@0.service" if p.name.startswith("bisector-worker@") else p.name
        (tmp_path / name).write_text(p.read_text().replace("/usr/local/bin/bisect", str(bisect)))
    r = subprocess.run(["systemd-analyze", "verify", *sorted(map(str, tmp_path.iterdir()))],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", r.stderr
