"""Shared fixtures. Everything is real: git repositories made here, real builds, real uv
virtualenvs, real SQLite files and a real PostgreSQL server started for the run.

Under pytest-xdist (``make test`` runs ``-n auto --dist loadfile``) every worker is its own
session: what the workers share (the wheel cache, the synthetic world, the PostgreSQL cluster)
is made once, by whichever worker comes first, under a FileLock in the run's common temporary
folder; the controller (or a run without xdist) stops the cluster at the end.

Markers (``--strict-markers``): ``unit``/``integration``/``adversarial``/``gpu`` follow the
folder; ``postgres`` is derived from the PostgreSQL fixtures (or a ``postgresql`` parameter),
``docker`` from the Docker image fixture; ``e2e`` (a whole CLI bisection in a subprocess) is
set by the modules. Docker tests run only with ``--run-docker`` (``make test`` passes it when
``docker info`` works), as cibuildwheel's are opt-in.
"""

from __future__ import annotations

import os

# The test world prepares no probe ahead by default (every bisection's losing sides would be a
# minute of the suite's CPU on two cores); the modules in PREFETCH_ON run with the shipped
# default, and the whole suite passed with it on everywhere before this was set.
os.environ.setdefault("BISECTOR_PREFETCH_PER_SLOT", "0")

import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from filelock import FileLock

from bisector.app.demo.torchlet import SyntheticHistory
from tests import s3_world
from tests.s3_world import S3Server
from tests.support import make_world, private_cache  # noqa: F401  (a fixture for every test)

# Modules whose bisections run with the shipped --prefetch default (2 per probe slot).
PREFETCH_ON = frozenset({"test_prefetch.py", "test_bisect.py", "test_demo_nightlies.py"})


@pytest.fixture(autouse=True)
def _prefetch_where_tested(request: pytest.FixtureRequest,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    if Path(str(request.node.fspath)).name in PREFETCH_ON:
        monkeypatch.setenv("BISECTOR_PREFETCH_PER_SLOT", "2")


FOLDER_MARKERS = ("unit", "integration", "gpu", "adversarial")
DOCKER_FIXTURES = {"images"}
POSTGRES_FIXTURES = {"pg_server", "pg_url"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-docker", action="store_true", default=False,
                     help="run the tests marked docker (they need a Docker engine, and build "
                          "their images from an mmdebstrap base the first time)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers follow the folder, so a test's cost class is where it lives; the services it
    needs follow its fixtures."""
    skip_docker = pytest.mark.skip(reason="a Docker test: opt in with --run-docker "
                                          "(make test does when `docker info` works)")
    for item in items:
        parts = Path(str(item.fspath)).parts
        for marker in FOLDER_MARKERS:
            if marker in parts:
                item.add_marker(getattr(pytest.mark, marker))
        names = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if names & POSTGRES_FIXTURES or {"postgres", "postgresql"} & {
                v for v in params.values() if isinstance(v, str)}:
            item.add_marker(pytest.mark.postgres)
        if names & DOCKER_FIXTURES:
            item.add_marker(pytest.mark.docker)
        if item.get_closest_marker("docker") and not config.getoption("--run-docker"):
            item.add_marker(skip_docker)
    # The longest files first: xdist hands files out in this order (make test passes
    # --no-loadscope-reorder, else xdist reorders them by their number of tests), so the
    # one that builds the Docker images (minutes on a fresh machine) starts at once and no
    # long file is left to end the run alone on one worker while the others are idle.
    items.sort(key=lambda item: LONG_FIRST.get(Path(str(item.fspath)).name, len(LONG_FIRST)))


# Measured with --durations (a whole run's per-file sums, longest first); a file missing here
# only runs later, never not at all.
LONG_FIRST = {name: i for i, name in enumerate((
    "test_docker.py", "test_faults.py", "test_fleet.py", "test_workers.py", "test_watch.py",
    "test_bisect.py", "test_from_report.py", "test_object_store.py", "test_prebuilt.py",
    "test_watch_perf.py", "test_prefetch.py", "test_manual_undo.py", "test_small_projects.py",
    "test_worker_mirror.py", "test_demo_nightlies.py", "test_du_gc.py", "test_watch_order.py",
    "test_tree_repos.py", "test_submodules.py", "test_web.py", "test_web_truth.py",
    "test_confirm_reuse.py", "test_installed_base.py", "test_at_culprit.py",
    "test_plan_measured.py", "test_probe_phases.py", "test_flaky.py", "test_oracle_env_runs.py",
    "test_overlay_truth.py", "test_dist.py",
    # The other half of the Docker tests: it waits for the images the first half builds, so
    # it comes once a worker has had a first file's worth of other work.
    "test_docker_stops.py"))}


# -- what the workers share ------------------------------------------------------------------

def _shared(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> Path:
    """The run's folder common to every xdist worker (a worker's basetemp is a subfolder of
    the controller's); without xdist, this session's own."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if hasattr(config, "workerinput") else base
    shared = root / "shared"
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    return _shared(tmp_path_factory, pytestconfig)


@pytest.fixture(scope="session")
def shared_cache(shared_dir: Path) -> Path:
    """One wheel/env/uv cache for the whole run, every worker: content addressing (and the
    cache's atomic renames) makes sharing safe."""
    with FileLock(str(shared_dir / "cache.lock")):
        d = shared_dir / "cache"
        d.mkdir(exist_ok=True)
    return d


@pytest.fixture(scope="session")
def world(shared_dir: Path) -> SyntheticHistory:
    """The shared synthetic history (tests/support.py's WORLD_SHAPE), generated once a run.
    Read it only; a module that writes into it, or runs git there, takes ``copy_world``."""
    with FileLock(str(shared_dir / "world.lock")):
        return make_world(shared_dir)


@pytest.fixture
def home(tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("BISECTOR_HOME", str(h))
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(shared_cache))
    monkeypatch.delenv("BISECTOR_DB", raising=False)
    return h


# -- PostgreSQL ------------------------------------------------------------------------------

def _pg_bin() -> Path:
    for cand in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (cand / "initdb").exists():
            return cand
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise RuntimeError("PostgreSQL server binaries not found: apt-get install postgresql")


def _as_user() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _pg_start() -> dict[str, str]:
    from tests.support import _free_port

    bindir = _pg_bin()
    data = Path(tempfile.mkdtemp(prefix="bisector-pg-"))  # not under basetemp: 0700, root's
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(data, "postgres")
    port = _free_port()
    subprocess.run([*_as_user(), str(bindir / "initdb"), "-D", str(data / "db"), "-U",
                    "postgres", "--auth=trust", "-E", "UTF8"], check=True, capture_output=True)
    subprocess.run([*_as_user(), str(bindir / "pg_ctl"), "-D", str(data / "db"), "-l",
                    str(data / "log"), "-w", "-o",
                    f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True)
    return {"url": f"postgresql+psycopg://postgres@127.0.0.1:{port}", "data": str(data),
            "bin": str(bindir)}


def _pg_stop(record: Path) -> None:
    if not record.exists():
        return
    info = json.loads(record.read_text())
    subprocess.run([*_as_user(), str(Path(info["bin"]) / "pg_ctl"), "-D",
                    str(Path(info["data"]) / "db"), "-m", "immediate", "stop"],
                   capture_output=True)
    shutil.rmtree(info["data"], ignore_errors=True)
    record.unlink()


@pytest.fixture(scope="session")
def pg_server(shared_dir: Path) -> str:
    """A throwaway PostgreSQL cluster on 127.0.0.1, one for the run (started by the first
    worker that needs it, stopped by pytest_sessionfinish); a base URL without database."""
    record = shared_dir / "pg.json"
    with FileLock(str(shared_dir / "pg.lock")):
        if not record.exists():
            record.write_text(json.dumps(_pg_start()))
        return str(json.loads(record.read_text())["url"])


@pytest.fixture(scope="session")
def s3_server(shared_dir: Path) -> S3Server:
    """A real S3 server (SeaweedFS's ``weed mini``) on 127.0.0.1, one for the run, started by
    the first worker that needs it and stopped by pytest_sessionfinish."""
    record = shared_dir / "s3.json"
    with FileLock(str(shared_dir / "s3.lock")):
        if not record.exists():
            record.write_text(json.dumps(asdict(s3_world.start())))
        return S3Server(**json.loads(record.read_text()))


@pytest.fixture
def s3_bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket of the run's S3 server for one test, and the standard AWS variables
    that reach it; its ``s3://`` URL."""
    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("BISECTOR_ARTIFACTS", raising=False)
    return s3_world.bucket(s3_server, f"t{int(time.time() * 1000) % 10**9}-{os.getpid()}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller (or a run without xdist) stops the run's cluster, after every worker."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        shared = _shared(factory, config)
    except OSError:
        return
    with FileLock(str(shared / "pg.lock")):
        _pg_stop(shared / "pg.json")
    with FileLock(str(shared / "s3.lock")):
        if (shared / "s3.json").exists():
            s3_world.stop(S3Server(**json.loads((shared / "s3.json").read_text())))
            (shared / "s3.json").unlink()


@pytest.fixture
def pg_url(pg_server: str) -> str:
    """A fresh, empty database on the run's server for one test."""
    import psycopg

    name = f"t{int(time.time() * 1000) % 10**9}_{os.getpid()}"
    dsn = pg_server.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    return f"{pg_server}/{name}"
