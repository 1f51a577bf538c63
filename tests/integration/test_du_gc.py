"""`bisect du` and `bisect gc` through the real CLI after a real bisection: real builds, uv
environments and logs in a private cache, a real SQLite store."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from bisector.app.demo.torchlet import generate
from bisector.store.db import open_store
from bisector.web import server as web
from tests.support import run_cli

DAY = 86400


def age_tree(root: Path, days: float) -> None:
    t = time.time() - days * DAY
    for dirpath, dirs, files in os.walk(root, topdown=False):
        for name in [*files, *dirs]:
            os.utime(os.path.join(dirpath, name), (t, t), follow_symlinks=False)
    os.utime(root, (t, t))


def sql(db: Path, statement: str, *args: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as con:
        rows = con.execute(statement, args).fetchall()
    con.close()
    return rows


def gc(db: Path, *args: str) -> dict[str, object]:
    r = run_cli("--db", str(db), "gc", "--json", *args)
    assert r.returncode == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def removed(plan: dict[str, object]) -> set[str]:
    return {str(i["path"]) for i in plan["removed"]}  # type: ignore[attr-defined]


def test_du_and_gc_after_a_real_bisection(home: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(cache))  # gc deletes for real: not shared
    monkeypatch.delenv("BISECTOR_MAX_CACHE", raising=False)
    hist = generate(tmp_path / "torchlet", commits=10, culprit=6, broken=(),
                    release_at=None, side_branch_at=None)
    good, bad = hist.main[0], hist.main[-1]

    def bisect(db: Path) -> dict[str, object]:
        r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", good,
                    "--bad", bad, "--oracle", "torchlet_norm", "--no-confirm", "--json",
                    "--prefetch", "0")  # counted per probe: nothing made ahead of need
        assert r.returncode == 0, r.stderr
        out: dict[str, object] = json.loads(r.stdout)
        out["stderr"] = r.stderr
        return out

    db = home / "b.db"
    first = bisect(db)
    kinds = {k["kind"]: k for k in json.loads(run_cli("du", "--json", check=True).stdout)
             ["kinds"]}
    for kind in ("wheels", "envs", "uv", "oracles", "logs", "bytecode"):
        assert kinds[kind]["bytes"] > 0 and kinds[kind]["items"] > 0, kind
    assert "wheels" in run_cli("du", check=True).stdout

    wheels = sorted(p for p in (cache / "wheels").glob("*/*"))
    assert len(wheels) == len(first["probes"])  # type: ignore[arg-type]
    for root in (cache, home / "data" / "logs"):
        age_tree(root, 60)
    sql(db, "UPDATE artifact SET created_at = datetime('now', '-60 days')")
    sql(db, "UPDATE run SET finished_at = datetime('now', '-60 days')")

    # Interrupted: its range's wheels, environments and logs stay; uv's cache may go.
    sql(db, "UPDATE bisection SET state = 'interrupted'")
    plan = gc(db, "--older-than", "30d")
    # The empty virtualenv new ones are copied from (executors/venvs.py) is no bisection's:
    # it may go too, and is made again when needed.
    assert {n for p in removed(plan) if not (n := Path(p).name).startswith("skeleton-")} \
        == {"uv"}
    assert all(w.exists() for w in wheels) and (cache / "envs").exists()
    sql(db, "UPDATE bisection SET state = 'done'")

    # An environment gc removes takes its kept bytecode with it (executors/bytecode.py).
    from bisector.executors.bytecode import mirror

    env = next(e for e in (cache / "envs").iterdir() if not e.name.startswith("skeleton-"))
    assert mirror(env).is_dir()
    from bisector.app import gc as cleanup
    from bisector.app.disk import Item

    assert cleanup._remove(Item("envs", env), [])
    assert not env.exists() and not mirror(env).exists()

    # A dry run lists everything old and removes nothing.
    plan = gc(db, "--older-than", "30d", "--dry-run")
    kinds_listed = {i["kind"] for i in plan["removed"]}  # type: ignore[attr-defined]
    assert {"wheels", "envs", "logs"} <= kinds_listed and plan["freed_bytes"] > 0  # type: ignore[operator]
    assert all(w.exists() for w in wheels)

    # --max-size takes the least recently used first: the one source build (the overlays'
    # base), made the oldest.
    [(key, built_sha)] = sql(db, "SELECT key, commit_sha FROM artifact WHERE kind = 'source'")
    lru = next(w for w in wheels if w.name == key)
    age_tree(lru, 90)
    sql(db, "UPDATE artifact SET created_at = datetime('now', '-90 days') WHERE key = ?", key)
    sql(db, "UPDATE run SET finished_at = datetime('now', '-90 days') WHERE artifact_id = "
            "(SELECT id FROM artifact WHERE key = ?)", key)
    total = gc(db, "--max-size", "1T", "--dry-run")["managed_bytes_before"]
    plan = gc(db, "--max-size", str(int(total) - 1))  # type: ignore[call-overload]
    assert removed(plan) == {str(lru)} and not lru.exists()
    assert all(w.exists() for w in wheels if w != lru)

    # A new store on the same cache: the removed wheel is built again, the others are found.
    second = bisect(home / "c.db")
    built = {p["sha"] for p in second["probes"] if p.get("build")}  # type: ignore[attr-defined]
    assert built == {built_sha}
    assert second["culprit"]["sha"] == first["culprit"]["sha"]  # type: ignore[index]

    # Logs go with --older-than only; `show` still works and says so.
    age_tree(home / "data" / "logs", 60)
    plan = gc(db, "--older-than", "30d")
    assert any(i["kind"] == "logs" for i in plan["removed"])  # type: ignore[attr-defined]
    shown = run_cli("--db", str(db), "show", str(first["id"]), check=True).stdout
    assert "log removed by gc" in shown
    data = json.loads(run_cli("--db", str(db), "show", str(first["id"]), "--json",
                              check=True).stdout)
    probe = next(p for p in data["probes"] if "stdout" in p.get("removed_logs", []))
    store = open_store(str(db), create=False)
    with TestClient(web.create_app(store)) as client:
        page = client.get(f"/bisections/{first['id']}/probes/{probe['seq']}/stdout")
    store.engine.dispose()
    assert page.status_code == 200 and page.text.startswith("(log removed by gc; the stored")

    bad_size = run_cli("--db", str(db), "gc", "--max-size", "lots")
    assert bad_size.returncode == 2
    assert bad_size.stderr.strip() == ("error: --max-size 'lots' is not a size: a number with "
                                       "K, M, G or T, e.g. --max-size 50G")

    # The cap after each bisection: applied, said, and never a failed bisection.
    monkeypatch.setenv("BISECTOR_MAX_CACHE", "1")
    third = bisect(home / "d.db")
    assert third["culprit"]["sha"] == first["culprit"]["sha"]  # type: ignore[index]
    assert "cache cap 1: removed" in str(third["stderr"]).replace("\n", " ")
    assert "still over the cap" in str(third["stderr"]).replace("\n", " ")  # its own, just used
