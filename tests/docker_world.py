"""What the Docker tests share: the images (built once per run, whichever pytest worker asks
first; the others wait on a lock and find them made), a synthetic history per module, the
scope label that keeps each test's containers its own, and the checks on them.

The Docker tests are split over two files (``test_docker.py``, ``test_docker_stops.py``) so
that two pytest workers run them: one file held every minute of Docker work and ended the run.
Test modules import the fixtures by name (``scope`` is autouse there).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.infra.containers import SCOPE, SCOPE_ENV, client, labelled
from tests.support import ROOT

BASE = "bisector/base:bookworm"
ORACLES = ROOT / "tests" / "oracles"


@pytest.fixture(scope="session")
def images(shared_dir: Path) -> Iterator[None]:
    """The base image (mmdebstrap, skipped when it exists) and both production images on it.
    One worker builds; a second one waits on the lock, then finds every layer cached."""
    with (shared_dir / "docker-images.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([str(ROOT / "docker" / "make-base.sh"), BASE], check=True)
        from bisector.app import images as img  # lazy: needs the engine

        # Both at once: a step of the engine's classic builder mostly waits on its storage
        # driver (6 s a step on fuse-overlayfs here), so two builds take the time of one.
        with ThreadPoolExecutor(2) as pool:
            infos = list(pool.map(lambda role: img.build(role, BASE), ("runtime", "builder")))
        assert all(info.id for info in infos)
    yield


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return generate(tmp_path_factory.mktemp("docker-hist") / "repo")


@pytest.fixture(autouse=True)
def scope(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every container this test causes (in this process or a CLI it starts) carries this
    scope label, so the checks never see another bisector's containers on the engine."""
    value = f"test-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv(SCOPE_ENV, value)
    return value


def ours() -> list[object]:
    """This test's containers still on the engine."""
    return labelled(client(), where={SCOPE: os.environ[SCOPE_ENV]})


def wait_for(role: str, timeout_s: float = 300) -> bool:
    """Whether one of this test's containers of ``role`` (build, oracle) was seen running."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if any(getattr(c, "labels", {}).get("bisector.role") == role for c in ours()):
            return True
        time.sleep(0.05)
    return False
