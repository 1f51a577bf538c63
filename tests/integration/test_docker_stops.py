"""Docker runs stopped from outside (kill -9 of the controller, Ctrl-C while a build or an
oracle container runs) and the PyTorch recipe's build in a container: the longest Docker
tests, in their own file so that a second pytest worker runs them beside ``test_docker.py``
(the images are built once, tests/docker_world.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import zipfile
from pathlib import Path

import git
import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.artifacts.docker_build import DockerBuilder, repository_id
from bisector.infra.containers import client
from tests import minitorch
from tests.docker_world import ORACLES, hist, images, ours, scope, wait_for
from tests.support import BISECT, ROOT, run_cli

__all__ = ["hist", "images", "scope"]  # fixtures, used by name


def test_kill_9_leaves_an_orphan_that_resume_sweeps(home: Path, images: None,
                                                    hist: SyntheticHistory) -> None:
    db = home / "k.db"
    proc = subprocess.Popen(
        [*BISECT, "--db", str(db), "start", "--repo", str(hist.path), "--good", "v0.1.0",
         "--bad", "v0.2.0", "--oracle", str(ORACLES / "slow_norm.py"), "--executor",
         "docker", "--memory", "1g"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    oracle_running: list[object] = []
    while time.time() < deadline and not oracle_running:
        oracle_running = [c for c in ours()
                          if getattr(c, "labels", {}).get("bisector.role") == "oracle"]
        time.sleep(0.1)
    assert oracle_running, "an oracle container was seen running"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ours(), "the killed controller's container is left behind"
    r = run_cli("--db", str(db), "resume", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert "left by a controller that is gone" in r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit
    assert ours() == []


@pytest.mark.parametrize("role", ["build", "oracle"])
def test_ctrl_c_removes_the_running_container(home: Path, images: None, hist: SyntheticHistory,
                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              role: str) -> None:
    """Interrupted while a build or an oracle container runs: it is removed, exit 130, and
    resume finishes with the same culprit."""
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(tmp_path / "cache"))  # nothing built yet
    db = home / "c.db"
    proc = subprocess.Popen(
        [*BISECT, "--db", str(db), "start", "--repo", str(hist.path), "--good", "v0.1.0",
         "--bad", "v0.2.0", "--oracle", str(ORACLES / "slow_norm.py"), "--executor",
         "docker", "--memory", "1g"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert wait_for(role), f"a {role} container was seen running"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "resume 1" in stderr
    assert ours() == [], "the interrupted container is removed"
    r = run_cli("--db", str(db), "resume", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit


def test_pytorch_recipe_builds_submodules_per_commit(home: Path, images: None,
                                                     tmp_path: Path) -> None:
    mt = minitorch.make(tmp_path / "mt")  # a new root commit each time: its own volume
    oracle = tmp_path / "mini_value.py"
    oracle.write_text(minitorch.ORACLE)
    volume = DockerBuilder(repository_id(git.Repo(mt.path))).volume
    try:
        _bisect_minitorch(mt, oracle, home)
    finally:
        with contextlib.suppress(Exception):
            client().volumes.get(volume).remove(force=True)


def _bisect_minitorch(mt: minitorch.MiniTorch, oracle: Path, home: Path) -> None:
    r = run_cli("start", "--repo", str(mt.path), "--good", "v0.1", "--bad", "main",
                "--oracle", str(oracle), "--profile", "pytorch", "--no-prebuilt",
                "--build-in", "docker", "--cuda-arch", "9.0", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == mt.culprit, "the submodule bump is found"
    built = [p["build"] for p in d["probes"] if p.get("build")]
    assert built and all(b["where"] == "docker" and b["status"] == "ok" for b in built)
    assert "ccache" in r.stderr
    wheels = list(Path(os.environ["BISECTOR_CACHE_DIR"]).glob("wheels/*/*/torch-*.whl"))
    wanted = f"torch-2.0.0a0+git{mt.culprit[:7]}"
    with zipfile.ZipFile(next(w for w in wheels if w.name.startswith(wanted))) as z:
        env = json.loads(z.read("torch/build_env.json"))
    assert env["USE_CUDA"] == "1" and env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert env["USE_DISTRIBUTED"] == "0" and env["BUILD_TEST"] == "0"
    assert env["USE_CCACHE"] == "1" and int(env["MAX_JOBS"]) >= 1
    assert ours() == []


