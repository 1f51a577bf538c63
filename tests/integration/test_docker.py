"""The Docker executor against the real engine, on images built here with no registry.

The base image is a Debian rootfs made by mmdebstrap from this machine's apt sources and
``docker import``-ed (docker/make-base.sh, skipped when the image exists); both production
Dockerfiles are built on it with ``BASE_IMAGE``. No GPU here: ``--gpus`` is not passed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.artifacts.build import build_key, build_wheel, uv_binary
from bisector.artifacts.docker_build import DockerBuilder, repository_id
from bisector.artifacts.installable import Installable
from bisector.base import defaults
from bisector.base.paths import FACTS_SCRIPT
from bisector.core.verdict import Outcome
from bisector.executors.docker import ENV_SCRIPT, DockerExecutor
from bisector.infra import cancel
from bisector.infra.containers import (
    ContainerFailed,
    client,
    run_container,
)
from bisector.oracle.script import load_oracle
from bisector.project.profiles import TORCHLET
from tests.docker_world import ORACLES, hist, images, ours, scope
from tests.support import run_cli

__all__ = ["hist", "images", "scope"]  # fixtures, used by name



def _wheel(hist: SyntheticHistory) -> Installable:
    res = build_wheel(git.Repo(hist.path), hist.main[10], TORCHLET, python=sys.executable)
    assert res.ok and res.wheel
    return Installable(res.key, "source build", wheel=res.wheel)


def test_docker_bisection_finds_the_same_culprit(home: Path, images: None,
                                                 hist: SyntheticHistory) -> None:
    r = run_cli("start", "--repo", str(hist.path), "--good", "v0.1.0", "--bad", "v0.2.0",
                "--oracle", "torchlet_norm", "--executor", "docker", "--memory", "1g",
                "--no-prebuilt", "--json")  # every probe built: the broken build is met
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    ran = [p for p in d["probes"] if p["exit_code"] is not None]
    assert ran and all(p["facts"]["image"]["id"].startswith("sha256:") for p in ran)
    assert d["environment"]["executor"]["image_id"].startswith("sha256:")  # in the fingerprint
    assert "--executor docker" in d["reproduce"]
    built = [p["build"] for p in d["probes"] if p.get("build")]
    assert built and all(b["where"] == "docker" for b in built), "builds ran in the builder"
    broken = [p for p in d["probes"] if p["verdict"] == "skip"]
    assert broken and "error: #error this commit does not build" in broken[0]["reason"]
    assert ours() == [], "every container is removed"


def test_hanging_oracle_is_stopped_as_a_timeout(home: Path, images: None,
                                               hist: SyntheticHistory, tmp_path: Path) -> None:
    ex = DockerExecutor("torchlet", memory="1g", labels={"bisector.bisection": "t"})
    t0 = time.monotonic()
    res = ex.run(inst=_wheel(hist), oracle=load_oracle(str(ORACLES / "hang.py")),
                 commit=hist.main[10], run_dir=tmp_path / "run")
    assert res.outcome is Outcome.TIMEOUT and "timed out" in res.reason and not res.reusable
    assert time.monotonic() - t0 < 60
    assert ours() == []


def test_oom_is_a_skip_with_the_reason(home: Path, images: None, hist: SyntheticHistory,
                                       tmp_path: Path) -> None:
    ex = DockerExecutor("torchlet", memory="256m")
    res = ex.run(inst=_wheel(hist), oracle=load_oracle(str(ORACLES / "oom.py")),
                 commit=hist.main[10], run_dir=tmp_path / "run")
    assert res.outcome is Outcome.SKIP, res
    assert "OOM" in res.reason and "256m" in res.reason
    assert ours() == []


def test_a_failed_start_leaves_no_container(home: Path, images: None) -> None:
    with pytest.raises(ContainerFailed, match="oracle container did not start"):
        run_container(client(), defaults.RUNTIME_IMAGE, ["/no/such/binary"], role="oracle")
    assert ours() == []


def test_stop_all_removes_a_running_container(home: Path, images: None) -> None:
    """Ctrl-C reaches the main thread only: stop_all there removes a worker's container."""
    got: list[BaseException] = []

    def worker() -> None:
        try:
            run_container(client(), defaults.RUNTIME_IMAGE, ["sleep", "600"], role="oracle")
        except BaseException as e:
            got.append(e)

    th = threading.Thread(target=worker)
    th.start()
    try:
        deadline = time.time() + 60
        while not ours() and time.time() < deadline:
            time.sleep(0.05)
        assert ours(), "the container was seen running"
        cancel.stop_all()
        th.join(timeout=30)
    finally:
        cancel.reset()
    assert not th.is_alive() and len(got) == 1 and isinstance(got[0], cancel.Stopped)
    assert ours() == []


def test_a_pinned_probe_gets_that_gpu_only(home: Path) -> None:
    ex = DockerExecutor("torchlet", gpus="all")
    assert [r["DeviceIDs"] for r in ex._devices("3")] == [["3"]]
    assert [r["Count"] for r in ex._devices(None)] == [-1]


@pytest.mark.adversarial
def test_overlay_paths_are_data_never_shell(tmp_path: Path) -> None:
    """Repository file names reach the environment maker as data: a name with ``$(...)`` is
    laid over literally, a path that leaves site-packages is refused. (Runs the fixed program
    on this machine; inside the container it runs the same way.)"""
    ov = tmp_path / "overlay"
    (ov / "files" / "pkg").mkdir(parents=True)
    evil = "pkg/$(touch PWNED).py"
    (ov / "files" / evil).write_text("x = 1\n")

    def make(changed: list[str], name: str) -> subprocess.CompletedProcess[str]:
        (ov / "overlay.json").write_text(json.dumps({"commit": "c", "base_commit": "b",
                                                     "changed": changed, "deleted": []}))
        spec = {"tmp": str(tmp_path / f".tmp-{name}"), "final": str(tmp_path / name),
                "install": [], "overlay": str(ov), "import_name": "",
                "facts": str(FACTS_SCRIPT)}
        env = {**os.environ, "PATH": f"{Path(uv_binary()).parent}:{os.environ['PATH']}",
               "UV_OFFLINE": "1"}
        return subprocess.run([sys.executable, "-c", ENV_SCRIPT, json.dumps(spec)], cwd=tmp_path,
                              env=env, capture_output=True, text=True, check=False)

    r = make([evil], "ok")
    assert r.returncode == 0, r.stderr
    laid = [p.name for p in (tmp_path / "ok").glob("lib/python3*/site-packages/pkg/*")]
    assert laid == ["$(touch PWNED).py"]
    assert not list(tmp_path.rglob("PWNED")), "nothing in the name ran"
    for bad in ("../../../escape.py", "/etc/escape.py", "pkg/./x.py"):
        r = make([bad], "bad")
        assert r.returncode == 1 and "refusing overlay path" in r.stderr, r.stderr
        assert not (tmp_path / "bad").exists() and not list(tmp_path.glob(".tmp-*"))


@pytest.mark.adversarial
def test_env_container_is_unprivileged(home: Path, images: None, hist: SyntheticHistory,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment container never runs as root, and has no network when everything it
    installs is a mounted file (a wheel, an overlay)."""
    import bisector.executors.docker as dx

    seen: list[dict[str, object]] = []
    real = dx.run_container

    def spy(*args: object, **kw: object) -> object:
        if kw.get("role") == "env":
            seen.append(kw)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(dx, "run_container", spy)
    ex = DockerExecutor("torchlet", memory="1g")
    inst = _wheel(hist)  # under a fresh key: an environment made here, not found from before
    name = ex.ensure_env(Installable(uuid.uuid4().hex, inst.obtained, wheel=inst.wheel), ())
    assert seen and seen[0]["network_mode"] == "none"
    user = str(seen[0]["user"])
    assert user and not user.startswith("0:") and user.split(":")[0] != "root"
    made = ex.data / "envs" / name / "bisector-facts.json"
    assert made.stat().st_uid != 0 or os.getuid() != 0


@pytest.fixture
def listener() -> Iterator[tuple[str, int]]:
    cfg = client().networks.get("bridge").attrs["IPAM"]["Config"][0]
    gateway = cfg.get("Gateway") or str(next(ipaddress.ip_network(cfg["Subnet"]).hosts()))
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(8)
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.5)
        while not stop.is_set():
            with contextlib.suppress(OSError):  # the 0.5 s timeout, to see `stop`
                srv.accept()[0].close()

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    yield gateway, srv.getsockname()[1]
    stop.set()
    th.join()
    srv.close()


NET_ORACLE = '''# /// script
# [tool.bisector]
# timeout = 60
# network = {allowed}
# ///
"""Exit 0 when a connection to {host}:{port} fails (isolated), 1 when it connects."""
import socket, sys
try:
    socket.create_connection(("{host}", {port}), timeout=5).close()
except OSError as e:
    print("no connection:", e); sys.exit(0)
print("connected"); sys.exit(1)
'''


def test_network_is_off_unless_the_oracle_allows_it(home: Path, images: None,
                                                    hist: SyntheticHistory, tmp_path: Path,
                                                    listener: tuple[str, int]) -> None:
    host, port = listener
    ex = DockerExecutor("torchlet", memory="1g")
    inst = _wheel(hist)
    results = {}
    for allowed in ("false", "true"):
        path = tmp_path / f"net_{allowed}.py"
        path.write_text(NET_ORACLE.format(allowed=allowed, host=host, port=port))
        results[allowed] = ex.run(inst=inst, oracle=load_oracle(str(path)),
                                  commit=hist.main[10], run_dir=tmp_path / f"run-{allowed}")
    assert results["false"].outcome is Outcome.PASS, results["false"].output_tail
    assert "no connection" in results["false"].output_tail
    # The same probe with network = true connects, so the isolation above is real.
    assert results["true"].outcome is Outcome.FAIL, results["true"].output_tail


@pytest.mark.parametrize(("flags", "message"), [
    (["--executor", "docker", "--image", "bisector/nope:missing"],
     "image bisector/nope:missing does not exist: run `make images`"),
    (["--build-in", "docker", "--builder-image", "bisector/nope:missing"],
     "builder image bisector/nope:missing does not exist: run `make images`"),
], ids=["runtime", "builder"])
def test_missing_image_is_a_clear_error(home: Path, images: None, hist: SyntheticHistory,
                                        flags: list[str], message: str) -> None:
    r = run_cli("start", "--repo", str(hist.path), "--good", "v0.1.0", "--bad", "v0.2.0",
                "--oracle", "torchlet_norm", *flags)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (home / "data" / "bisector.db").exists(), "refused before the store is opened"


# -- source builds in the builder container ------------------------------------------------


def _fresh_builder(repo: git.Repo, **kw: object) -> DockerBuilder:
    b = DockerBuilder(repository_id(repo), **kw)  # type: ignore[arg-type]
    with contextlib.suppress(Exception):  # a volume left by an earlier run of the suite
        client().volumes.get(b.volume).remove(force=True)
    return b


def test_builder_shares_ccache_across_commits(home: Path, images: None,
                                              hist: SyntheticHistory) -> None:
    repo = git.Repo(hist.path)
    same_c = [sha for sha in hist.main[30:60]
              if not repo.git.diff(hist.main[30], sha, "--", "csrc")][:2]
    assert len(same_c) == 2
    b = _fresh_builder(repo, requires=TORCHLET.build_requires)
    first = build_wheel(repo, same_c[0], TORCHLET, python=sys.executable, builder=b)
    second = build_wheel(repo, same_c[1], TORCHLET, python=sys.executable, builder=b)
    assert first.ok and second.ok, first.log_tail + second.log_tail
    assert first.stats["ccache"] == {"hits": 0, "misses": 1}
    assert second.stats["ccache"] == {"hits": 1, "misses": 0}, "the second commit hits"
    assert first.settings["builder"]["image_id"].startswith("sha256:")  # keyed by the image
    assert first.key != build_key(TORCHLET, same_c[0], sys.executable)[0], "host != container"
    with zipfile.ZipFile(second.wheel) as z:  # type: ignore[arg-type]
        assert any(n.startswith("torchlet/_C") for n in z.namelist())
    assert ours() == []
    listed = json.loads(run_cli("images", "--json", check=True).stdout)["ccache_volumes"]
    assert {"name": b.volume, "repository": repository_id(repo)} in [
        {k: v[k] for k in ("name", "repository")} for v in listed]


def test_build_timeout_is_an_infrastructure_error(home: Path, images: None,
                                                  hist: SyntheticHistory) -> None:
    repo = git.Repo(hist.path)
    b = DockerBuilder(repository_id(repo), requires=TORCHLET.build_requires)
    res = build_wheel(repo, hist.main[12], TORCHLET, python=sys.executable, builder=b,
                      timeout_s=0.5)
    assert not res.ok and res.infra and "timed out" in res.infra
    assert "timed out" in res.log_path.read_text()
    assert ours() == [], "the stopped build container is removed"




def test_failed_build_setup_is_an_infrastructure_error(home: Path, images: None,
                                                       hist: SyntheticHistory) -> None:
    """Build requirements that cannot be installed say nothing about the commit."""
    repo = git.Repo(hist.path)
    b = DockerBuilder(repository_id(repo), offline=True,
                      requires=("bisector-no-such-package==9.9",))
    res = build_wheel(repo, hist.main[12], TORCHLET, python=sys.executable, builder=b)
    assert not res.ok
    assert res.infra and res.infra.startswith("the build environment could not be set up")
    assert "bisector-no-such-package" in res.log_path.read_text()
    assert ours() == []
