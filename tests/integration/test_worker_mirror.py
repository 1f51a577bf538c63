"""A worker with no clone of its own: the bisection records its repository's URL, served by a
real ``git daemon`` on 127.0.0.1, and the worker probes from its own bare, partial mirror in
its own cache (never the coordinator's path), on a real PostgreSQL store."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import generate
from bisector.store import workers
from bisector.store.db import open_store
from tests import fleet_world
from tests.fleet_world import grow, plant_replacement
from tests.integration.test_workers import FAST, Fleet, _wait
from tests.support import BISECT, ROOT, one_line_error, run_cli

pytestmark = pytest.mark.integration


def test_a_worker_probes_from_its_own_mirror_of_the_url(pg_url: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in FAST.items():
        monkeypatch.setenv(k, v)
    hist = generate(tmp_path / "coordinator" / "repo", commits=16, culprit=11, broken=(),
                    seed=9191, release_at=None, side_branch_at=None, c_churn=(6,))
    box = tmp_path / "worker-box"
    monkeypatch.setenv("BISECTOR_HOME", str(box))
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(box / "cache"))
    fleet = Fleet(pg_url, tmp_path / "logs")
    with fleet_world.git_server(hist.path, tmp_path / "served") as url:
        try:
            fleet.start(range(1))  # the daemon answers already: git_server waited for it
            store = open_store(pg_url)
            _wait("a live worker", lambda: workers.live(store))
            coord_env = {**os.environ, "BISECTOR_HOME": str(tmp_path / "coordinator"),
                         "BISECTOR_CACHE_DIR": str(tmp_path / "coordinator" / "cache")}
            done = subprocess.run(
                [*BISECT, "--db", pg_url, "start", "--repo", str(hist.path), "--repo-url", url,
                 "--good", hist.main[0], "--bad", hist.main[-1], "--oracle", "torchlet_norm",
                 "--no-confirm", "--json"], cwd=ROOT, env=coord_env, capture_output=True,
                text=True, timeout=600)
            assert done.returncode == 0, done.stderr + fleet.log_tail()
            assert json.loads(done.stdout)["culprit"]["sha"] == hist.culprit
            mirrors = list((box / "cache" / "mirrors").glob("*/HEAD"))
            assert len(mirrors) == 1, fleet.log_tail()
            # Partial: the mirror is a promisor of the URL (blobs come when read).
            cfg = (mirrors[0].parent / "config").read_text()
            assert url in cfg and "promisor = true" in cfg
            probed = "probing" in fleet.log_tail()
            assert probed, fleet.log_tail()
        finally:
            fleet.stop()


def test_a_repo_url_that_could_run_a_program_is_refused(tmp_path: Path) -> None:
    hist = generate(tmp_path / "repo", commits=4, culprit=2, broken=(), seed=5,
                    release_at=None, side_branch_at=None)
    r = run_cli("start", "--repo", str(hist.path), "--repo-url", "ext::sh -c touch% /tmp/x",
                "--good", hist.main[0], "--bad", hist.main[-1], "--oracle", "torchlet_norm",
                env={"BISECTOR_HOME": str(tmp_path / "h")})
    one_line_error(r, "--repo-url", 2)


def test_a_worker_mirror_ignores_replace_refs_the_server_grows(pg_url: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               ) -> None:
    """Hardening M1 end to end: between two bisections the server grows a replace ref that
    serves the culprit's parent's tree under the culprit's sha, and a new commit that makes the
    worker's mirror fetch again. The worker still probes the culprit's own tree."""
    for k, v in FAST.items():
        monkeypatch.setenv(k, v)
    hist = generate(tmp_path / "coordinator" / "repo", commits=14, culprit=9, broken=(),
                    seed=4242, release_at=None, side_branch_at=None)
    box = tmp_path / "worker-box"
    monkeypatch.setenv("BISECTOR_HOME", str(box))
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(box / "cache"))
    coord_env = {**os.environ, "BISECTOR_HOME": str(tmp_path / "coordinator"),
                 "BISECTOR_CACHE_DIR": str(tmp_path / "coordinator" / "cache")}
    fleet = Fleet(pg_url, tmp_path / "logs")
    with fleet_world.git_server(hist.path, tmp_path / "served") as url:
        served = tmp_path / "served" / "t.git"

        def bisect(bad: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*BISECT, "--db", pg_url, "start", "--repo", str(hist.path), "--repo-url", url,
                 "--good", hist.main[0], "--bad", bad, "--oracle", "torchlet_norm",
                 "--no-confirm", "--json"], cwd=ROOT, env=coord_env, capture_output=True,
                text=True, timeout=600)
        try:
            fleet.start(range(1))
            store = open_store(pg_url)
            _wait("a live worker", lambda: workers.live(store))
            first = bisect(hist.main[4])  # the culprit lies beyond: its bad end passes
            assert first.returncode == 7, first.stderr + fleet.log_tail()
            assert list((box / "cache" / "mirrors").glob("*/HEAD")), fleet.log_tail()
            plant_replacement(served, hist.culprit, f"{hist.culprit}^")
            tip = grow(hist.path, "one more commit")
            subprocess.run(["git", "-C", str(hist.path), "push", "-q", str(served), "main"],
                           check=True)
            second = bisect(tip)
            assert second.returncode == 0, second.stderr + fleet.log_tail()
            assert json.loads(second.stdout)["culprit"]["sha"] == hist.culprit
        finally:
            fleet.stop()
