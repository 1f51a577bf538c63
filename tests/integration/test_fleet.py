"""A team's fleet with no shared disk (issue 33's target): a coordinator, two probe workers and
a build worker, each a box of its own (``tests/fleet_world.py``: a mount namespace hiding every
other box's folders), sharing only a real PostgreSQL store, a real S3 bucket (SeaweedFS) and
the repository's URL (a real ``git daemon``). The figures are printed on a ``FLEET-FIGURES``
line (``pytest -s`` shows them)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text

from bisector.app.demo.torchlet import generate
from bisector.store import workers
from bisector.store.db import open_store
from tests import fleet_world, s3_world
from tests.integration.test_workers import FAST, _wait

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

WHY_NOT = fleet_world.isolation()
needs_namespaces = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))
BUILT = re.compile(r"\bbuilding ([0-9a-f]{12}) from source")  # a worker's log line


def _built(log: str) -> list[str]:
    return BUILT.findall(log)


def _wrapper(box: fleet_world.Box, real: str) -> str:
    """A Python of this box at a path of its own (a wrapper of the one bisector runs on)."""
    path = box.root / "bin" / "python3"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    path.chmod(0o755)
    return str(path)


@needs_namespaces
def test_a_fleet_with_no_shared_disk_builds_each_commit_once(pg_url: str,
                                                               tmp_path: Path) -> None:
    import sys

    hist = generate(tmp_path / "origin" / "t", commits=40, culprit=27, broken=(), seed=33040,
                    release_at=None, side_branch_at=None, c_churn=(8, 16, 24, 32))
    server = s3_world.start()
    try:
        bucket = s3_world.bucket(server, f"fleet{int(time.time()) % 10**6}")
        env = {**FAST, "BISECTOR_WORKER_STALE_S": "30", **server.env(),
               "BISECTOR_ARTIFACTS": bucket}
        with fleet_world.git_server(hist.path, tmp_path / "served") as url:
            names = ("coord", "w1", "w2", "builder", "fresh", "cut")
            box = fleet_world.boxes(tmp_path / "boxes", names, env,
                                    also_hidden=[tmp_path / "origin", tmp_path / "served"])
            try:
                _run_fleet(box, hist, url, pg_url, sys.executable, server)
            finally:
                for b in box.values():
                    b.stop()
    finally:
        s3_world.stop(server)


def _clone(box: fleet_world.Box, url: str) -> Path:
    repo = box.root / "repo"
    subprocess.run(["git", "clone", "-q", url, str(repo)], check=True)
    return repo


def _start(box: fleet_world.Box, repo: Path, hist: object, pg_url: str,
           *extra: str) -> subprocess.CompletedProcess[str]:
    good, bad = hist.main[0], hist.main[-1]  # type: ignore[attr-defined]
    return box.run("--db", pg_url, "start", "--repo", str(repo), "--good", good, "--bad", bad,
                   "--oracle", "torchlet_norm", "--no-confirm", "--json", *extra)


def _run_fleet(box: dict[str, fleet_world.Box], hist: object, url: str, pg_url: str,
               python: str, server: s3_world.S3Server) -> None:
    culprit = hist.culprit  # type: ignore[attr-defined]
    # The workers: no clone, no Python at the coordinator's path; w1's Python is elsewhere.
    w1_python = _wrapper(box["w1"], python)
    box["w1"].start("--db", pg_url, "worker", "--gpu", "0", "--name", "w1",
                    "--python", w1_python)
    box["w2"].start("--db", pg_url, "worker", "--gpu", "1", "--name", "w2")
    box["builder"].start("--db", pg_url, "worker", "--queue", "build", "--name", "builder")
    store = open_store(pg_url)
    _wait("three workers", lambda: len(workers.live(store)) == 3)
    offers = {w.name: w.offer for w in workers.live(store)}
    assert offers["w1"] and offers["w1"]["pythons"]["cp311"] == w1_python, offers

    t0 = time.monotonic()
    coord_repo = _clone(box["coord"], url)
    first = _start(box["coord"], coord_repo, hist, pg_url, "--python",
                   _wrapper(box["coord"], python))
    wall_1 = time.monotonic() - t0
    assert box["coord"].sees(coord_repo / ".git")
    assert not box["w1"].sees(coord_repo / ".git") and not box["builder"].sees(coord_repo)
    logs = {n: box[n].text() for n in ("w1", "w2", "builder", "coord")}
    said = "\n".join(f"--- {n}\n{t[-4000:]}" for n, t in logs.items()) + first.stderr[-3000:]
    assert first.returncode == 0, said
    d = json.loads(first.stdout)
    assert d["culprit"]["sha"] == culprit, said
    assert "live worker(s) offer this bisection's environment" in first.stderr, said
    built = Counter(m for t in logs.values() for m in _built(t))
    # Every commit that needed a build was built once in the whole fleet, on the build box.
    assert built and set(built.values()) == {1}, (built, said)
    assert set(_built(logs["builder"])) == set(built), said
    how = Counter(p["obtained"] for p in d["probes"])
    assert "build" not in how and how["bucket"] >= len(built), (how, said)
    ran = {p["sha"] for p in d["probes"]}
    with store.engine.connect() as c:
        where = dict(c.execute(text("SELECT worker, count(*) FROM probe_task "
                                    "GROUP BY worker")).all())
    assert set(where) <= {"w1", "w2"} and sum(where.values()) == len(ran), where
    # Each probed with its own Python (the coordinator's path is hidden from it), from its own
    # mirror of the URL (the coordinator's clone is hidden too).
    for name, own in (("w1", w1_python), ("w2", python)):
        if where.get(name):
            assert f"probing with this box's Python {own} (cp311)" in logs[name], said
            assert list((box[name].root / "cache" / "mirrors").glob("*/HEAD")), said
    listed = box["coord"].run("--db", pg_url, "workers")
    assert "hit rate" in listed.stdout and "cp311" in listed.stdout, listed.stdout
    fleet = json.loads(box["coord"].run("--db", pg_url, "workers", "--json").stdout)["fleet"]
    assert fleet["obtained"] == dict(how), fleet  # the workers ran every probe

    # A second bisection of the range from a fresh box, probing itself (its verdicts keyed
    # apart by --env): no build, every package downloaded.
    t0 = time.monotonic()
    second = _start(box["fresh"], _clone(box["fresh"], url), hist, pg_url, "--no-enqueue",
                    "--env", "ROUND=2")
    wall_2 = time.monotonic() - t0
    assert second.returncode == 0, second.stderr
    d2 = json.loads(second.stdout)
    assert d2["culprit"]["sha"] == culprit
    how2 = Counter(p["obtained"] for p in d2["probes"])
    assert "build" not in how2, (how2, second.stderr)
    assert how2["bucket"] >= 1 and "sha256 checked" in second.stderr, second.stderr

    # A third from another fresh box, the object store killed halfway: still right.
    cut = box["cut"]
    with store.engine.connect() as c:
        before = int(c.execute(text("SELECT max(id) FROM bisection")).scalar() or 0)
    slow = cut.root / "slow_norm.py"  # a second a run: time to kill the store halfway
    slow.write_text("import sys, time\nimport torchlet\ntime.sleep(1)\n"
                    "sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)\n")
    p = cut.start("--db", pg_url, "start", "--repo", str(_clone(cut, url)),
                  "--good", hist.main[0], "--bad", hist.main[-1],  # type: ignore[attr-defined]
                  "--oracle", str(slow), "--no-confirm", "--json", "--no-enqueue",
                  capture=True)

    def probed() -> int:
        with store.engine.connect() as c:
            return int(c.execute(text("SELECT count(*) FROM probe WHERE bisection_id > :b"),
                                 {"b": before}).scalar() or 0)

    _wait("its first probe", lambda: probed() >= 1 or p.poll() is not None, timeout=600)
    killed_at = probed()
    s3_world.stop(server, remove=False)
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err[-4000:]
    d3 = json.loads(out)
    assert d3["culprit"]["sha"] == culprit, err[-4000:]
    how3 = Counter(q["obtained"] for q in d3["probes"])
    assert killed_at < len(d3["probes"]), (killed_at, how3)
    # What it could not download after the kill, it built; the dead store said so once.
    assert how3["build"] >= 1 and err.count("the object store s3://") == 1, err
    print(f"FLEET-FIGURES commits=40 probes={len(d['probes'])} built={dict(built)} "
          f"obtained={dict(how)} hit_rate={fleet['hit_rate']:.0%} wall_1={wall_1:.0f}s | "
          f"fresh box: obtained={dict(how2)} "
          f"wall_2={wall_2:.0f}s | store killed after {killed_at} of {len(d3['probes'])} "
          f"probes: obtained={dict(how3)}")


@needs_namespaces
def test_probes_go_only_to_workers_of_the_bisections_gpu_model(pg_url: str,
                                                                tmp_path: Path) -> None:
    """Two GPU models never mix in one search: the bisection started on an H200 box is probed
    by the H200 worker only; one started on a model no worker has is probed in-process."""
    hist = generate(tmp_path / "origin" / "t", commits=12, culprit=7, broken=(), seed=33041,
                    release_at=None, side_branch_at=None)
    box = fleet_world.boxes(tmp_path / "boxes", ("h100", "h200", "coord", "a100", "laptop"),
                            {**FAST, "BISECTOR_WORKER_STALE_S": "30"},
                            also_hidden=[tmp_path / "served"])
    for name, model in (("h100", "NVIDIA H100 80GB HBM3"), ("h200", "NVIDIA H200"),
                        ("coord", "NVIDIA H200"), ("a100", "NVIDIA A100-SXM4-80GB")):
        smi = fleet_world.fake_gpu(box[name].root / "driver", model)
        box[name].env["PATH"] = f"{smi}:{box[name].env['PATH']}"
    try:
        with fleet_world.git_server(hist.path, tmp_path / "served") as url:
            for name in ("h100", "h200"):
                box[name].start("--db", pg_url, "worker", "--gpu", "0", "--name", name)
            store = open_store(pg_url)
            _wait("two workers", lambda: len(workers.live(store)) == 2)
            listed = box["coord"].run("--db", pg_url, "workers", "--json")
            offers = {w["name"]: w["offers"] for w in json.loads(listed.stdout)["workers"]}
            assert offers["h200"].startswith("NVIDIA H200; cp311") and \
                "CUDA 12 and older" in offers["h200"], offers
            done = _start(box["coord"], _clone(box["coord"], url), hist, pg_url)
            assert done.returncode == 0, done.stderr + box["h100"].text() + box["h200"].text()
            assert json.loads(done.stdout)["culprit"]["sha"] == hist.culprit
            assert "1 live worker(s) offer this bisection's environment (NVIDIA H200, cp311, " \
                   "cpu)" in done.stderr, done.stderr
            with store.engine.connect() as c:
                where = dict(c.execute(text("SELECT worker, count(*) FROM probe_task "
                                            "GROUP BY worker")).all())
            assert set(where) == {"h200"}, where
            assert "probing" not in box["h100"].text()

            other = _start(box["a100"], _clone(box["a100"], url), hist, pg_url,
                           "--env", "BOX=a100")
            assert other.returncode == 0, other.stderr
            assert "2 live worker(s), none offering this bisection's environment (NVIDIA " \
                   "A100-SXM4-80GB, cp311, cpu): probing in this process" in other.stderr, \
                other.stderr

            # A box with no GPU at all: told how to reach the workers, then --gpu-model.
            laptop_repo = _clone(box["laptop"], url)
            alone = _start(box["laptop"], laptop_repo, hist, pg_url, "--env", "BOX=laptop")
            assert alone.returncode == 0, alone.stderr
            assert "give --gpu-model as `bisect workers` shows it" in alone.stderr, alone.stderr
            sent = _start(box["laptop"], laptop_repo, hist, pg_url, "--env", "BOX=laptop2",
                          "--gpu-model", "NVIDIA H200")
            assert sent.returncode == 0, sent.stderr
            assert "1 live worker(s) offer this bisection's environment (NVIDIA H200" in \
                sent.stderr, sent.stderr
            with store.engine.connect() as c:
                where = dict(c.execute(text("SELECT worker, count(*) FROM probe_task "
                                            "GROUP BY worker")).all())
            assert set(where) == {"h200"}, where
    finally:
        for b in box.values():
            b.stop()
