"""The Docker executor: every probe's oracle runs in its own container of the runtime image.

Isolation is the point: the container sees exactly the probed commit's torch and Triton, the
wheel cache and the oracle read-only, no network unless the oracle asks for it, a memory and a
pid limit, and runs as a non-root user. What happens to it is classified the way a local run is,
with two additions only a container has: an OOM kill (``State.OOMKilled``) and a missing image or
a start failure, all SKIP with the reason, never BAD.

Fast environments: one environment per (artifact, oracle dependencies) lives in a cache folder
bind-mounted at ``/data``, made once by a short-lived container with uv, whose cache sits in the
same folder so installs are hardlinks. Cached artifact -> oracle start then costs one container
start (``make bench`` measures it against ``pip install`` in the same image).

Containers are labelled (``bisector.bisection``, ``bisector.commit``, ``bisector.run``,
``bisector.owner``) and always removed, also on Ctrl-C; a container left behind by a controller
that was killed (``kill -9``) is swept by label at the next start or resume.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import shlex
import time
import uuid
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import requests

from bisector.artifacts.installable import Installable
from bisector.artifacts.overlay import MANIFEST, overlay_summary
from bisector.errors import UsageError
from bisector.executors.base import RunResult, classify
from bisector.executors.local import collect_output
from bisector.oracle import Oracle, Outcome
from bisector.owner import local_pid_alive, owner_id
from bisector.proc import tail
from bisector.settings import cache_dir

# The SDK has no type information (and the repo's own docker/ folder would shadow it for mypy).
docker: Any = importlib.import_module("docker")
DEFAULT_IMAGE = "bisector/runtime:latest"
FACTS_SCRIPT = Path(__file__).resolve().parent.parent / "facts_probe.py"
LABEL = "bisector.owner"
GRACE_S = 10


def client() -> Any:
    try:
        c = docker.from_env()
        c.ping()
        return c
    except docker.errors.DockerException as e:
        raise UsageError(
            f"cannot reach the Docker engine ({e}): start dockerd or use --executor local"
        ) from None


def gpu_requests(gpus: str | None) -> list[Any]:
    """``--gpus all`` or ``--gpus 0,1`` as Docker device requests (NVIDIA container toolkit)."""
    if not gpus:
        return []
    if gpus == "all":
        return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [docker.types.DeviceRequest(device_ids=gpus.split(","), capabilities=[["gpu"]])]


def labelled(c: Any) -> list[Any]:
    """Every container bisector made, on any host's behalf.

    The SDK lists, then inspects each container; one removed in between (a probe finishing
    elsewhere) would raise ``NotFound`` for the whole listing, so those are ignored.
    """
    return list(c.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True))


def sweep_orphans(c: Any, alive: Callable[[str], bool]) -> list[str]:
    """Remove containers of controllers that are gone (killed, crashed); returns their names."""
    swept = []
    for ctr in labelled(c):
        owner = ctr.labels.get(LABEL, "")
        if alive(owner):
            continue
        with contextlib.suppress(docker.errors.NotFound):  # removed meanwhile: also fine
            ctr.remove(force=True)
            swept.append(ctr.name)
    return swept


def image_id(c: Any, name: str) -> str:
    """The image's id (its digest keys verdicts and wheels), "" when it does not exist."""
    try:
        return str(c.images.get(name).id)
    except docker.errors.ImageNotFound:
        return ""


def image_python_tag(c: Any, name: str) -> str:
    """``cp311``: the Python the image runs, which a wheel built or installed there must fit."""
    code = "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"
    out = c.containers.run(
        name, ["python3", "-c", code],
        remove=True, network_mode="none", labels={LABEL: owner_id(), "bisector.role": "setup"})
    return bytes(out).decode().strip()


def wait_or_stop(ctr: Any, timeout_s: float) -> tuple[int | None, bool]:
    """Wait for a started container; past ``timeout_s`` stop it (SIGTERM, SIGKILL after the
    grace period) and, should the engine not answer either, kill it from outside.

    Returns (exit status or None, timed out). Oracles and builds both end this way.
    """
    try:
        return int(ctr.wait(timeout=timeout_s)["StatusCode"]), False
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
        pass
    ctr.stop(timeout=GRACE_S)
    try:
        ctr.wait(timeout=GRACE_S + 30)
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
        ctr.kill()
    return None, True


def host_ca_bundle() -> Path | None:
    """The CA bundle this machine trusts, for containers that fetch packages (a TLS-inspecting
    proxy's certificate is in it; the image's own bundle would refuse that proxy)."""
    import ssl

    for cand in (os.environ.get("SSL_CERT_FILE"), ssl.get_default_verify_paths().cafile,
                 "/etc/ssl/certs/ca-certificates.crt"):
        if cand and Path(cand).is_file():
            return Path(cand).resolve()
    return None


def local_owner_alive(owner: str) -> bool:
    """Another machine's controller is not ours to judge: only a dead local pid is an orphan."""
    return local_pid_alive(owner) is not False


class DockerExecutor:
    name = "docker"

    def __init__(
        self,
        import_name: str | None,
        *,
        image: str = DEFAULT_IMAGE,
        gpus: str | None = None,
        memory: str = "16g",
        pids: int = 4096,
        offline: bool = False,
        labels: dict[str, str] | None = None,
    ) -> None:
        self.import_name = import_name
        self.image_name, self.gpus, self.memory, self.pids = image, gpus, memory, pids
        self.offline = offline
        self.labels = dict(labels or {})
        self.data = cache_dir() / "docker"
        self._ready: set[str] = set()

    @cached_property
    def docker(self) -> Any:
        return client()

    @cached_property
    def image_id(self) -> str:
        return image_id(self.docker, self.image_name)

    @cached_property
    def python_tag(self) -> str:
        return image_python_tag(self.docker, self.image_name) if self.image_id else "unknown"

    def fingerprint_facts(self) -> dict[str, Any]:
        """The image digest keys verdicts: a rebuilt image is a new environment."""
        return {"executor": self.name, "image": self.image_name, "image_id": self.image_id,
                "python": self.python_tag, "gpus": self.gpus or "none"}

    # -- environments ------------------------------------------------------------------------

    def env_name(self, key: str, deps: tuple[str, ...]) -> str:
        blob = json.dumps([key, sorted(deps), self.image_id])
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def _mounts(self, inst: Installable) -> tuple[dict[str, dict[str, str]], list[str]]:
        vols = {str(self.data): {"bind": "/data", "mode": "rw"},
                str(FACTS_SCRIPT): {"bind": "/bisector/facts_probe.py", "mode": "ro"}}
        reqs: list[str] = []
        if inst.wheel is not None:
            vols[str(inst.wheel.parent)] = {"bind": "/wheels", "mode": "ro"}
            reqs.append(f"/wheels/{inst.wheel.name}")
        if inst.overlay is not None:
            vols[str(inst.overlay)] = {"bind": "/overlay", "mode": "ro"}
        return vols, reqs

    def ensure_env(self, inst: Installable, deps: tuple[str, ...]) -> str:
        """Make (once) the environment in /data/envs/NAME; returns NAME."""
        if inst.installed is not None:
            raise UsageError("--installed-base works with the local executor only: the "
                             "container cannot see the host's installed torch")
        name = self.env_name(inst.key, deps)
        final = self.data / "envs" / name
        if name in self._ready or (final / ".bisector-ready").exists():
            self._ready.add(name)
            return name
        (self.data / "envs").mkdir(parents=True, exist_ok=True)
        vols, reqs = self._mounts(inst)
        tmp = f"/data/envs/.tmp-{uuid.uuid4().hex[:8]}"
        py = f"{tmp}/bin/python"
        script = [
            "set -e",
            f"uv venv -q --python python3 {tmp}",
            f"uv pip install -q --python {py} {shlex.join([*reqs, *inst.extra, *deps])}"
            if [*reqs, *inst.extra, *deps] else "true",
        ]
        if inst.overlay is not None:
            manifest = json.loads((inst.overlay / MANIFEST).read_text())
            site = f'$({py} -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])")'
            script.append(f"site={site}")
            for path in manifest["changed"]:
                q = shlex.quote(path)
                script.append(f'mkdir -p "$(dirname "$site/{path}")" && '
                              f'cp /overlay/files/{q} "$site"/{q}')
            for path in manifest["deleted"]:
                script.append(f'rm -f "$site"/{shlex.quote(path)}')
            script.append(f"echo {shlex.quote(json.dumps(manifest))} > {tmp}/overlay.json")
        script += [
            f"{py} /bisector/facts_probe.py {shlex.quote(self.import_name or '')} "
            f"> {tmp}/bisector-facts.json",
            f"touch {tmp}/.bisector-ready",
            f"mv -T {tmp} /data/envs/{name} 2>/dev/null || rm -rf {tmp}",
        ]
        env = {"UV_CACHE_DIR": "/data/uv-cache", "UV_LINK_MODE": "hardlink"}
        if self.offline:
            env["UV_OFFLINE"] = "1"
        log = self.data / "envs" / f"{name}.log"
        code, out = self._run_once(
            ["sh", "-c", "\n".join(script)], vols, env, user=f"{os.getuid()}:{os.getgid()}",
            network=not self.offline, role="env",
        )
        log.write_text(out)
        if code != 0 or not (final / ".bisector-ready").exists():
            raise RuntimeError(f"environment install failed in {self.image_name}: "
                               f"{tail(log, 6)}")
        self._ready.add(name)
        return name

    def _run_once(self, cmd: list[str], vols: dict[str, dict[str, str]], env: dict[str, str],
                  *, user: str, network: bool, role: str) -> tuple[int, str]:
        ctr = self.docker.containers.create(
            self.image_name, cmd, volumes=vols, environment=env, user=user,
            network_mode="bridge" if network else "none", device_requests=gpu_requests(self.gpus),
            labels={**self.labels, LABEL: owner_id(), "bisector.role": role},
            name=f"bisector-{role}-{uuid.uuid4().hex[:10]}",
        )
        try:
            ctr.start()
            code = int(ctr.wait()["StatusCode"])
            return code, bytes(ctr.logs()).decode(errors="replace")
        finally:
            ctr.remove(force=True)

    # -- the oracle --------------------------------------------------------------------------

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path) -> RunResult:
        run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(run_dir, 0o777)  # the oracle runs as the image's non-root user
        out, err = run_dir / "stdout.txt", run_dir / "stderr.txt"
        try:
            name = self.ensure_env(inst, oracle.meta.dependencies)
        except docker.errors.ImageNotFound:
            return self._infra(f"image {self.image_name} is missing: run `make images`")
        except (docker.errors.DockerException, RuntimeError, OSError) as e:
            return self._infra(str(e)[:500])
        facts = json.loads((self.data / "envs" / name / "bisector-facts.json").read_text()
                           or "{}")
        overlay_file = self.data / "envs" / name / "overlay.json"
        if overlay_file.exists():
            facts["overlay"] = overlay_summary(json.loads(overlay_file.read_text()))
        facts["obtained"] = inst.obtained
        facts["image"] = {"name": self.image_name, "id": self.image_id}
        (run_dir / "oracle").mkdir(exist_ok=True)
        (run_dir / "oracle" / oracle.path.name).write_bytes(oracle.content)
        env = {**oracle.meta.env, "BISECTOR_COMMIT": commit, "BISECTOR_RUN_DIR": "/run-dir",
               "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp"}
        cmd = ["sh", "-c", f"exec /data/envs/{name}/bin/python /oracle/{oracle.path.name} "
                           f"> /run-dir/stdout.txt 2> /run-dir/stderr.txt"]
        vols = {str(self.data): {"bind": "/data", "mode": "ro"},
                str(run_dir / "oracle"): {"bind": "/oracle", "mode": "ro"},
                str(run_dir): {"bind": "/run-dir", "mode": "rw"},
                str(cache_dir() / "wheels"): {"bind": "/wheels", "mode": "ro"}}
        run_id = uuid.uuid4().hex[:12]
        labels = {**self.labels, LABEL: owner_id(), "bisector.commit": commit,
                  "bisector.run": run_id, "bisector.role": "oracle"}
        t0 = time.monotonic()
        try:
            ctr = self.docker.containers.create(
                self.image_name, cmd, volumes=vols, environment=env, labels=labels,
                name=f"bisector-{self.labels.get('bisector.bisection', 'x')}-{commit[:10]}-"
                     f"{run_id[:6]}",
                network_mode="bridge" if oracle.meta.network else "none",
                mem_limit=self.memory, memswap_limit=self.memory, pids_limit=self.pids,
                device_requests=gpu_requests(self.gpus), working_dir="/run-dir",
            )
        except docker.errors.ImageNotFound:
            return self._infra(f"image {self.image_name} is missing: run `make images`")
        except docker.errors.DockerException as e:
            return self._infra(f"container could not be created: {e}")
        timed_out = False
        code: int | None = None
        oom = False
        try:
            try:
                ctr.start()
            except docker.errors.DockerException as e:
                return self._infra(f"container did not start: {e}")
            code, timed_out = wait_or_stop(ctr, oracle.meta.timeout)
            ctr.reload()
            state = ctr.attrs.get("State", {})
            oom = bool(state.get("OOMKilled"))
            if code is not None and code >= 128 and code - 128 in (9, 15):
                code = -(code - 128)  # a signal death, as a local run reports it
        finally:
            with contextlib.suppress(docker.errors.DockerException):
                ctr.remove(force=True)  # always, also on Ctrl-C
        duration = time.monotonic() - t0
        outcome, reason, reusable = classify(
            code, timed_out=timed_out, oom_killed=oom, timeout_outcome=oracle.meta.on_timeout,
            timeout_s=oracle.meta.timeout,
        )
        if oom:
            reason = f"killed for using more than its memory limit {self.memory} (OOM)"
        output_tail, facts = collect_output(out, err, facts)
        return RunResult(outcome, reason, code, duration, reusable, out, err, output_tail, facts)

    @staticmethod
    def _infra(reason: str) -> RunResult:
        return RunResult(Outcome.SKIP, reason, None, 0.0, reusable=False)
