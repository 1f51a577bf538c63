"""Shared fixtures. Everything is real: git repositories made here, real builds, real uv
virtualenvs, real SQLite files and a real PostgreSQL server started for the session."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BISECT = [sys.executable, "-m", "bisector"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers follow the folder, so a test's cost class is where it lives."""
    for item in items:
        parts = Path(str(item.fspath)).parts
        for marker in ("unit", "integration", "gpu", "adversarial"):
            if marker in parts:
                item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture(scope="session")
def shared_cache() -> Path:
    """One wheel/env/uv cache for the whole session: content addressing makes sharing safe."""
    d = Path(tempfile.mkdtemp(prefix="bisector-cache-"))
    return d


@pytest.fixture
def home(tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("BISECTOR_HOME", str(h))
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(shared_cache))
    monkeypatch.delenv("BISECTOR_DB", raising=False)
    return h


def run_cli(
    *args: str, check: bool = False, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([*BISECT, *args], capture_output=True, text=True, timeout=timeout,
                       cwd=ROOT, env=os.environ.copy())
    if check and r.returncode != 0:
        raise AssertionError(f"bisect {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r


def _pg_bin() -> Path:
    for cand in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (cand / "initdb").exists():
            return cand
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise RuntimeError("PostgreSQL server binaries not found: apt-get install postgresql")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on 127.0.0.1; yields a base URL without database name."""
    bindir = _pg_bin()
    data = Path(tempfile.mkdtemp(prefix="bisector-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(data, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data / "db"), "-U", "postgres",
                    "--auth=trust", "-E", "UTF8"], check=True, capture_output=True)
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data / "db"), "-l",
                    str(data / "log"), "-w", "-o",
                    f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data / "db"), "-m",
                        "immediate", "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str) -> str:
    """A fresh, empty database on the session's server for one test."""
    import psycopg

    name = f"t{int(time.time() * 1000) % 10**9}_{os.getpid()}"
    dsn = pg_server.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    return f"{pg_server}/{name}"


def make_unrelated_repo(path: Path) -> Path:
    """A repository whose branches ``main`` and ``other`` share no history."""
    path.mkdir(parents=True)
    git = ["git", "-C", str(path), "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "a"], check=True)
    subprocess.run([*git, "checkout", "-q", "--orphan", "other"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "b"], check=True)
    return path
