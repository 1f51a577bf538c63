"""`bisect du` and `bisect gc` on real files and a real SQLite store: sizes by kind, least
recently used first, what unfinished bisections need kept, dry runs, the cap after a run."""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import update

from bisector.app import bisections as app_bisections
from bisector.app import disk
from bisector.app import gc as cleanup
from bisector.app.report import views
from bisector.artifacts.cache import wheel_dir
from bisector.artifacts.obtained import Recipe
from bisector.artifacts.provider import Provider
from bisector.base.errors import UsageError
from bisector.base.events import QuietEvents
from bisector.base.kinds import ArtifactKind, ArtifactStatus, State, Way
from bisector.base.paths import cache_dir, logs_dir
from bisector.executors.base import env_name
from bisector.infra.owner import owner_id
from bisector.project.profiles import TORCHLET
from bisector.store import bisections
from bisector.store import models as m
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store
from bisector.store.records import NewArtifact
from tests.unit.fakes import ORACLE, new_bisection, shas

DAY = 86400.0
NOW = time.time()


@pytest.fixture(autouse=True)
def private_cache(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never a cache another test (or the user) shares: gc deletes for real here. Ages count
    from this test's start, not the module's import (a full suite takes longer than gc's
    10-minute grace)."""
    global NOW
    NOW = time.time()
    monkeypatch.delenv("BISECTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("BISECTOR_MAX_CACHE", raising=False)


def put(path: Path, size: int, days_ago: float) -> Path:
    """A file of ``size`` bytes last used ``days_ago``; its folders get the same times."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return age(path, days_ago)


def age(path: Path, days_ago: float) -> Path:
    t = NOW - days_ago * DAY
    for root, dirs, files in os.walk(path, topdown=False) if path.is_dir() else []:
        for name in [*files, *dirs]:
            os.utime(os.path.join(root, name), (t, t), follow_symlinks=False)
    os.utime(path, (t, t))
    if path.is_file():
        os.utime(path.parent, (t, t))
    return path


def wheel(store: Store, sha: str, key: str, size: int, days_ago: float,
          kind: ArtifactKind = ArtifactKind.SOURCE, **settings: object) -> Path:
    """A wheel in the cache with its artifact row, the row as old as the file."""
    f = put(wheel_dir(key) / f"torchlet-{key[:6]}.whl", size, days_ago)
    put(wheel_dir(key) / "SHA256SUMS", 10, days_ago)
    ArtifactStore(store).save(NewArtifact(key, sha, kind, ArtifactStatus.OK, dict(settings),
                                          path=str(f), size=size))
    when = datetime.fromtimestamp(NOW - days_ago * DAY, UTC)
    with store.session() as s:
        s.execute(update(m.Artifact).where(m.Artifact.key == key).values(created_at=when))
    return wheel_dir(key)


def by_kind(items: list[disk.Item]) -> dict[str, disk.Usage]:
    return {u.kind: u for u in disk.usage(items)}


@pytest.mark.parametrize("text,expected", [
    ("50G", 50 * 2**30), ("500M", 500 * 2**20), ("1.5T", int(1.5 * 2**40)), ("1024", 1024),
    ("10k", 10 * 2**10), ("50GB", 50 * 2**30), ("50GiB", 50 * 2**30)])
def test_sizes_parse(text: str, expected: int) -> None:
    assert disk.parse_size(text) == expected


@pytest.mark.parametrize("text,expected", [("30d", 30 * DAY), ("12h", 12 * 3600.0),
                                           ("90m", 5400.0), ("2w", 14 * DAY)])
def test_ages_parse(text: str, expected: float) -> None:
    assert disk.parse_age(text) == expected


@pytest.mark.parametrize("text", ["", "G", "50X", "-5G", "fifty"])
def test_a_bad_size_is_one_line_naming_the_option_and_an_example(text: str) -> None:
    with pytest.raises(UsageError) as e:
        disk.parse_size(text)
    assert "--max-size" in e.value.message and "e.g. --max-size 50G" in e.value.message
    assert "\n" not in e.value.message


@pytest.mark.parametrize("text", ["30", "30 days", "d", "1y"])
def test_a_bad_age_is_one_line_naming_the_option_and_an_example(text: str) -> None:
    with pytest.raises(UsageError) as e:
        disk.parse_age(text)
    assert "--older-than" in e.value.message and "e.g. --older-than 30d" in e.value.message


def test_du_counts_every_kind_and_a_hardlinked_file_once(store: Store) -> None:
    c = cache_dir()
    wheel(store, "a" * 40, "k1" + "0" * 62, 1000, 3)
    put(wheel_dir("k2" + "0" * 62) / "overlay.json", 50, 2)
    shared = put(c / "uv" / "archive-v0" / "torchlet" / "core.so", 4000, 1)
    env = c / "envs" / "e"
    (env / "lib").mkdir(parents=True)
    os.link(shared, env / "lib" / "core.so")  # uv hardlinks its cache into environments
    put(env / ".bisector-ready", 3, 1)
    put(c / "oracles" / "abcd" / "o.py", 20, 5)
    put(c / "ccache" / "x", 700, 1)
    put(logs_dir() / "runs" / "aaaaaaaaaaaa-1234" / "stdout.txt", 30, 9)
    put(logs_dir() / "builds" / "k1.log", 40, 9)
    kinds = by_kind(disk.inventory())
    assert kinds["wheels"].bytes == 1010 and kinds["wheels"].items == 1
    assert kinds["overlays"].bytes == 50
    assert kinds["uv"].bytes == 4000
    assert kinds["envs"].bytes == 3  # the linked torch counted once, under uv's cache
    assert kinds["oracles"].bytes == 20 and kinds["ccache"].bytes == 700
    assert kinds["logs"].bytes == 70 and kinds["logs"].items == 2
    data = disk.du(store)
    assert data["total_bytes"] == sum(u.bytes for u in kinds.values())
    assert [k["kind"] for k in data["kinds"]] == [k for k in disk.KINDS if k in kinds]
    logs = next(k for k in data["kinds"] if k["kind"] == "logs")
    assert logs["oldest_use"][:10] == disk.iso(NOW - 9 * DAY)[:10]  # type: ignore[index]


def test_the_stores_record_of_use_counts_as_a_use(store: Store) -> None:
    w = wheel(store, "a" * 40, "k1" + "0" * 62, 100, 40)
    art = ArtifactStore(store).get("k1" + "0" * 62)
    assert art is not None
    bisections.save_oracle(store, ORACLE.sha256, ORACLE.name, ORACLE.content.decode(), {})
    with store.session() as s:  # an oracle ran on it yesterday
        s.add(m.RunRow(commit_sha="a" * 40, oracle_sha256=ORACLE.sha256, env_fingerprint="f",
                           outcome="pass", started_at=datetime.now(UTC), artifact_id=art.id,
                           finished_at=datetime.fromtimestamp(NOW - DAY, UTC)))
    p = cleanup.collect(store, max_size=None, older_than_s=30 * DAY, dry_run=False)
    assert p.remove == [] and w.exists()


def test_older_than_removes_what_was_last_used_before_logs_included(store: Store) -> None:
    old = wheel(store, "a" * 40, "k1" + "0" * 62, 100, 40)
    new = wheel(store, "b" * 40, "k2" + "0" * 62, 100, 2)
    old_env = put(cache_dir() / "envs" / "old" / ".bisector-ready", 5, 60).parent
    run = put(logs_dir() / "runs" / ("c" * 12 + "-1") / "stdout.txt", 5, 45).parent
    report = put(views.report_paths(store, 1)[0], 5, 90)
    p = cleanup.collect(store, max_size=None, older_than_s=30 * DAY, dry_run=False)
    assert {i.path for i in p.remove} == {old, old_env, run}
    assert [i.path for i in p.remove] == [old_env, run, old]  # least recently used first
    assert not old.exists() and not old_env.exists() and not run.exists()
    assert new.exists() and report.exists()  # reports are results, never a cache
    assert p.freed == 110 + 5 + 5
    ledger = (cache_dir().parent / "data" / disk.LEDGER).read_text()
    assert str(run) in ledger and '"kind": "logs"' in ledger


def test_max_size_removes_least_recently_used_first_and_never_logs(store: Store) -> None:
    w = {d: wheel(store, f"{d:040x}", f"{d:02d}" + "0" * 62, 1000, d) for d in (1, 5, 9, 3)}
    log = put(logs_dir() / "runs" / ("c" * 12 + "-1") / "stdout.txt", 10_000, 100).parent
    p = cleanup.collect(store, max_size=2100, older_than_s=None, dry_run=False)
    assert [i.path for i in p.remove] == [w[9], w[5]]  # the two oldest fit it under 2100
    assert w[1].exists() and w[3].exists() and log.exists()
    assert p.managed_after == 2020 and not p.over_cap


def test_dry_run_removes_nothing_and_says_what_would_go(store: Store) -> None:
    w = wheel(store, "a" * 40, "k1" + "0" * 62, 100, 40)
    p = cleanup.collect(store, max_size=0, older_than_s=30 * DAY, dry_run=True)
    assert [i.path for i in p.remove] == [w] and p.freed == 110 and w.exists()
    assert p.as_dict()["dry_run"] is True
    assert any(line.startswith("would remove wheels") for line in cleanup.describe(p))
    assert not (cache_dir().parent / "data" / disk.LEDGER).exists()


def test_what_an_unfinished_bisection_needs_survives(store: Store) -> None:
    cands = shas(4)
    bid = new_bisection(store, cands)
    with store.session() as s:  # the Python tag its environments were made for
        s.execute(update(m.Bisection).where(m.Bisection.id == bid).values(
            environment={"executor": {"executor": "local", "python": "cp311"}}))
    base = wheel(store, "e" * 40, "ba" + "0" * 62, 100, 50, ArtifactKind.PREBUILT)
    mine = wheel(store, cands[1], "k1" + "0" * 62, 100, 50)
    overlay = wheel(store, cands[2], "ov" + "0" * 62, 10, 50, ArtifactKind.OVERLAY,
                    base_key="ba" + "0" * 62)
    other = wheel(store, "f" * 40, "k9" + "0" * 62, 100, 50)
    env = put(cache_dir() / "envs" / env_name("k1" + "0" * 62, (), "cp311") / "x", 5, 50).parent
    other_env = put(cache_dir() / "envs" / "unrelated" / "x", 5, 50).parent
    run = put(logs_dir() / "runs" / (cands[1][:12] + "-abcd") / "stdout.txt", 5, 50).parent
    uv = put(cache_dir() / "uv" / "a", 5, 50).parent
    tree = put(cache_dir() / "trees" / cands[2] / "setup.py", 5, 50).parent
    other_tree = put(cache_dir() / "trees" / ("f" * 40) / "setup.py", 5, 50).parent
    kept = {base, mine, overlay, env, run, tree}

    p = cleanup.collect(store, max_size=0, older_than_s=DAY, dry_run=False)
    assert {i.path for i in p.remove} == {other, other_env, other_tree}
    assert all(k.exists() for k in kept) and uv.exists()  # running: its installs read uv's
    assert p.over_cap and f"bisection {bid} is running" in " ".join(p.kept())

    bisections.release(store, bid, me=owner_id(), state=State.INTERRUPTED)
    p = cleanup.collect(store, max_size=0, older_than_s=DAY, dry_run=False)
    assert [i.path for i in p.remove] == [uv]  # interrupted: it needs its range, not uv's
    assert all(k.exists() for k in kept)

    bisections.take(store, bid, me=owner_id(), seen=None)
    bisections.finish(store, bid, me=owner_id(), state=State.DONE, result={},
                      culprit_sha=None, message=None)
    p = cleanup.collect(store, max_size=0, older_than_s=DAY, dry_run=False)
    assert {i.path for i in p.remove} == kept and not any(k.exists() for k in kept)


def test_something_used_minutes_ago_is_kept_whatever_the_limits(store: Store) -> None:
    fresh = wheel(store, "a" * 40, "k1" + "0" * 62, 100, 0)
    p = cleanup.collect(store, max_size=0, older_than_s=1.0, dry_run=False)
    assert p.remove == [] and fresh.exists() and p.over_cap


def test_a_removed_wheel_is_not_cached_for_the_provider(store: Store) -> None:
    cands = shas(3)
    recipe = Recipe(TORCHLET, sys.executable)
    provider = Provider(ArtifactStore(store), lambda: None, cands, recipe)  # type: ignore[arg-type,return-value]
    key = recipe.source_key(cands[1])
    wheel(store, cands[1], key, 100, 40)
    assert provider.kind(1) is Way.CACHED
    cleanup.collect(store, max_size=None, older_than_s=30 * DAY, dry_run=False)
    fresh = Provider(ArtifactStore(store), lambda: None, cands, recipe)  # type: ignore[arg-type,return-value]
    assert fresh.kind(1) is Way.BUILD and fresh.shared.keep.get(key) is None
    row = ArtifactStore(store).get(key)
    assert row is not None and row.path  # the row stays: history of which probe ran on what


def test_show_says_a_log_was_removed_by_gc(store: Store) -> None:
    run = put(logs_dir() / "runs" / ("c" * 12 + "-1") / "stdout.txt", 5, 45).parent
    kept = put(logs_dir() / "runs" / ("d" * 12 + "-1") / "stdout.txt", 5, 1).parent
    data = {"notes": [], "probes": [
        {"stdout": str(run / "stdout.txt"), "stderr": str(run / "stderr.txt")},
        {"stdout": str(kept / "stdout.txt"), "stderr": None},
        {"stdout": "/elsewhere/stdout.txt"}]}
    assert disk.mark_removed_logs(data)["notes"] == []  # nothing removed yet: unchanged
    cleanup.collect(store, max_size=None, older_than_s=30 * DAY, dry_run=False)
    out = disk.mark_removed_logs(data)
    assert out["probes"][0]["removed_logs"] == ["stdout", "stderr"]
    assert "removed_logs" not in out["probes"][1] and "removed_logs" not in out["probes"][2]
    assert "log removed by gc" in out["notes"][0]


def test_the_cap_after_a_bisection_removes_lru_and_never_raises(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    notes: list[str] = []

    class Events(QuietEvents):
        def note(self, text: str) -> None:
            notes.append(text)

    old = wheel(store, "a" * 40, "k1" + "0" * 62, 1000, 40)
    new = wheel(store, "b" * 40, "k2" + "0" * 62, 1000, 2)
    app_bisections.apply_cache_cap(store, Events())
    assert notes == [] and old.exists()  # no cap configured: nothing happens
    monkeypatch.setenv("BISECTOR_MAX_CACHE", "lots")
    app_bisections.apply_cache_cap(store, Events())
    assert "BISECTOR_MAX_CACHE 'lots' is not a size" in notes[-1] and old.exists()
    monkeypatch.setenv("BISECTOR_MAX_CACHE", "1500")
    app_bisections.apply_cache_cap(store, Events())
    assert not old.exists() and new.exists() and "removed 1 least recently used" in notes[-1]

    def broken(_store: Store) -> str | None:
        raise OSError("disk on fire")

    monkeypatch.setattr(cleanup, "after_bisection", broken)
    app_bisections.apply_cache_cap(store, Events())
    assert notes[-1].startswith("warning: the cache cap was not applied (OSError")


def test_a_failed_builds_log_stays_while_its_row_says_the_commit_does_not_build(
        store: Store) -> None:
    failed_key, ok_key = "f1" + "0" * 62, "k1" + "0" * 62
    failed_log = put(logs_dir() / "builds" / f"{failed_key}.log", 50, 60)
    ok_log = put(logs_dir() / "builds" / f"{ok_key}.log", 50, 60)
    ArtifactStore(store).save(NewArtifact(failed_key, "a" * 40, ArtifactKind.SOURCE,
                                          ArtifactStatus.FAILED, {}, log_path=str(failed_log),
                                          log_tail="x.c:1: error: no"))
    wheel(store, "b" * 40, ok_key, 100, 60)
    p = cleanup.collect(store, max_size=None, older_than_s=30 * DAY, dry_run=False)
    assert failed_log.exists() and not ok_log.exists()
    assert any("a build that failed" in reason for reason in p.kept())
